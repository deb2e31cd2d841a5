/**
 * Diagnostic: drains N due jobs with one system at a concurrency and prints, per job, the
 * PostgreSQL transactions committed in the bench database and the tuples/scans on its tables
 * (pg_stat_database, pg_stat_user_tables deltas), plus the worker process's CPU.
 *   node --import tsx bench/tools/db-work-per-job.ts <system> [n=5000] [concurrency=50]
 * Other sessions on the same database count too: run it on a quiet server.
 */
import { admin, open } from "../lib/targets.js"
import { nowMs, sleep } from "../lib/stats.js"
import { loadSystem } from "../systems/index.js"
import { payload, type SystemId } from "../systems/types.js"

const [id, nArg, cArg] = process.argv.slice(2)
const n = Number(nArg ?? 5000)
const concurrency = Number(cArg ?? 50)
const target = await open("postgres-15")
const system = await loadSystem(id as SystemId)
const env = { target, ns: `diag_${process.pid}` }
await system.prepare(env)
const inst = await system.open(env, { pool: 10, concurrency })
for (let i = 0; i < n; i += 1000) await inst.enqueueMany(Array.from({ length: Math.min(1000, n - i) }, (_, j) => payload(i + j)))
const a = admin(target)
const stats = async () => {
  await sleep(600) // the stats collector
  const [d] = await a.query(`SELECT xact_commit::bigint AS x, tup_updated::bigint AS u, tup_inserted::bigint AS i,
    tup_deleted::bigint AS d, tup_fetched::bigint AS f, tup_returned::bigint AS r FROM pg_stat_database WHERE datname = current_database()`)
  const t = await a.query(`SELECT relname, n_tup_upd::bigint AS upd, n_tup_hot_upd::bigint AS hot, seq_scan::bigint AS seq,
    COALESCE(idx_scan, 0)::bigint AS idx FROM pg_stat_user_tables WHERE relname LIKE $1 OR schemaname LIKE $1`, [`${env.ns}%`])
  return { d, t }
}
// Stats are flushed when a backend exits: reopen the instance so its connections are fresh.
await inst.close()
const worker = await system.open(env, { pool: 10, concurrency })
const before = await stats()
let done = 0
const t0 = nowMs()
const cpu0 = process.cpuUsage()
const stop = await worker.work({ concurrency, handle: () => void done++ })
while (done < n) await sleep(5)
const seconds = (nowMs() - t0) / 1000
const cpu = process.cpuUsage(cpu0)
await stop()
await worker.close()
const after = await stats()
console.log(`${id}: ${n} jobs at c${concurrency} in ${seconds.toFixed(2)} s = ${Math.round(n / seconds)} jobs/s; CPU ${((cpu.user + cpu.system) / n).toFixed(0)} µs/job`)
for (const k of ["x", "u", "i", "d", "f", "r"] as const) {
  console.log(`  per job ${({ x: "xact_commit", u: "tup_updated", i: "tup_inserted", d: "tup_deleted", f: "tup_fetched", r: "tup_returned" })[k]}: ${((Number(after.d[k]) - Number(before.d[k])) / n).toFixed(2)}`)
}
for (const row of after.t) {
  const b = before.t.find((x: any) => x.relname === row.relname) ?? { upd: 0, hot: 0, seq: 0, idx: 0 }
  console.log(`  ${row.relname}: upd ${row.upd - b.upd}, hot ${row.hot - b.hot}, seq_scan ${row.seq - b.seq}, idx_scan ${row.idx - b.idx}`)
}
await system.drop(env)
await a.close()
await target.stop()
process.exit(0)
