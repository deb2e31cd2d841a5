/**
 * Diagnostic: EXPLAIN (ANALYZE, BUFFERS) of sqlane's probe and claim on PostgreSQL with N pending
 * jobs of one name, before and after a first slice of them was claimed and completed (the state
 * a drain is in). The statements are those of sqlane's driver (`jobClaim`, `jobProbe`).
 *   node --import tsx bench/tools/explain-claim.ts [n=20000] [claimed=5000]
 */
import { type DriverStatement, recorder } from "../lib/driverSql.js"
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
const driver = await recorder("pg", `${env.ns}_`)
const [claim10] = await driver.statements((d) => d.jobClaim([{ name: "bench", priority: 0 }], 10, nowUs, "w"))
const [probe] = await driver.statements((d) => d.jobProbe(["bench"]))
const explain = async (label: string, q: DriverStatement) => {
  const rows = await a.query(`EXPLAIN (ANALYZE, BUFFERS) ${q.text}`, q.params)
  console.log(`--- ${label}\n${rows.map((r: any) => r["QUERY PLAN"]).join("\n")}`)
}
await a.query("BEGIN")
await explain(`claim 10 of ${n} pending, fresh table (no ANALYZE yet)`, claim10)
await a.query("ROLLBACK")
await a.query(`UPDATE ${jobs} SET state = 'completed' WHERE id IN (SELECT id FROM ${jobs} ORDER BY id LIMIT ${claimed})`)
await a.query("BEGIN")
await explain(`claim 10 after ${claimed} completed`, claim10)
await a.query("ROLLBACK")
await explain(`probe after ${claimed} completed`, probe)
await a.query(`ANALYZE ${jobs}`)
await a.query("BEGIN")
await explain(`claim 10 after ANALYZE`, claim10)
await a.query("ROLLBACK")
await a.close()
await sqlane.drop(env)
await target.stop()
process.exit(0)
