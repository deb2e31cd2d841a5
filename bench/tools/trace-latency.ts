/**
 * Diagnostic: where the time goes between the COMMIT of an enqueue and the start of the handler,
 * for sqlane in one process. A tracer wraps Effect's own and records every span (sqlane's and
 * @effect/sql's `sql.execute`), and the timeline of each job is printed: enqueue returned →
 * the SQL statements the worker ran → handler start.
 *   node --import tsx bench/tools/trace-latency.ts [postgres-15|mariadb-10.11] [jobs=20] [other]
 * With "other" the worker is a second QueueLive (the hint path) instead of the producer's own.
 */
import * as MysqlClient from "@effect/sql-mysql2/MysqlClient"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Redacted from "effect/Redacted"
import * as Scope from "effect/Scope"
import * as Tracer from "effect/Tracer"
import { Job, Queue, QueueLive, Worker } from "../../src/index.js"
import { type DbId, open } from "../lib/targets.js"
import { percentile, sleep } from "../lib/stats.js"
import { BenchJob, sqlane } from "../systems/sqlane.js"
import { payload } from "../systems/types.js"

const [dbArg, nArg, mode] = process.argv.slice(2)
const db = (dbArg ?? "postgres-15") as DbId
const n = Number(nArg ?? 20)
const target = await open(db)
const env = { target, ns: `trace_${process.pid}` }

interface Rec { name: string; start: number; end: number; statement: string }
const recs: Array<Rec> = []
const tracing = Layer.unwrapEffect(
  Effect.map(Effect.tracer, (native) =>
    Layer.setTracer(Tracer.make({
      span: (name, parent, context, links, startTime, kind, options) => {
        const span = native.span(name, parent, context, links, startTime, kind, options)
        const initial = span.attributes.get("db.query.text") ?? (options as any)?.attributes?.["db.query.text"] ?? ""
        const rec: Rec = { name, start: Number(startTime) / 1e6, end: NaN, statement: String(initial).replace(/\s+/g, " ").slice(0, 70) }
        recs.push(rec)
        const end = span.end.bind(span)
        const attribute = span.attribute.bind(span)
        ;(span as any).attribute = (k: string, v: unknown) => {
          if (k === "db.query.text") rec.statement = String(v).replace(/\s+/g, " ").slice(0, 60)
          attribute(k, v)
        }
        ;(span as any).end = (endTime: bigint, exit: any) => {
          rec.end = Number(endTime) / 1e6
          end(endTime, exit)
        }
        return span
      },
      context: (f) => f()
    })))
)
const client = target.dialect === "pg"
  ? PgClient.layer({ url: Redacted.make(target.url), maxConnections: 10 })
  : MysqlClient.layer({ url: Redacted.make(target.url), maxConnections: 10 })
const make = () =>
  ManagedRuntime.make(QueueLive({ prefix: `${env.ns}_` }).pipe(Layer.provideMerge(client), Layer.provide(tracing), Layer.orDie))

await sqlane.prepare(env)
const producer = make()
const worker = mode === "other" ? make() : producer
const starts = new Map<number, number>()
const now = () => producer.runSync(Clock.currentTimeNanos) // the tracer's clock
const scope = await worker.runPromise(Scope.make())
await worker.runPromise(
  Worker.make({
    concurrency: 10,
    handlers: [Job.handler(BenchJob, (p) => Effect.sync(() => void starts.set(p.i, Number(now()) / 1e6)))]
  }).pipe(Scope.extend(scope)) as Effect.Effect<unknown, never, any>
)
const queue = await producer.runPromise(Queue.Queue)
await producer.runPromise(queue.enqueue(BenchJob, payload(-1)))
await sleep(500)
const commits = new Map<number, number>()
for (let i = 0; i < n; i++) {
  await sleep(Math.random() * 50)
  await producer.runPromise(queue.enqueue(BenchJob, payload(i)))
  commits.set(i, Number(now()) / 1e6)
}
await sleep(1000)
const lat = Array.from(commits, ([i, c]) => (starts.get(i) ?? Infinity) - c)
console.log(`${db} ${mode === "other" ? "other instance" : "same instance"}: p50 ${percentile(lat, 50).toFixed(2)} ms, p95 ${percentile(lat, 95).toFixed(2)} ms`)
for (const i of [0, 1, 2, Math.floor(n / 2), n - 1]) {
  const c = commits.get(i)!
  const s = starts.get(i) ?? NaN
  console.log(`job ${i}: handler started ${(s - c).toFixed(2)} ms after the enqueue returned`)
  for (const r of recs.filter((r) => r.start >= c - 15 && r.start <= s + 1)) {
    console.log(`  ${(r.start - c).toFixed(2).padStart(7)} → ${(r.end - c).toFixed(2).padStart(7)} ms  ${r.name} ${r.statement}`)
  }
}
await worker.runPromise(Scope.close(scope, { _tag: "Success", value: undefined } as any))
if (worker !== producer) await worker.dispose()
await producer.dispose()
await sqlane.drop(env)
await target.stop()
process.exit(0)
