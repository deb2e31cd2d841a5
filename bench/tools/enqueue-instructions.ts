/**
 * Diagnostic: the client-side instructions of one enqueue, layer by layer, counted by callgrind
 * (repeatable whatever else the machine does). Runs N one-job inserts one after another, in one of
 * these ways:
 * - `raw`: the driver alone (`pg` / `mysql2` pool, the INSERT text of sqlane's driver);
 * - `void`: the driver inside `ManagedRuntime.runPromise(Effect.promise(...))` (the bench's harness);
 * - `unsafe` / `unsafe-off`: @effect/sql's `sql.unsafe(text)` (its span and scope), tracer on / off;
 * - `fast` / `fast-scoped`: the statement's connection used directly, without / with `Effect.scoped`;
 * - `insert`: sqlane's `jobInsertMany` statement; `enqueue`: `Queue.enqueue`;
 * - `espq`: Effect's SqlPersistedQueue `offer` (bench/systems).
 * Instructions per enqueue = (total at N − total at 0) / N:
 *   valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.out node --import tsx \
 *     bench/tools/enqueue-instructions.ts [pg|mysql] <variant> <N>
 * (or bundle it with esbuild first: tsx's compilation is then not counted).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import { Database } from "../../src/internal/Database.js"
import { Queue } from "../../src/index.js"
import { benchRow, statementOf } from "../lib/driverSql.js"
import { BenchJob, runtime, sqlane } from "../systems/sqlane.js"
import { effectSqlPersistedQueue } from "../systems/effect-sql-persisted-queue.js"
import { payload, type Env } from "../systems/types.js"
import * as Mysql from "mysql2/promise"
import Pg from "pg"
const dialect = (process.argv[2] ?? "mysql") as "pg" | "mysql"
const variant = process.argv[3] ?? "enqueue"
const n = Number(process.argv[4] ?? 1000)
const env: Env = {
  target: dialect === "pg"
    ? { db: "postgres-15", dialect, url: "postgres://postgres@127.0.0.1:5432/postgres" } as any
    : { db: "mariadb-10.11", dialect, url: "mysql://root@127.0.0.1:3306/test" } as any,
  ns: `cg${process.pid}`
}
// The one-job insert of sqlane's driver (`jobInsertMany` of one row).
const insert = await statementOf<"payload" | "now">(dialect, `${env.ns}_`, (driver, slot) =>
  driver.jobInsertMany([benchRow(slot("payload"), slot("now"))], slot("now"), undefined))
const text = insert.text
const params = (i: number) => insert.params({ payload: JSON.stringify(payload(i)), now: Date.now() * 1000 })
let one: (i: number) => Promise<unknown>
let close: () => Promise<unknown>
if (variant === "espq") {
  await effectSqlPersistedQueue.drop(env).catch(() => {}); await effectSqlPersistedQueue.prepare(env)
  const inst = await effectSqlPersistedQueue.open(env, { pool: 2 })
  one = (i) => inst.enqueue(payload(i)); close = async () => { await inst.close(); await effectSqlPersistedQueue.drop(env) }
} else {
  await sqlane.drop(env); await sqlane.prepare(env)
  if (variant === "raw") {
    if (dialect === "pg") { const pool = new Pg.Pool({ connectionString: env.target.url, max: 2 }); one = (i) => pool.query(text, params(i)); close = () => pool.end() }
    else { const pool = Mysql.createPool({ uri: env.target.url, connectionLimit: 2 }); one = (i) => pool.execute(text, params(i)); close = () => pool.end() }
  } else {
    const rt = runtime(env, { pool: 2 })
    const pool2: any = dialect === "mysql" ? Mysql.createPool({ uri: env.target.url, connectionLimit: 2 }) : undefined
    const { driver } = await rt.runPromise(Database)
    const sql = await rt.runPromise(SqlClient.SqlClient)
    const queue = await rt.runPromise(Queue.Queue)
    const row = (i: number) => ({ name: "bench", payload: JSON.stringify(payload(i)), priority: 0, runAtUs: Date.now() * 1000, mutexKey: null, limitKey: null, traceContext: null })
    one = variant === "unsafe" ? (i) => rt.runPromise(dialect === "pg" ? sql.unsafe(text, params(i)) : sql.unsafe(text, params(i)).raw)
      : variant === "unsafe-off" ? (i) => rt.runPromise(Effect.withTracerEnabled(dialect === "pg" ? sql.unsafe(text, params(i)) : sql.unsafe(text, params(i)).raw, false))
      : variant === "fast" ? (i) => { const st: any = sql.unsafe(text, params(i)); return rt.runPromise(Effect.flatMap(st.acquirer, (c: any) => c.executeRaw(text, params(i)))) }
      : variant === "fast-scoped" ? (i) => { const st: any = sql.unsafe(text, params(i)); return rt.runPromise(Effect.scoped(Effect.flatMap(st.acquirer, (c: any) => c.executeRaw(text, params(i))))) }
      : variant === "void" ? (i) => rt.runPromise(Effect.promise(() => pool2.execute(text, params(i))))
      : variant === "insert" ? (i) => rt.runPromise(driver.jobInsertMany([row(i) as any], Date.now() * 1000, undefined))
      : (i) => rt.runPromise(queue.enqueue(BenchJob, payload(i)))
    close = async () => { await pool2?.end(); await rt.dispose(); await sqlane.drop(env) }
  }
}
for (let i = 0; i < n; i++) await one(i)
await close()
