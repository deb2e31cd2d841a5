/**
 * A program of sqlane/promise alone, run in a child process by test/suite/promise.ts: it creates a
 * queue on DATABASE_URL (table prefix PREFIX), starts a worker, enqueues three jobs, waits for them,
 * prints their states as JSON, closes the queue and returns without `process.exit`: it ends only if
 * `close()` left nothing open (pool, LISTEN connection, timers).
 */
import * as Schema from "effect/Schema"
import { createQueue, Job } from "../../src/promise.js"

const Double = Job.make("double", { payload: Schema.Struct({ n: Schema.Number }), success: Schema.Number })

const queue = await createQueue({ url: process.env.DATABASE_URL!, prefix: process.env.PREFIX!, maxConnections: 3 })
const worker = await queue.work(Double, async ({ n }) => n * 2, { concurrency: 2 })
const ids = await Promise.all([1, 2, 3].map((n) => queue.enqueue(Double, { n })))
await worker.drain()
const jobs = await Promise.all(ids.map((id) => queue.get(id)))
console.log(JSON.stringify(jobs.map((j) => ({ state: j.state, result: j.result }))))
await queue.close()
console.log("closed")
