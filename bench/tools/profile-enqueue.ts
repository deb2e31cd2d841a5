/**
 * CPU per job of sqlane's enqueue paths on PostgreSQL 15 (or MariaDB), 8 producers as in the
 * bench: `enqueue` (a transaction each) and `enqueueMany` of 100. With PROFILE=FILE, writes a CPU
 * profile of the chosen mode. SYSTEM=skip-locked (the hand-written queue's bare driver insert),
 * SYSTEM=espq (Effect's SqlPersistedQueue) or SYSTEM=effect-sql (`one` only: the row sqlane's enqueue
 * writes, sent as one `@effect/sql` statement through the same client, without sqlane) instead of sqlane.
 *
 *   node --import tsx bench/tools/profile-enqueue.ts [pg|mysql] [one|many] [N]
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import { benchRow, statementOf } from "../lib/driverSql.js"
import { runtime, sqlane as sqlaneSystem } from "../systems/sqlane.js"
import { skipLocked1 } from "../systems/skip-locked.js"
import { effectSqlPersistedQueue } from "../systems/effect-sql-persisted-queue.js"
import { type Env, payload, type System } from "../systems/types.js"

/** sqlane's insert of one job as a plain `@effect/sql` statement (sqlane's tables, sqlane's client). */
const effectSql: Pick<System, "prepare" | "drop" | "open"> = {
  prepare: (env) => sqlaneSystem.prepare(env),
  drop: (env) => sqlaneSystem.drop(env),
  open: async (env, o = {}) => {
    const rt = runtime(env, o)
    const sql = await rt.runPromise(SqlClient.SqlClient)
    // The one-job insert of sqlane's driver (`jobInsertMany` of one row).
    const insert = await statementOf<"payload" | "now">(env.target.dialect, `${env.ns}_`, (driver, slot) =>
      driver.jobInsertMany([benchRow(slot("payload"), slot("now"))], slot("now"), undefined))
    return {
      enqueue: (p) =>
        rt.runPromise(Effect.asVoid(
          sql.unsafe(insert.text, insert.params({ payload: JSON.stringify(p), now: Date.now() * 1000 })).raw
        )),
      enqueueMany: () => Promise.reject(new Error("SYSTEM=effect-sql measures `one` only")),
      work: () => Promise.reject(new Error("SYSTEM=effect-sql has no worker")),
      close: () => rt.dispose()
    }
  }
}
const sqlane = process.env.SYSTEM === "skip-locked"
  ? skipLocked1
  : process.env.SYSTEM === "espq"
  ? effectSqlPersistedQueue
  : process.env.SYSTEM === "effect-sql"
  ? effectSql
  : sqlaneSystem

const dialect = (process.argv[2] ?? "pg") as "pg" | "mysql"
const mode = process.argv[3] ?? "many"
const n = Number(process.argv[4] ?? (mode === "many" ? 400 : 2000))
const env: Env = {
  target: dialect === "pg"
    ? { db: "postgres-15", dialect, url: process.env.SQLANE_PG_URL ?? "postgres://postgres@127.0.0.1:5432/postgres" } as any
    : { db: "mariadb-10.11", dialect, url: process.env.SQLANE_MYSQL_URL ?? "mysql://root@127.0.0.1:3306/test" } as any,
  ns: `profenq${process.pid}`
}
await sqlane.drop(env)
await sqlane.prepare(env)
const inst = await sqlane.open(env, { pool: 10 })
const { Session } = await import("node:inspector/promises")
const session = new Session()
if (process.env.PROFILE) {
  session.connect()
  await session.post("Profiler.enable")
  await session.post("Profiler.start")
}
const t0 = performance.now()
const cpu0 = process.cpuUsage()
let k = 0
await Promise.all(Array.from({ length: 8 }, async () => {
  while (k < n) {
    const i = k++
    if (mode === "many") await inst.enqueueMany(Array.from({ length: 100 }, (_, j) => payload(i * 100 + j)))
    else await inst.enqueue(payload(i))
  }
}))
const ms = performance.now() - t0
const cpu = process.cpuUsage(cpu0)
const jobs = n * (mode === "many" ? 100 : 1)
if (process.env.PROFILE) {
  const { profile } = await session.post("Profiler.stop")
  ;(await import("node:fs")).writeFileSync(process.env.PROFILE, JSON.stringify(profile))
}
console.log(`${mode}: ${jobs} jobs in ${ms.toFixed(0)} ms: ${(jobs / ms * 1000).toFixed(0)} jobs/s, CPU ${((cpu.user + cpu.system) / jobs).toFixed(1)} µs/job (user ${(cpu.user / jobs).toFixed(1)}, system ${(cpu.system / jobs).toFixed(1)})`)
await inst.close()
await sqlane.drop(env)
