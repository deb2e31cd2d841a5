/**
 * Diagnostic: where `enqueueMany` of 100 stands against the hand-written insert, statement by
 * statement, on PostgreSQL 15 (8 concurrent callers, 3,000 batches each way): the hand-written
 * `jsonb_array_elements` insert and the statement of sqlane's driver (`jobInsertMany`: payloads joined
 * by U+001E, ids back as one text) through the raw `pg` driver, then that statement through
 * @effect/sql's `sql.unsafe` (tracer disabled, one `ManagedRuntime.runPromise` per call, as the bench
 * calls sqlane). sqlane's tables are made by its migrations, the hand-written one here; both are
 * dropped at the end.
 *   node --import tsx bench/tools/enqueue-many-sql.ts [rounds=2]
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as Effect from "effect/Effect"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Redacted from "effect/Redacted"
import Pg from "pg"
import { benchRow, recorder } from "../lib/driverSql.js"
import { sqlane } from "../systems/sqlane.js"
import { payload } from "../systems/types.js"

const url = process.env.SQLANE_PG_URL ?? "postgres://postgres@127.0.0.1:5432/postgres"
const rounds = Number(process.argv[2] ?? 2)
const t = `enqsql_${process.pid}`
const env = { target: { db: "postgres-15", dialect: "pg", url } as any, ns: t }
await sqlane.prepare(env)
const pool = new Pg.Pool({ connectionString: url, max: 10 })
await pool.query(`CREATE TABLE ${t}_floor (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, queue text NOT NULL,
  payload jsonb NOT NULL, run_at timestamptz NOT NULL DEFAULT now(), attempts int NOT NULL DEFAULT 0)`)
await pool.query(`CREATE INDEX ON ${t}_floor (queue, run_at, id)`)
const nowUs = Date.now() * 1000
// The driver's statement for 100 jobs of one name, priority and time: the payloads travel as one text.
const [many] = await (await recorder("pg", `${t}_`)).statements((driver) =>
  driver.jobInsertMany(Array.from({ length: 100 }, () => benchRow("", nowUs)), nowUs, undefined)
)
const sqlaneText = many.text
const joined = many.params.findIndex((p) => typeof p === "string" && p.includes("\u001e"))
const floorText = `INSERT INTO ${t}_floor (queue, payload) SELECT $1, x FROM jsonb_array_elements($2::jsonb) AS x`
const rt = ManagedRuntime.make(PgClient.layer({ url: Redacted.make(url), maxConnections: 10 }))
const sql = await rt.runPromise(SqlClient.SqlClient)
const batches = 3000
const measure = async (label: string, one: (batch: number) => Promise<unknown>) => {
  let k = 0
  const cpu0 = process.cpuUsage()
  const t0 = performance.now()
  await Promise.all(Array.from({ length: 8 }, async () => {
    while (k < batches) await one(k++)
  }))
  const cpu = process.cpuUsage(cpu0)
  const jobs = batches * 100
  console.log(`${label.padEnd(40)} ${(jobs / (performance.now() - t0) * 1000).toFixed(0).padStart(7)} jobs/s, client CPU ${((cpu.user + cpu.system) / jobs).toFixed(2)} µs/job`)
}
const json = (b: number) => Array.from({ length: 100 }, (_, j) => JSON.stringify(payload(b * 100 + j)))
const params = (b: number) => many.params.map((p, i) => (i === joined ? json(b).join("\u001e") : p))
try {
  for (let r = 0; r < rounds; r++) {
    await measure("hand-written insert, raw pg", (b) => pool.query(floorText, ["bench", `[${json(b).join(",")}]`]))
    await measure("sqlane's statement, raw pg", (b) => pool.query(sqlaneText, params(b)))
    await measure("sqlane's statement, @effect/sql", (b) =>
      rt.runPromise(Effect.withTracerEnabled(sql.unsafe(sqlaneText, params(b)), false)))
  }
} finally {
  await pool.query(`DROP TABLE ${t}_floor`)
  await sqlane.drop(env)
  await pool.end()
  await rt.dispose()
}
