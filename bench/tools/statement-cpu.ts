/**
 * Diagnostic: Node CPU per statement round trip, `SELECT 1` one after another on one connection,
 * through @effect/sql (PgClient / MysqlClient) and through the raw driver (pg / mysql2). The
 * difference is the client-side cost every statement of a queue pays in the worker process.
 *   node --import tsx bench/tools/statement-cpu.ts [pg|mysql] [n=5000]
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as MysqlClient from "@effect/sql-mysql2/MysqlClient"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Mysql from "mysql2/promise"
import Pg from "pg"

const dialect = (process.argv[2] ?? "pg") as "pg" | "mysql"
const n = Number(process.argv[3] ?? 5000)
const url = dialect === "pg"
  ? process.env.SQLANE_PG_URL ?? "postgres://postgres@127.0.0.1:5432/postgres"
  : process.env.SQLANE_MYSQL_URL ?? "mysql://root@127.0.0.1:3306/mysql"

const measure = async (label: string, loop: () => Promise<void>) => {
  const c0 = process.cpuUsage()
  const t0 = performance.now()
  await loop()
  const c = process.cpuUsage(c0)
  const ms = performance.now() - t0
  console.log(`${label}: ${((c.user + c.system) / n).toFixed(0)} µs CPU per statement, ${((ms * 1000) / n).toFixed(0)} µs wall`)
}

const effectLoop = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  for (let i = 0; i < 200; i++) yield* sql`SELECT 1`
  // Twice: the first round still pays for warming up (JIT) the code paths; the second is reported.
  for (const label of ["@effect/sql (warm-up round)", "@effect/sql"]) {
    yield* Effect.promise(() =>
      measure(label, () =>
        Effect.runPromise(Effect.gen(function*() {
          for (let i = 0; i < n; i++) yield* sql`SELECT 1`
        }))
      )
    )
  }
}).pipe(
  Effect.provide(
    dialect === "pg"
      ? PgClient.layer({ url: Redacted.make(url), maxConnections: 1 })
      : MysqlClient.layer({ url: Redacted.make(url), maxConnections: 1 })
  ),
  Effect.scoped
)

if (dialect === "pg") {
  const c = new Pg.Client({ connectionString: url })
  await c.connect()
  for (let i = 0; i < 200; i++) await c.query("SELECT 1")
  await measure("pg (raw)", async () => {
    for (let i = 0; i < n; i++) await c.query("SELECT 1")
  })
  await c.end()
} else {
  const c = await Mysql.createConnection({ uri: url })
  for (let i = 0; i < 200; i++) await c.query("SELECT 1")
  await measure("mysql2 (raw)", async () => {
    for (let i = 0; i < n; i++) await c.query("SELECT 1")
  })
  await c.end()
}
await Effect.runPromise(effectLoop as Effect.Effect<void, unknown>)
process.exit(0)
