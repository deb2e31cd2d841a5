/**
 * Diagnostic: where `enqueueMany` of 100 stands against the hand-written insert, statement by
 * statement, on PostgreSQL 15 (8 concurrent callers, 3,000 batches each way): the hand-written
 * `jsonb_array_elements` insert and sqlane's statement text (payloads joined by U+001E, ids back as one
 * text) through the raw `pg` driver, then sqlane's text through @effect/sql's `sql.unsafe` (tracer
 * disabled, one `ManagedRuntime.runPromise` per call, as the bench calls sqlane). The tables are
 * reduced copies of both schemas (sqlane's pending index), made and dropped here.
 *   node --import tsx bench/tools/enqueue-many-sql.ts [rounds=2]
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as Effect from "effect/Effect"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Redacted from "effect/Redacted"
import Pg from "pg"
import { payload } from "../systems/types.js"

const url = process.env.SQLANE_PG_URL ?? "postgres://postgres@127.0.0.1:5432/postgres"
const rounds = Number(process.argv[2] ?? 2)
const t = `enqsql_${process.pid}`
const pool = new Pg.Pool({ connectionString: url, max: 10 })
await pool.query(`CREATE TABLE ${t}_jobs (id bigserial PRIMARY KEY, name text NOT NULL, state text NOT NULL DEFAULT 'pending',
  payload text NOT NULL, priority int NOT NULL DEFAULT 0, run_at timestamptz NOT NULL, attempts int NOT NULL DEFAULT 0,
  created_at timestamptz NOT NULL, trace_context text)`)
await pool.query(`CREATE INDEX ON ${t}_jobs (name, priority, run_at, id) WHERE state = 'pending'`)
await pool.query(`CREATE TABLE ${t}_floor (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, queue text NOT NULL,
  payload jsonb NOT NULL, run_at timestamptz NOT NULL DEFAULT now(), attempts int NOT NULL DEFAULT 0)`)
await pool.query(`CREATE INDEX ON ${t}_floor (queue, run_at, id)`)
const sqlaneText = `WITH ins AS (INSERT INTO ${t}_jobs (name, payload, priority, run_at, created_at, trace_context)
    SELECT $1, v.payload, $2, TIMESTAMPTZ 'epoch' + $3 * INTERVAL '1 microsecond', TIMESTAMPTZ 'epoch' + $4 * INTERVAL '1 microsecond', $5
    FROM unnest(string_to_array($6::text, chr(30))) WITH ORDINALITY AS v(payload, ord) ORDER BY v.ord RETURNING id)
  SELECT string_agg(id::text, ',' ORDER BY id) AS ids FROM ins`
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
const nowUs = Date.now() * 1000
const params = (b: number) => ["bench", 0, nowUs, nowUs, null, json(b).join("\u001e")]
try {
  for (let r = 0; r < rounds; r++) {
    await measure("hand-written insert, raw pg", (b) => pool.query(floorText, ["bench", `[${json(b).join(",")}]`]))
    await measure("sqlane's statement, raw pg", (b) => pool.query(sqlaneText, params(b)))
    await measure("sqlane's statement, @effect/sql", (b) =>
      rt.runPromise(Effect.withTracerEnabled(sql.unsafe(sqlaneText, params(b)), false)))
  }
} finally {
  await pool.query(`DROP TABLE ${t}_jobs; DROP TABLE ${t}_floor`)
  await pool.end()
  await rt.dispose()
}
