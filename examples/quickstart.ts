// The README's quick start. `npm test` type-checks it (tsc) and runs it (test/quickstart.test.ts).
import { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Redacted, Schema } from "effect"
import { Job, Queue, QueueLive, type QueueOptions, Worker } from "sqlane"

// 1. A job: a name, a payload schema (Date, bigint, brands round-trip), optional retry Schedule.
export const SendEmail = Job.make("send-email", {
  payload: Schema.Struct({ orderId: Schema.Number, to: Schema.String, placedAt: Schema.Date })
})

// 2. QueueLive on top of your SqlClient (PgClient or MysqlClient); it migrates its tables.
export const AppLive = (url = "postgres://postgres@127.0.0.1:5432/postgres", options: QueueOptions = {}) =>
  QueueLive(options).pipe(Layer.provideMerge(PgClient.layer({ url: Redacted.make(url) })))

// 3. Enqueue inside your own transaction: the job commits or rolls back with the order.
export const placeOrder = (to: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const queue = yield* Queue.Queue
    return yield* sql.withTransaction(Effect.gen(function*() {
      const [order] = yield* sql<{ id: number }>`INSERT INTO orders (email) VALUES (${to}) RETURNING id`
      return yield* queue.enqueue(SendEmail, { orderId: order!.id, to, placedAt: new Date() })
    }))
  })

// 4. A worker: handlers run on fibers, at most 10 at a time.
export const WorkerLive = Worker.layer({
  concurrency: 10,
  handlers: [Job.handler(SendEmail, ({ orderId, to }) => Effect.log(`emailing ${to} about order ${orderId}`))]
})
