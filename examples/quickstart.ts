import { NodeRuntime } from "@effect/platform-node"
import { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { Config, Effect, Layer, Schema } from "effect"
import { Job, Queue, QueueLive, Worker } from "sqlane"

// A job: a name and a payload schema (Date, bigint and branded types round-trip).
const SendEmail = Job.make("send-email", {
  payload: Schema.Struct({ orderId: Schema.Number, to: Schema.String, placedAt: Schema.Date })
})

// Enqueue inside your own transaction: the job commits or rolls back with the order.
const placeOrder = (to: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const queue = yield* Queue.Queue
    return yield* sql.withTransaction(Effect.gen(function*() {
      const [order] = yield* sql<{ id: number }>`INSERT INTO orders (email) VALUES (${to}) RETURNING id`
      return yield* queue.enqueue(SendEmail, { orderId: order!.id, to, placedAt: new Date() })
    }))
  })

// A worker: handlers run on fibers, at most 10 at a time, for as long as its layer lives.
const WorkerLive = Worker.layer({
  concurrency: 10,
  handlers: [Job.handler(SendEmail, ({ orderId, to }) => Effect.log(`emailing ${to} about order ${orderId}`))]
})

// QueueLive on your SqlClient (PgClient here, MysqlClient for MySQL/MariaDB); it migrates its tables.
const AppLive = WorkerLive.pipe(
  Layer.provideMerge(QueueLive()),
  Layer.provideMerge(PgClient.layerConfig({ url: Config.redacted("DATABASE_URL") }))
)

const main = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE IF NOT EXISTS orders (id serial PRIMARY KEY, email text NOT NULL)`
  const jobId = yield* placeOrder("ada@example.com")
  yield* Effect.log(`order placed; job ${jobId} enqueued`)
  return yield* Effect.never // the worker runs until Ctrl-C, which lets running jobs finish
})

main.pipe(Effect.provide(AppLive), NodeRuntime.runMain)
