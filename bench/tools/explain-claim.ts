/**
 * Diagnostic: EXPLAIN (ANALYZE, BUFFERS) of sqlane's probe and claim on PostgreSQL with N pending
 * jobs of one name, before and after a first slice of them was claimed and completed (the state
 * a drain is in). The statements are copied from src/internal/driver/pg/jobs.ts.
 *   node --import tsx bench/tools/explain-claim.ts [n=20000] [claimed=5000]
 */
import { admin, open } from "../lib/targets.js"
import { sqlane } from "../systems/sqlane.js"
import { payload } from "../systems/types.js"

const n = Number(process.argv[2] ?? 20000)
const claimed = Number(process.argv[3] ?? 5000)
const target = await open("postgres-15")
const env = { target, ns: `explain_${process.pid}` }
await sqlane.prepare(env)
const inst = await sqlane.open(env, { pool: 2 })
for (let i = 0; i < n; i += 1000) await inst.enqueueMany(Array.from({ length: 1000 }, (_, j) => payload(i + j)))
await inst.close()
const a = admin(target)
const jobs = `${env.ns}_jobs`
const nowUs = Date.now() * 1000
const ts = `(TIMESTAMPTZ 'epoch' + ${nowUs}::bigint * INTERVAL '1 microsecond')`
const claim = (limit: number) => `UPDATE ${jobs} SET state = 'running', attempts = attempts + 1, claimed_at = ${ts}, worker_id = 'w'
  WHERE id IN (SELECT id FROM ${jobs} WHERE state = 'pending' AND name = ANY('{bench}'::text[]) AND run_at <= ${ts}
    ORDER BY priority, run_at, id LIMIT ${limit} FOR UPDATE SKIP LOCKED)
  RETURNING id`
const probe = `WITH RECURSIVE t AS (
  (SELECT name, run_at FROM ${jobs} WHERE state = 'pending' ORDER BY name, run_at LIMIT 1)
  UNION ALL
  SELECT n.name, n.run_at FROM t CROSS JOIN LATERAL (
    SELECT j.name, j.run_at FROM ${jobs} j WHERE j.state = 'pending' AND j.name > t.name ORDER BY j.name, j.run_at LIMIT 1) n)
  SELECT name FROM t WHERE name = ANY('{bench}'::text[])`
const explain = async (label: string, q: string) => {
  const rows = await a.query(`EXPLAIN (ANALYZE, BUFFERS) ${q}`)
  console.log(`--- ${label}\n${rows.map((r: any) => r["QUERY PLAN"]).join("\n")}`)
}
await a.query("BEGIN")
await explain(`claim 10 of ${n} pending, fresh table (no ANALYZE yet)`, claim(10))
await a.query("ROLLBACK")
await a.query(`UPDATE ${jobs} SET state = 'completed' WHERE id IN (SELECT id FROM ${jobs} ORDER BY id LIMIT ${claimed})`)
await a.query("BEGIN")
await explain(`claim 10 after ${claimed} completed`, claim(10))
await a.query("ROLLBACK")
await explain(`probe after ${claimed} completed`, probe)
await a.query(`ANALYZE ${jobs}`)
await a.query("BEGIN")
await explain(`claim 10 after ANALYZE`, claim(10))
await a.query("ROLLBACK")
await a.close()
await sqlane.drop(env)
await target.stop()
process.exit(0)
