/**
 * One soak worker process: `tsx soak/worker.ts <pg|mysql> <url> <concurrency>`.
 *
 * A `QueueLive` on the soak's tables (prefix `soak_`, no migrations: the driver ran them) and two
 * `Worker`s, each at `<concurrency>`: one with the `capped` kind's handler alone (so that its slots
 * pass: `ownWorker` in soak/jobs.ts), one with every other soak handler. It sends "ready" to the
 * driver (IPC) once both have started, and runs until SIGTERM/SIGINT (a graceful shutdown) or
 * SIGKILL (the chaos driver).
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as MysqlClient from "@effect/sql-mysql2/MysqlClient"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Redacted from "effect/Redacted"
import { QueueLive, Worker } from "../src/index.js"
import { handlers, ownWorker } from "./jobs.js"

const [dialect, url, concurrency] = process.argv.slice(2)

const client = dialect === "pg"
  ? PgClient.layer({ url: Redacted.make(url), maxConnections: 16 })
  : MysqlClient.layer({ url: Redacted.make(url), maxConnections: 16 })

const program = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const all = handlers(sql)
  const worker = (own: boolean) =>
    Worker.make({
      concurrency: Number(concurrency),
      handlers: all.filter((h) => ownWorker.has(h.job.name) === own),
      shutdownTimeout: "10 seconds"
    })
  const shared = yield* worker(false)
  const capped = yield* worker(true)
  process.send?.({ ready: [shared.id, capped.id] })
  yield* Effect.never
}).pipe(
  Effect.scoped,
  // Without LISTEN/NOTIFY (MariaDB) a worker learns of another process's jobs by its poll.
  Effect.provide(QueueLive({ prefix: "soak_", migrate: false, pollInterval: "1 second" }).pipe(Layer.provideMerge(client))),
  Effect.provide(Logger.minimumLogLevel(LogLevel.Info))
)

NodeRuntime.runMain(program as Effect.Effect<never, unknown>, { disableErrorReporting: false })
