/**
 * Diagnostic: the database's side of a PostgreSQL drain alone. Each lane is one connection that
 * runs sqlane's ride statement (end the attempts it claimed, claim as many: `WITH ended AS
 * (UPDATE … RETURNING), claimed AS (UPDATE … RETURNING) SELECT claimed rows LEFT JOIN the ends'
 * summary`) back to back, with no handler and no Effect runtime, over a backlog of N due jobs;
 * prints jobs/s per (lanes × batch). The statements are copied from src/internal/driver/pg/jobs.ts;
 * the raw `pg` driver runs them. FORM=plain runs the statement without the report of stale ends
 * (`WITH ended AS (UPDATE …) UPDATE … RETURNING`), to measure what that report costs.
 *
 * It bounds what a worker can reach: a worker at concurrency 50 writes its ends and claims in one
 * such statement at a time (1 × 50); writing two halves in turn would be 1 × 25, and two
 * connections at once 2 × 25.
 *   node --import tsx bench/tools/ride-ceiling.ts [n=20000] [lanes×batch …, default 1x50 1x25 2x25 2x50]
 */
import Pg from "pg"
import { admin, open } from "../lib/targets.js"
import { sqlane } from "../systems/sqlane.js"
import { payload } from "../systems/types.js"

const n = Number(process.argv[2] ?? 20000)
const shapes = (process.argv.length > 3 ? process.argv.slice(3) : ["1x50", "1x25", "2x25", "2x50"])
  .map((s) => s.split("x").map(Number) as [number, number])
const target = await open("postgres-15")
const env = { target, ns: `ceiling_${process.pid}` }
await sqlane.prepare(env)
const jobs = `${env.ns}_jobs`
const a = admin(target)
const claim = (k: number, worker: string) =>
  `UPDATE ${jobs} AS u SET state = 'running', attempts = LEAST(u.attempts, 2147483646) + 1, claimed_at = now(),
     worker_id = '${worker}'
   FROM (SELECT j.id FROM ${jobs} j
     WHERE j.state = 'pending' AND j.name = 'bench' AND j.priority = 0 AND j.run_at <= now() AND j.mutex_key IS NULL
     ORDER BY j.run_at, j.id LIMIT ${k} FOR UPDATE SKIP LOCKED) AS pick
   WHERE u.id = pick.id
   RETURNING u.id, u.name, u.payload, u.attempts, u.attempt_base, u.priority, u.errors, u.trace_context`
const finish = `UPDATE ${jobs} AS j SET
     state = CASE WHEN v.state = 'released' THEN 'pending' ELSE v.state END,
     run_at = COALESCE(TIMESTAMPTZ 'epoch' + v.run_at_us * INTERVAL '1 microsecond', j.run_at),
     finished_at = TIMESTAMPTZ 'epoch' + v.finished_at_us * INTERVAL '1 microsecond',
     last_error = COALESCE(v.last_error, j.last_error), errors = COALESCE(v.errors, j.errors), result = v.result,
     worker_id = NULL
   FROM unnest($1::bigint[], $2::int[], $3::text[], $4::bigint[], $5::bigint[], $6::text[], $7::text[], $8::text[])
     AS v(id, attempt, state, run_at_us, finished_at_us, last_error, errors, result)
   WHERE j.id = v.id AND j.attempts = v.attempt AND j.state = 'running'`
const ride = (k: number, worker: string) =>
  process.env.FORM === "plain"
    ? `WITH ended AS (${finish}) ${claim(k, worker)}`
    : `WITH ended AS (${finish} RETURNING v.id, v.attempt), claimed AS (${claim(k, worker)})
       SELECT c.*, a.applied FROM (SELECT CASE WHEN count(*) < ${k}
         THEN (SELECT coalesce(string_agg(w.id::text || ':' || w.attempt::text, ','), '') FROM ended AS w) END
         AS applied FROM ended AS e) AS a LEFT JOIN claimed c ON true`
try {
  for (const [lanes, k] of shapes) {
    await a.query(`TRUNCATE ${jobs}`)
    await a.query(
      `INSERT INTO ${jobs} (name, payload, priority, run_at, created_at)
       SELECT 'bench', $1, 0, now() - interval '1 second', now() FROM generate_series(1, ${n})`,
      [JSON.stringify(payload(1))]
    )
    await a.query(`VACUUM ANALYZE ${jobs}`)
    const clients = await Promise.all(Array.from({ length: lanes }, async () => {
      const c = new Pg.Client({ connectionString: target.url })
      await c.connect()
      return c
    }))
    let done = 0
    const t0 = performance.now()
    await Promise.all(clients.map(async (c, lane) => {
      let rows = (await c.query(claim(k, `w${lane}`))).rows
      while (rows.length > 0) {
        const nowUs = Date.now() * 1000
        const none = rows.map(() => null)
        const { rows: result } = await c.query(ride(k, `w${lane}`), [
          rows.map((r) => r.id), rows.map((r) => r.attempts), rows.map(() => "completed"), none,
          rows.map(() => nowUs), none, none, none
        ])
        done += rows.length
        rows = result.filter((r) => r.id !== null)
      }
    }))
    const seconds = (performance.now() - t0) / 1000
    console.log(`${lanes} × ${k}: ${Math.round(done / seconds)} jobs/s (${done} jobs)`)
    await Promise.all(clients.map((c) => c.end()))
  }
} finally {
  await a.close()
  await sqlane.drop(env)
}
