/**
 * The example test file of docs/testing.md, run on PostgreSQL: the code between the markers is
 * the docs' block, but for the database URL (checked by the first test).
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { inject, it as vitest } from "vitest"

// PostgreSQL 15, or 18 (embedded, started by the global setup) when 15 cannot be reached.
const pg = inject("targets").find((t) => t.id === "postgres-15") ?? inject("targets").find((t) => t.dialect === "pg")
const url = pg?.url ?? "postgres://postgres@127.0.0.1:5432/sqlane_test"
const docsUrl = `"postgres://postgres@127.0.0.1:5432/test"`

vitest("docs/testing.md's example is this file's, but for the database URL", () => {
  const docs = fs.readFileSync(path.join(import.meta.dirname, "..", "docs", "testing.md"), "utf8")
  const block = docs.slice(docs.indexOf("```ts\n// test/orders.test.ts") + 6)
  const self = fs.readFileSync(import.meta.filename, "utf8")
  const body = self.slice(self.indexOf("// --- docs/testing.md ---\n") + 27, self.lastIndexOf("// --- end ---"))
  if (block.slice(0, block.indexOf("```")) !== body.replace("Redacted.make(url)", `Redacted.make(${docsUrl})`)) {
    throw new Error("docs/testing.md's example differs from test/testing-docs.test.ts")
  }
})

// --- docs/testing.md ---
// test/orders.test.ts
import { PgClient } from "@effect/sql-pg"
import { assert, it } from "@effect/vitest"
import { Effect, Layer, Redacted, Schedule, Schema, TestClock } from "effect"
import { Job, Queue, Worker } from "sqlane"
import { drain, expectEnqueued, expectNotEnqueued, TestQueueLive, waitFor } from "sqlane/testing"

class Bounced extends Schema.TaggedError<Bounced>()("Bounced", { to: Schema.String }) {}

const SendEmail = Job.make("send-email", {
  payload: Schema.Struct({ to: Schema.String, orderId: Schema.Number }),
  failure: Bounced,
  retry: Job.attempts(3, Schedule.exponential("1 minute")) // 1 min, then 2 min
})

// The app's code under test: enqueues a confirmation now and a reminder in a day.
const placeOrder = (to: string, orderId: number) =>
  Effect.gen(function*() {
    const queue = yield* Queue.Queue
    yield* queue.enqueue(SendEmail, { to, orderId })
    yield* queue.enqueue(SendEmail, { to, orderId }, { delay: "1 day" })
  })

// Each test that provides it gets tables of its own, dropped when the test ends.
const TestLive = TestQueueLive({ uniquePrefix: true }).pipe(
  Layer.provideMerge(PgClient.layer({ url: Redacted.make(url) }))
)

it.effect("an order enqueues its emails", () =>
  Effect.gen(function*() {
    yield* placeOrder("ada@example.com", 1)
    const jobs = yield* expectEnqueued(SendEmail, { to: "ada@example.com" })
    assert.strictEqual(jobs.length, 2)
    yield* expectEnqueued(SendEmail, { orderId: 1 }, { runAt: new Date(24 * 60 * 60 * 1000) })
    yield* expectNotEnqueued(SendEmail, { to: "bob@example.com" })
  }).pipe(Effect.provide(TestLive)))

it.effect("a bounced email is retried with backoff, then sent; the reminder a day later", () =>
  Effect.gen(function*() {
    yield* placeOrder("bob@example.com", 2)
    let tries = 0
    const send = Job.handler(SendEmail, ({ to }) =>
      ++tries === 1 ? Effect.fail(new Bounced({ to })) : Effect.log(`sent to ${to}`))

    // Only what is due now: the confirmation's first attempt fails and waits a minute.
    const now = yield* drain({ handlers: [send] })
    assert.deepStrictEqual(now.map((r) => [r.attempt, r.outcome, r.retryAt?.getTime()]), [[1, "failed", 60_000]])

    // Step TestClock through the retry's backoff and the reminder's delay.
    const later = yield* drain({ handlers: [send], withScheduled: true })
    assert.deepStrictEqual(later.map((r) => [r.attempt, r.outcome]), [[2, "completed"], [1, "completed"]])
    assert.strictEqual(yield* TestClock.currentTimeMillis, 24 * 60 * 60 * 1000) // the reminder's run_at
    yield* expectNotEnqueued(SendEmail) // no pending email left
  }).pipe(Effect.provide(TestLive)))

it.effect("a worker started in the test sends the email", () =>
  Effect.gen(function*() {
    yield* Worker.make({ handlers: [Job.handler(SendEmail, () => Effect.void)] })
    const queue = yield* Queue.Queue
    const id = yield* queue.enqueue(SendEmail, { to: "cy@example.com", orderId: 3 })
    const job = yield* waitFor(id, "completed") // real time: the worker's round trips take some
    assert.strictEqual(job.attempts, 1)
  }).pipe(Effect.scoped, Effect.provide(TestLive)))
// --- end ---
