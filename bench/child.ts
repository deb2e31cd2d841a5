/**
 * A worker in its own OS process, driven by the benchmark over IPC:
 *   node --import tsx bench/child.ts '<json config>'
 * It warms up (`lib/warmup.ts`), opens the system's instance, says "opened", starts a worker on "go", says "ready", and then
 * reports each handler start ("latency": { i, at } on the machine's monotonic clock) or running
 * counts of finished handlers ("count"). "stop" stops the worker and exits.
 */
import { nowMs } from "./lib/stats.js"
import { warmUp } from "./lib/warmup.js"
import { loadSystem } from "./systems/index.js"
import type { Env, SystemId } from "./systems/types.js"


interface Config {
  readonly system: SystemId
  readonly env: Env
  readonly mode: "latency" | "count"
  readonly concurrency: number
  readonly workMs: number
  readonly pool?: number
  readonly pollMs?: number
  readonly warmLimit?: number
}

const config = JSON.parse(process.argv[2]) as Config
const send = (m: unknown) => process.send?.(m)
// The IPC channel closes when the benchmark exits (or is killed): do not outlive it.
process.on("disconnect", () => process.exit(1))

const main = async () => {
  const system = await loadSystem(config.system)
  // Warm, as a worker that has run for a while is (lib/warmup.ts).
  await warmUp(system, config.env, config.concurrency, { limit: config.warmLimit })
  const instance = await system.open(config.env, {
    concurrency: config.concurrency,
    ...(config.pool === undefined ? {} : { pool: config.pool }),
    ...(config.pollMs === undefined ? {} : { pollMs: config.pollMs })
  })
  let done = 0
  let stop: (() => Promise<void>) | undefined
  let timer: NodeJS.Timeout | undefined
  process.on("message", async (m: any) => {
    if (m?.t === "go") {
      const wait = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))
      stop = await instance.work({
        concurrency: config.concurrency,
        handle: config.mode === "latency"
          ? (p) => {
            send({ t: "start", i: p.i, at: nowMs() })
          }
          : config.workMs > 0
          ? async () => {
            await wait(config.workMs)
            done++
          }
          : () => {
            done++
          }
      })
      if (config.mode === "count") timer = setInterval(() => send({ t: "count", n: done }), 20)
      send({ t: "ready" })
    } else if (m?.t === "stop") {
      if (timer) clearInterval(timer)
      send({ t: "count", n: done })
      const hardExit = setTimeout(() => process.exit(0), 5000)
      try {
        await stop?.()
        await instance.close()
      } catch {
        // exiting anyway
      }
      clearTimeout(hardExit)
      process.exit(0)
    }
  })
  send({ t: "opened" })
}

main().catch((e) => {
  console.error(`[bench child ${config.system}]`, e)
  process.exit(1)
})
