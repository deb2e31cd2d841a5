/**
 * Warm-up: a process drains a few thousand jobs of its system, in tables of their own, before it
 * measures anything, so that V8 has compiled the worker's code. A worker spends its life warm; a
 * measured drain of a few seconds in a cold process measures the JIT instead (measured on sqlane:
 * a worker process's CPU per job about halved after a warm-up of 3,000 jobs).
 *
 * Every system gets the same warm-up, in every process that runs its worker: the benchmark's own
 * process (once per system, before its first drain) and each worker child process (before it says
 * "opened"). `BENCH_WARMUP=N` sets the jobs (default 5,000; 0: none).
 */
import { nowMs } from "./stats.js"
import { type Env, payload, type System } from "../systems/types.js"

/** The jobs of a warm-up (`BENCH_WARMUP`, default 5,000). */
export const warmUpJobs = (): number => {
  const n = Number(process.env.BENCH_WARMUP ?? 5000)
  return Number.isFinite(n) && n > 0 ? Math.floor(n) : 0
}

/**
 * Drains `warmUpJobs()` jobs of `system` at `concurrency` in a namespace of its own (`env.ns` with a
 * suffix), made and dropped here, under a concurrency limit of `limit` when given (the code a limited
 * drain runs is warmed too); gives up after `capMs` (the warm-up is not a measurement: a slow one is
 * only said on stderr).
 */
export const warmUp = async (
  system: System,
  env: Env,
  concurrency: number,
  { capMs = 30_000, limit }: { readonly capMs?: number; readonly limit?: number | undefined } = {}
): Promise<void> => {
  const n = warmUpJobs()
  if (n === 0) return
  const wenv: Env = { ...env, ns: `${env.ns}_w${process.pid.toString(36)}` }
  const t0 = nowMs()
  await system.prepare(wenv)
  try {
    const inst = await system.open(wenv, { concurrency })
    try {
      if (limit !== undefined) await inst.limitRunning?.(limit)
      for (let i = 0; i < n; i += 1000) {
        await inst.enqueueMany(Array.from({ length: Math.min(1000, n - i) }, (_, j) => payload(i + j)))
      }
      let done = 0
      let finished!: () => void
      const all = new Promise<void>((resolve) => (finished = resolve))
      const stop = await inst.work({
        concurrency,
        handle: () => {
          if (++done === n) finished()
        }
      })
      const timer = new Promise<void>((resolve) => setTimeout(resolve, capMs).unref())
      await Promise.race([all, timer])
      await stop()
      if (done < n) process.stderr.write(`[bench] warm-up of ${system.id}: ${done} of ${n} jobs in ${capMs / 1000} s\n`)
    } finally {
      await inst.close()
    }
  } finally {
    await system.drop(wenv)
  }
  if (process.env.BENCH_VERBOSE) process.stderr.write(`[bench]   warm-up of ${system.id}: ${((nowMs() - t0) / 1000).toFixed(1)} s\n`)
}

const warmed = new Set<string>()

/** `warmUp`, once per system in this process (the first drain of each system warms it). */
export const warmUpOnce = async (system: System, env: Env, concurrency: number): Promise<void> => {
  if (warmed.has(system.id)) return
  warmed.add(system.id)
  await warmUp(system, env, concurrency)
}
