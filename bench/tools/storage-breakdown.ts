/**
 * Diagnostic: where a waiting job's bytes go. Fills sqlane's table (and the hand-written floor's)
 * with N waiting jobs of the benchmark's payload, then prints every relation's size per job
 * (heap, TOAST, each index) and the average row size.
 *   node --import tsx bench/tools/storage-breakdown.ts [postgres-15|postgres-18|mariadb-10.11] [n=100000]
 */
import { admin, open, type DbId } from "../lib/targets.js"
import { skipLocked1 } from "../systems/skip-locked.js"
import { sqlane } from "../systems/sqlane.js"
import { payload, type System } from "../systems/types.js"

const db = (process.argv[2] ?? "postgres-15") as DbId
const n = Number(process.argv[3] ?? 100_000)
const target = await open(db)
try {
  for (const [system, table] of [
    [sqlane, "jobs"],
    [skipLocked1, "jobs"]
  ] as Array<[System, string]>) {
    const env = { target, ns: `stor_${process.pid}` }
    await system.drop(env).catch(() => {})
    await system.prepare(env)
    const inst = await system.open(env, { pool: 4 })
    for (let i = 0; i < n; i += 1000) await inst.enqueueMany(Array.from({ length: 1000 }, (_, j) => payload(i + j)))
    await inst.close()
    const a = admin(target)
    const name = `${env.ns}_${table}`
    try {
      console.log(`${system.id} (${n} waiting jobs, bytes per job):`)
      if (target.dialect === "pg") {
        await a.query(`VACUUM ANALYZE ${name}`)
        const rels = await a.query(
          `SELECT c.relname, c.relkind, pg_relation_size(c.oid) AS b FROM pg_class c
           WHERE c.oid = '${name}'::regclass
              OR c.oid = (SELECT reltoastrelid FROM pg_class WHERE oid = '${name}'::regclass)
              OR c.oid IN (SELECT indexrelid FROM pg_index WHERE indrelid = '${name}'::regclass)
           ORDER BY c.relkind DESC, c.relname`
        )
        for (const r of rels) console.log(`  ${r.relname} (${r.relkind}): ${(Number(r.b) / n).toFixed(1)}`)
        const t = await a.query(
          `SELECT pg_total_relation_size('${name}') AS b, avg(pg_column_size(j.*)) AS row FROM ${name} j`
        )
        console.log(`  total: ${(Number(t[0].b) / n).toFixed(1)}; average row (pg_column_size): ${Number(t[0].row).toFixed(1)}`)
      } else {
        await a.query(`ANALYZE TABLE \`${name}\``)
        const t = await a.query(
          `SELECT data_length AS d, index_length AS i FROM information_schema.tables
           WHERE table_schema = DATABASE() AND table_name = ?`,
          [name]
        )
        console.log(`  data (clustered primary key): ${(Number(t[0].d) / n).toFixed(1)}; secondary indexes: ${(Number(t[0].i) / n).toFixed(1)}`)
      }
    } finally {
      await a.close()
    }
    await system.drop(env)
  }
} finally {
  await target.stop()
}
process.exit(0)
