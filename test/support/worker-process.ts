/**
 * A worker or producer in its own OS process, for tests that cross processes.
 *
 *   worker-process.ts work    <pg|mysql> <url> <prefix> <worker-name> <total>
 *     runs "noop" jobs, recording each run in <prefix>ledger, until <total> jobs are completed
 *   worker-process.ts enqueue <pg|mysql> <url> <prefix> <unused> <count>
 *     enqueues <count> "noop" jobs and exits
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { Job, Queue, QueueLive, Worker } from "../../src/index.js"
import { clientLayer } from "./targets.js"

const [mode, dialect, url, prefix, workerName, count] = process.argv.slice(2)
const Noop = Job.make("noop", { payload: Schema.Struct({ i: Schema.Number }) })

// Without LISTEN/NOTIFY (MySQL/MariaDB) another process learns of new jobs by polling: poll often.
const layer = QueueLive({ prefix, migrate: false, pollInterval: (process.env.SQLANE_POLL ?? "5 seconds") as Duration.DurationInput }).pipe(
  Layer.provideMerge(clientLayer({ id: "child", dialect: dialect as "pg" | "mysql", url }, { maxConnections: 4 }))
)

const work = Effect.gen(function*() {
  const sql = (yield* SqlClient.SqlClient).withoutTransforms()
  const ledger = sql(`${prefix}ledger`)
  yield* Worker.make({
    concurrency: 5,
    handlers: [
      Job.handler(Noop, (_, ctx) =>
        Effect.orDie(sql`INSERT INTO ${ledger} (job_id, worker) VALUES (${ctx.id}, ${workerName})`).pipe(
          Effect.zipRight(Effect.sleep("2 millis"))
        ))
    ]
  })
  yield* sql`INSERT INTO ${ledger} (job_id, worker) VALUES (${"ready"}, ${workerName})`
  while (true) {
    const rows = yield* sql<{ n: number }>`SELECT COUNT(*) AS n FROM ${sql(`${prefix}jobs`)} WHERE state = 'completed'`
    if (Number(rows[0].n) >= Number(count)) return
    yield* Effect.sleep("50 millis")
  }
})

const enqueue = Effect.gen(function*() {
  const queue = yield* Queue.Queue
  for (let i = 0; i < Number(count); i++) yield* queue.enqueue(Noop, { i })
})

const program: Effect.Effect<void, unknown, any> = mode === "work" ? work : enqueue
Effect.runPromise(Effect.scoped(program).pipe(Effect.provide(layer)) as Effect.Effect<void, unknown>).then(
  () => process.exit(0),
  (e) => {
    console.error(e)
    process.exit(1)
  }
)
