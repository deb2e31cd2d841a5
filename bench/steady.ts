/**
 * steady: sustained load rather than a drain. A producer enqueues at a fixed rate — 1,000 jobs/s as
 * an `enqueueMany` of 10 every 10 ms — for 10 minutes (`--quick`: 1 minute), while one worker at
 * concurrency 50 runs 5 ms handlers, everything else at its defaults (completed rows kept, sqlane's
 * pruner running, the server's autovacuum). Reported per window (a minute; `--quick`: 10 s): jobs/s
 * completed and pickup latency (the producer's commit to the handler's start) p50/p95; at the end the
 * system's tables with their indexes, and on PostgreSQL their dead tuples.
 *
 * Not in a default run (it takes 10 minutes per system): `npm run bench -- --db postgres-15 --scenario steady`.
 */
import { admin } from "./lib/targets.js"
import { nowMs, percentile, sleep } from "./lib/stats.js"
import type { Ctx, Group } from "./scenarios.js"
import { each } from "./scenarios.js"
import { payload, type SystemId } from "./systems/types.js"

/** The systems the scenario runs (where the database has them). */
const steadySystems: ReadonlySet<SystemId> = new Set(["sqlane", "pg-boss-tuned", "graphile-worker", "effect-sql-persisted-queue"])

const RATE = 1000
const BATCH = 10
const CONCURRENCY = 50
const WORK_MS = 5

/** Dead tuples of the namespace's tables (PostgreSQL; undefined elsewhere). */
const deadTuples = async (ctx: Ctx, ns: string): Promise<number | undefined> => {
  if (ctx.target.dialect !== "pg") return undefined
  const a = admin(ctx.target)
  try {
    const rows = await a.query(
      `SELECT COALESCE(SUM(n_dead_tup), 0)::bigint AS n FROM pg_stat_user_tables WHERE relname LIKE $1 OR schemaname LIKE $1`,
      [`${ns}%`]
    )
    return Number(rows[0].n)
  } finally {
    await a.close()
  }
}

/** The server's `autovacuum` setting (PostgreSQL; undefined elsewhere). */
const autovacuum = async (ctx: Ctx): Promise<string | undefined> => {
  if (ctx.target.dialect !== "pg") return undefined
  const a = admin(ctx.target)
  try {
    return String((await a.query("SHOW autovacuum"))[0].autovacuum)
  } finally {
    await a.close()
  }
}

export const steadyGroup: Group = {
  name: "steady",
  scenarios: ["steady"],
  run: async (ctx) => {
    const minutes = ctx.quick ? 1 : 10
    const windowMs = ctx.quick ? 10_000 : 60_000
    const durationMs = minutes * 60_000
    await each(ctx, "steady", async (system, env) => {
      const inst = await system.open(env, { pool: 10, concurrency: CONCURRENCY })
      let stop: (() => Promise<void>) | undefined
      try {
        /** When each job's enqueue committed (ms), by payload `i`. */
        const committed = new Map<number, number>()
        const windows = Math.ceil(durationMs / windowMs)
        const done = new Array<number>(windows).fill(0)
        const pickups = Array.from({ length: windows }, () => new Array<number>())
        const t0 = nowMs()
        const windowOf = (t: number) => Math.min(windows - 1, Math.floor((t - t0) / windowMs))
        stop = await inst.work({
          concurrency: CONCURRENCY,
          handle: (p) => {
            const start = nowMs()
            const at = committed.get(p.i)
            if (at !== undefined) {
              pickups[windowOf(start)].push(Math.max(0, start - at))
              committed.delete(p.i)
            }
            return new Promise<void>((r) =>
              setTimeout(() => {
                const end = nowMs()
                if (end - t0 < durationMs) done[windowOf(end)]++
                r()
              }, WORK_MS)
            )
          }
        })
        // The producer: a batch every BATCH / RATE seconds, on a fixed timetable (a late batch does
        // not push the later ones back), until the duration is over: a system whose enqueues fall
        // behind the timetable gets fewer jobs, not a longer run.
        const everyMs = (1000 * BATCH) / RATE
        let behind = 0
        let sent = 0
        for (let k = 0; k * everyMs < durationMs; k++) {
          const due = t0 + k * everyMs
          const wait = due - nowMs()
          if (wait > 0) await sleep(wait)
          else if (wait < -everyMs) behind++
          if (nowMs() - t0 >= durationMs) break
          const batch = Array.from({ length: BATCH }, (_, j) => payload(k * BATCH + j))
          await inst.enqueueMany(batch)
          sent += batch.length
          const at = nowMs()
          for (const p of batch) if (!committed.has(p.i)) committed.set(p.i, at)
        }
        const planned = Math.ceil(durationMs / everyMs) * BATCH
        if (behind > 0) ctx.note("steady", system.id, `the producer was more than one batch late ${behind} times`)
        if (sent < planned) ctx.note("steady", system.id, `the producer enqueued ${sent} of ${planned} jobs in the time (its enqueues fell behind)`)
        ctx.record("steady", system.id, "producer_jobs_per_s", sent / (durationMs / 1000), "jobs/s")
        for (let w = 0; w < windows; w++) {
          const span = Math.min(windowMs, durationMs - w * windowMs) / 1000
          ctx.record("steady", system.id, `jobs_per_s_window_${w + 1}`, done[w] / span, "jobs/s")
          if (pickups[w].length > 0) {
            ctx.record("steady", system.id, `p50_ms_window_${w + 1}`, percentile(pickups[w], 50), "ms")
            ctx.record("steady", system.id, `p95_ms_window_${w + 1}`, percentile(pickups[w], 95), "ms")
          }
        }
        const last = windows - 1
        ctx.record("steady", system.id, "jobs_per_s_first_minute", done[0] / (windowMs / 1000), "jobs/s")
        ctx.record("steady", system.id, "jobs_per_s_last_minute", done[last] / (Math.min(windowMs, durationMs - last * windowMs) / 1000), "jobs/s")
        if (pickups[0].length > 0) ctx.record("steady", system.id, "p95_ms_first_minute", percentile(pickups[0], 95), "ms")
        if (pickups[last].length > 0) ctx.record("steady", system.id, "p95_ms_last_minute", percentile(pickups[last], 95), "ms")
        await stop()
        stop = undefined
        ctx.record("steady", system.id, "table_bytes_end", await system.bytes(env), "B")
        const dead = await deadTuples(ctx, env.ns)
        if (dead !== undefined) ctx.record("steady", system.id, "dead_tuples_end", dead, "rows")
        // Without autovacuum nothing removes dead tuples during the run: say so beside them.
        if ((await autovacuum(ctx)) === "off") ctx.note("steady", system.id, "the server runs with autovacuum = off")
      } finally {
        if (stop !== undefined) await stop().catch(() => {})
        await inst.close().catch(() => {})
      }
    }, (s) => steadySystems.has(s.id))
  }
}
