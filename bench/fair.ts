/**
 * fair: fair shares by key. One key's backlog of 10,000 due jobs (`--quick`: 2,000) is being
 * drained by one worker at concurrency 10 (empty handlers) when 100 jobs of another key are enqueued
 * in one transaction; reported: the time from that commit to each of the small key's jobs starting
 * (p50, p95, max), and how many of the big key's jobs started meanwhile. Without fair shares the
 * small key's jobs would wait for the whole backlog ahead of them.
 *
 * sqlane only: of the peers, only pg-boss (groups) has a comparable mode, not benchmarked here.
 * `npm run bench -- --db postgres-15 --scenario fair`.
 */
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import { Job, Queue, Worker } from "../src/index.js"
import { settle } from "./lib/settle.js"
import { nowMs, percentile, sleep } from "./lib/stats.js"
import type { Group } from "./scenarios.js"
import { each } from "./scenarios.js"
import { runtime } from "./systems/sqlane.js"

const FairJob = Job.make("bench-fair", {
  payload: Schema.Struct({ key: Schema.String, i: Schema.Number }),
  limits: { key: (p) => p.key }
})

const CONCURRENCY = 10
const SMALL = 100

export const fairGroup: Group = {
  name: "fair",
  scenarios: ["fair"],
  run: async (ctx) => {
    const big = ctx.quick ? 2_000 : 10_000
    await each(ctx, "fair", async (_system, env) => {
      const rt = runtime(env, { pool: 10 })
      const scope = await rt.runPromise(Scope.make())
      try {
        const queue = await rt.runPromise(Queue.Queue)
        for (let i = 0; i < big; i += 1000) {
          const n = Math.min(1000, big - i)
          await rt.runPromise(queue.enqueueMany(FairJob, Array.from({ length: n }, (_, j) => ({ key: "big", i: i + j }))))
        }
        await settle(env)
        let bigStarted = 0
        const smallStarts: Array<number> = []
        await rt.runPromise(
          Worker.make({
            concurrency: CONCURRENCY,
            handlers: [
              Job.handler(FairJob, (p) =>
                Effect.sync(() => {
                  if (p.key === "big") bigStarted++
                  else smallStarts.push(nowMs())
                }))
            ]
          }).pipe(Scope.extend(scope)) as Effect.Effect<unknown, never, any>
        )
        // The backlog is being drained: a tenth of it started.
        const started = nowMs()
        const deadline = started + 60_000
        while (bigStarted < big / 10 && nowMs() < deadline) await sleep(5)
        const bigBefore = bigStarted
        ctx.record("fair", "sqlane", "jobs_per_s_before", bigBefore / ((nowMs() - started) / 1000), "jobs/s")
        await rt.runPromise(queue.enqueueMany(FairJob, Array.from({ length: SMALL }, (_, i) => ({ key: "small", i }))))
        const committed = nowMs()
        while (smallStarts.length < SMALL && nowMs() < committed + 30_000) await sleep(2)
        if (smallStarts.length < SMALL) ctx.note("fair", "sqlane", `capped: ${smallStarts.length} of ${SMALL} small-key jobs in 30 s`)
        const waits = smallStarts.map((t) => Math.max(0, t - committed))
        ctx.record("fair", "sqlane", "p50_ms", percentile(waits, 50), "ms")
        ctx.record("fair", "sqlane", "p95_ms", percentile(waits, 95), "ms")
        ctx.record("fair", "sqlane", "max_ms", Math.max(...waits), "ms")
        ctx.record("fair", "sqlane", "big_started_meanwhile", bigStarted - bigBefore, "jobs")
      } finally {
        await rt.runPromise(Scope.close(scope, Exit.void)).catch(() => {})
        await rt.dispose().catch(() => {})
      }
    }, (s) => s.id === "sqlane")
  }
}
