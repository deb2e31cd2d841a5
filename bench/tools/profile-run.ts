/**
 * Drains N due jobs with one sqlane worker (concurrency C) on PostgreSQL 15 or MariaDB and prints
 * jobs/s and CPU µs per job. Run under `node --cpu-prof` to see where the worker's CPU goes:
 *
 *   node --cpu-prof --cpu-prof-dir=/tmp/prof --import tsx bench/tools/profile-run.ts [pg|mysql] [N] [C] [workMs]
 *
 * `workMs` > 0: each handler waits that long (a `setTimeout`, like the real-work scenario), and the
 * line also gives the share of the ceiling (C × 1000 / workMs jobs/s).
 */
import { sqlane } from "../systems/sqlane.js"
import { payload, type Env } from "../systems/types.js"

const dialect = (process.argv[2] ?? "pg") as "pg" | "mysql"
const n = Number(process.argv[3] ?? 20000)
const concurrency = Number(process.argv[4] ?? 50)
const workMs = Number(process.argv[5] ?? 0)
const env: Env = {
  target: dialect === "pg"
    ? { db: "postgres-15", dialect, url: process.env.SQLANE_PG_URL ?? "postgres://postgres@127.0.0.1:5432/postgres" } as any
    : { db: "mariadb-10.11", dialect, url: process.env.SQLANE_MYSQL_URL ?? "mysql://root@127.0.0.1:3306/test" } as any,
  ns: `prof${process.pid}`
}
await sqlane.drop(env)
await sqlane.prepare(env)
const inst = await sqlane.open(env, { pool: 10, concurrency })
for (let i = 0; i < n; i += 1000) await inst.enqueueMany(Array.from({ length: Math.min(1000, n - i) }, (_, j) => payload(i + j)))
// With PROFILE=file.cpuprofile, a CPU profile of the drain alone (not the enqueue) is written.
const { Session } = await import("node:inspector/promises")
const session = new Session()
if (process.env.PROFILE) {
  session.connect()
  await session.post("Profiler.enable")
  await session.post("Profiler.start")
}
let done = 0
let resolve!: () => void
const finished = new Promise<void>((r) => (resolve = r))
const t0 = performance.now()
const cpu0 = process.cpuUsage()
const end = () => { if (++done === n) resolve() }
/** The handlers' own time (ms): the timer's wait as it fired, late or not. */
let handlerMs = 0
const stop = await inst.work({
  concurrency,
  handle: workMs > 0
    ? () => {
      const started = performance.now()
      return new Promise<void>((r) => setTimeout(() => { handlerMs += performance.now() - started; end(); r() }, workMs))
    }
    : end
})
await finished
const ms = performance.now() - t0
if (process.env.PROFILE) {
  const { profile } = await session.post("Profiler.stop")
  const fs = await import("node:fs")
  fs.writeFileSync(process.env.PROFILE, JSON.stringify(profile))
}
const cpu = process.cpuUsage(cpu0)
// With handlers that wait: a slot's time per job (concurrency × elapsed ÷ jobs), of which the handler's.
const share = workMs > 0
  ? ` (${(100 * (n / ms * 1000) / (concurrency * 1000 / workMs)).toFixed(0)} % of the ceiling; per job a slot spent ${
    (concurrency * ms / n).toFixed(2)
  } ms, the handler ${(handlerMs / n).toFixed(2)} ms)`
  : ""
console.log(`${n} jobs in ${ms.toFixed(0)} ms: ${(n / ms * 1000).toFixed(0)} jobs/s${share}, CPU ${((cpu.user + cpu.system) / n).toFixed(1)} µs/job (user ${(cpu.user / n).toFixed(1)}, system ${(cpu.system / n).toFixed(1)})`)
await stop()
await inst.close()
await sqlane.drop(env)
