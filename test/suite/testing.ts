/**
 * The testing suite: `sqlane/testing` — TestQueueLive, drain (with TestClock steps), expectEnqueued,
 * expectNotEnqueued, waitFor — as an app's tests use it, on every database.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import * as TestClock from "effect/TestClock"
import { Admin, Errors, Job, Migrations, Queue, QueueConfig, Worker } from "sqlane"
import {
  drain,
  expectEnqueued,
  expectNotEnqueued,
  TestQueueLive,
  testQueueOptions,
  uniquePrefix,
  waitFor
} from "sqlane/testing"
import { dropTables } from "../support/helpers.js"
import { clientLayer, type Target } from "../support/targets.js"

class Declined extends Schema.TaggedError<Declined>()("Declined", { reason: Schema.String }) {}

const Email = Job.make("t-email", {
  payload: Schema.Struct({
    to: Schema.String,
    order: Schema.Struct({ id: Schema.Number, placedAt: Schema.Date }),
    tags: Schema.Array(Schema.String)
  })
})
const Charge = Job.make("t-charge", {
  payload: Schema.Struct({ cents: Schema.Number }),
  failure: Declined,
  // 10 s, then 20 s: an attempt's failure is retried until the third.
  retry: Job.attempts(3, Schedule.exponential("10 seconds")),
  isPermanent: (e) => e.reason === "stolen card"
})
const Forever = Job.make("t-forever", {
  payload: Schema.Struct({}),
  failure: Declined,
  retry: Schedule.spaced("1 second")
})

/** 2 starts a minute per account, and 3 a minute of the name in all. */
const Sync = Job.make("t-sync", {
  payload: Schema.Struct({ account: Schema.String, n: Schema.Number }),
  limits: { key: (p) => p.account, ratePerKey: { starts: 2, per: "1 minute" }, rate: { starts: 3, per: "1 minute" } }
})

const email = (to: string, id = 1) => ({ to, order: { id, placedAt: new Date(0) }, tags: ["welcome"] })

export const testing = (target: Target) => {
  const name = (title: string) => `[${target.id}] ${title}`

  /** Runs `body` on a TestQueueLive of its own prefix, dropping its tables afterwards. */
  const withTestQueue = <A, E>(body: Effect.Effect<A, E, any>) => {
    const prefix = uniquePrefix("tq_")
    const client = clientLayer(target)
    return body.pipe(
      Effect.scoped,
      Effect.provide(TestQueueLive({ prefix }).pipe(Layer.provideMerge(client))),
      Effect.ensuring(dropTables(prefix).pipe(Effect.provide(client), Effect.ignore))
    ) as Effect.Effect<A, E | Error, never>
  }

  describe(`testing [${target.id}]`, () => {
    it.effect(name("TestQueueLive: the TestClock settings; with uniquePrefix, tables of its own per build, dropped at close"), () =>
      withTestQueue(Effect.gen(function*() {
        const config = yield* QueueConfig.QueueConfig
        assert.deepStrictEqual(
          [config.pollInterval, config.rescueInterval, config.heartbeatInterval, config.leaseTimeout].map(Duration.toMillis),
          [3_600_000, 3_600_000, 3_600_000, 3650 * 86_400_000]
        )
        assert.strictEqual(config.prune, false)
        assert.deepStrictEqual(QueueConfig.make(testQueueOptions).pollInterval, config.pollInterval)
        assert.notStrictEqual(uniquePrefix(), uniquePrefix())
        assert.match(uniquePrefix(), /^sqlane_[a-z0-9_]+_$/)
        assert.isAtMost(uniquePrefix("x".repeat(60)).length, 40)

        const live = TestQueueLive({ uniquePrefix: true, prefix: "tqu_" })
        const scope = yield* Scope.make()
        const prefixes: Array<string> = []
        for (let i = 0; i < 2; i++) {
          const context = yield* Layer.buildWithScope(live, scope)
          const built = Context.get(context, QueueConfig.QueueConfig).prefix
          prefixes.push(built)
          const queue = Context.get(context, Queue.Queue)
          yield* queue.enqueue(Email, email("ada@example.com"))
          assert.isTrue((yield* Migrations.status(built)).applied !== undefined)
        }
        assert.notStrictEqual(prefixes[0], prefixes[1])
        for (const p of prefixes) assert.isTrue(p.startsWith("tqu_"), p)
        yield* Scope.close(scope, Exit.void)
        for (const p of prefixes) assert.strictEqual((yield* Migrations.status(p)).applied, undefined)
      })))

    it.effect(name("drain runs the due jobs and returns how each attempt ended; nothing due is left"), () =>
      withTestQueue(Effect.gen(function*() {
        const queue = yield* Queue.Queue
        const sent: Array<string> = []
        const ok = yield* queue.enqueue(Email, email("ada@example.com"))
        const retried = yield* queue.enqueue(Charge, { cents: 100 })
        const stolen = yield* queue.enqueue(Charge, { cents: 200 })
        const later = yield* queue.enqueue(Email, email("bob@example.com"), { delay: "1 hour" })
        const ran = yield* drain({
          handlers: [
            Job.handler(Email, (p) => Effect.sync(() => void sent.push(p.to))),
            Job.handler(Charge, (p) => Effect.fail(new Declined({ reason: p.cents === 200 ? "stolen card" : "try later" })))
          ]
        })
        const byId = new Map(ran.map((r) => [r.id, r]))
        assert.strictEqual(ran.length, 3)
        assert.strictEqual(byId.get(ok)?.outcome, "completed")
        assert.strictEqual(byId.get(retried)?.outcome, "failed")
        assert.strictEqual(byId.get(retried)?.retryAt?.getTime(), 10_000)
        assert.strictEqual(byId.get(stolen)?.outcome, "dead")
        assert.include(byId.get(stolen)?.error, "stolen card")
        assert.isFalse(byId.has(later))
        assert.deepStrictEqual(sent, ["ada@example.com"])
        assert.strictEqual((yield* queue.get(later)).state, "pending")
        assert.strictEqual((yield* queue.get(retried)).state, "pending")
        // Nothing of these names is due or running.
        const status = yield* (yield* Admin.Admin).status
        for (const n of status.names) {
          assert.strictEqual(n.due, 0, n.name)
          assert.strictEqual(n.running, 0, n.name)
        }
        // A second drain finds nothing to run.
        assert.deepStrictEqual(yield* drain({ handlers: [Job.handler(Email, () => Effect.void)] }), [])
      })))

    it.effect(name("drain withScheduled steps TestClock through a delay and a retry's backoff"), () =>
      withTestQueue(Effect.gen(function*() {
        const queue = yield* Queue.Queue
        const delayed = yield* queue.enqueue(Charge, { cents: 1 }, { delay: "1 hour" })
        const doomed = yield* queue.enqueue(Charge, { cents: 2 })
        const far = yield* queue.enqueue(Email, email("later@example.com"), { delay: "10 days" })
        const handlers = [
          // The first attempt of 1 cent fails; its retry succeeds. 2 cents fail every time.
          Job.handler(Charge, (p, ctx) =>
            p.cents === 1 && ctx.attempt > 1 ? Effect.void : Effect.fail(new Declined({ reason: "try later" }))),
          Job.handler(Email, () => Effect.void)
        ]
        const ran = yield* drain({ handlers, withScheduled: true, until: "1 day" })
        const of = (id: string) => ran.filter((r) => r.id === id).map((r) => [r.attempt, r.outcome, r.at.getTime()])
        assert.deepStrictEqual(of(doomed), [[1, "failed", 0], [2, "failed", 10_000], [3, "dead", 30_000]])
        assert.deepStrictEqual(of(delayed), [[1, "failed", 3_600_000], [2, "completed", 3_610_000]])
        assert.deepStrictEqual(of(far), [])
        assert.strictEqual((yield* queue.get(delayed)).state, "completed")
        assert.strictEqual((yield* queue.get(doomed)).state, "dead")
        assert.strictEqual((yield* queue.get(far)).state, "pending")
        // TestClock stopped at the last job run.
        assert.strictEqual(yield* TestClock.currentTimeMillis, 3_610_000)
        // Without `until`, the job 10 days away runs too.
        const rest = yield* drain({ handlers, withScheduled: true })
        assert.deepStrictEqual(rest.map((r) => [r.id, r.outcome, r.at.getTime()]), [[far, "completed", 10 * 86_400_000]])
      })))

    it.effect(name("drain withScheduled steps TestClock to the windows of rate limits; without it, jobs a rate holds back are left"), () =>
      withTestQueue(Effect.gen(function*() {
        const queue = yield* Queue.Queue
        const ids = yield* queue.enqueueMany(Sync, [0, 1, 2, 3, 4].map((n) => ({ account: n < 4 ? "a" : "b", n })))
        const handlers = [Job.handler(Sync, () => Effect.void)]
        // Due now, the rates admit 2 of account a and b's one (3 of the name): the rest are left pending.
        const now = yield* drain({ handlers, concurrency: 5 })
        assert.deepStrictEqual(now.map((r) => [r.outcome, r.at.getTime()]), [["completed", 0], ["completed", 0], ["completed", 0]])
        assert.strictEqual(yield* TestClock.currentTimeMillis, 0)
        // Stepped to the next window (a minute on): a's last 2 jobs start in it, each attempt once.
        const later = yield* drain({ handlers, concurrency: 5, withScheduled: true })
        assert.deepStrictEqual(later.map((r) => [r.outcome, r.attempt, r.at.getTime()]), [["completed", 1, 60_000], ["completed", 1, 60_000]])
        for (const id of ids) assert.strictEqual((yield* queue.get(id)).state, "completed")
        assert.strictEqual(yield* TestClock.currentTimeMillis, 60_000)
      })))

    it.effect(name("drain withScheduled steps TestClock once to the end of a key's RateLimited hold, not through the key's windows"), () =>
      withTestQueue(Effect.gen(function*() {
        const queue = yield* Queue.Queue
        const [first, second] = yield* queue.enqueueMany(Sync, [{ account: "c", n: 0 }, { account: "c", n: 1 }])
        let asked = false
        const handlers = [Job.handler(Sync, () =>
          asked ? Effect.void : Effect.zipRight(
            Effect.sync(() => void (asked = true)),
            Effect.fail(new Errors.RateLimited({ delay: 3_600_000, scope: "key" }))
          ))]
        const ran = yield* drain({ handlers, withScheduled: true, maxSteps: 3 })
        // The hold's attempt is not listed; both jobs start when the hold ends, an hour on.
        // (The other job first: it was due the longest.)
        assert.deepStrictEqual(ran.map((r) => [r.id, r.attempt, r.at.getTime()]), [[second, 1, 3_600_000], [first, 1, 3_600_000]])
      })))

    it.effect(name("drain reports a job cancelled while it ran, and fails after maxSteps of a job retried for ever"), () =>
      withTestQueue(Effect.gen(function*() {
        const queue = yield* Queue.Queue
        const id = yield* queue.enqueue(Charge, { cents: 3 })
        const ran = yield* drain({
          handlers: [Job.handler(Charge, (_, ctx) => Effect.zipRight(Effect.orDie(queue.cancel(ctx.id)), Effect.never))]
        })
        assert.deepStrictEqual(ran.map((r) => [r.id, r.outcome]), [[id, "cancelled"]])

        yield* queue.enqueue(Forever, {})
        const exit = yield* Effect.exit(drain({
          handlers: [Job.handler(Forever, () => Effect.fail(new Declined({ reason: "again" })))],
          withScheduled: true,
          maxSteps: 3
        }))
        assert.isTrue(Exit.isFailure(exit))
        const error = Exit.isFailure(exit) ? exit.cause : undefined
        assert.include(String(error), "DrainIncomplete")
        assert.include(String(error), "after 3 steps of TestClock")
      })))

    it.effect(name("drain fails after its timeout while a handler waits on TestClock, and releases the job"), () =>
      withTestQueue(Effect.gen(function*() {
        const queue = yield* Queue.Queue
        const id = yield* queue.enqueue(Charge, { cents: 4 })
        const error = yield* Effect.flip(drain({
          handlers: [Job.handler(Charge, () => Effect.sleep("1 hour"))],
          timeout: "300 millis"
        }))
        assert.strictEqual(error._tag, "DrainIncomplete")
        assert.strictEqual(error._tag === "DrainIncomplete" && error.reason, "timeout")
        assert.include(error.message, `after 300 ms (real time)`)
        const job = yield* queue.get(id)
        assert.strictEqual(job.state, "pending")
        assert.strictEqual(job.attempts, 0)
      })))

    it.effect(name("expectEnqueued finds a job by a partial payload, state, runAt and priority"), () =>
      withTestQueue(Effect.gen(function*() {
        const queue = yield* Queue.Queue
        const id = yield* queue.enqueue(Email, email("ada@example.com", 7), { delay: "1 minute", priority: 3 })
        yield* queue.enqueue(Email, email("bob@example.com", 8))
        const [found, ...others] = yield* expectEnqueued(Email, { to: "ada@example.com", order: { id: 7 } })
        assert.strictEqual(others.length, 0)
        assert.strictEqual(found.info.id, id)
        // The payload decoded by the job's schema.
        assert.deepStrictEqual(found.payload.order.placedAt, new Date(0))
        yield* expectEnqueued(Email, { order: { placedAt: new Date(0) }, tags: ["welcome"] })
        yield* expectEnqueued(Email, { to: "ada@example.com" }, { runAt: new Date(60_000), priority: 3 })
        assert.strictEqual((yield* expectEnqueued(Email)).length, 2)
        assert.strictEqual((yield* expectEnqueued(Email, {}, { state: "any" })).length, 2)
      })))

    it.effect(name("expectEnqueued fails with an ExpectationFailed that lists what it found"), () =>
      withTestQueue(Effect.gen(function*() {
        const queue = yield* Queue.Queue
        const id = yield* queue.enqueue(Email, email("ada@example.com"))
        const mismatch = yield* Effect.flip(expectEnqueued(Email, { to: "bob@example.com" }))
        assert.strictEqual(mismatch._tag, "ExpectationFailed")
        assert.include(mismatch.message, `expected a pending "t-email" job with payload matching {"to":"bob@example.com"}`)
        assert.include(mismatch.message, `found 1 "t-email" job:`)
        assert.include(mismatch.message, `#${id} pending run_at 1970-01-01T00:00:00.000Z priority 0 payload {`)
        assert.include(mismatch.message, `"to":"ada@example.com"`)
        // A nested key that differs, an array of another length, another state, another priority.
        yield* Effect.flip(expectEnqueued(Email, { order: { id: 2 } }))
        yield* Effect.flip(expectEnqueued(Email, { tags: ["welcome", "vip"] }))
        yield* Effect.flip(expectEnqueued(Email, {}, { state: "completed" }))
        yield* Effect.flip(expectEnqueued(Email, {}, { priority: 1 }))
        const none = yield* Effect.flip(expectEnqueued(Charge))
        assert.include(none.message, `found no "t-charge" job`)
      })))

    it.effect(name("expectNotEnqueued passes without a match and fails listing the matches"), () =>
      withTestQueue(Effect.gen(function*() {
        const queue = yield* Queue.Queue
        yield* expectNotEnqueued(Email)
        const id = yield* queue.enqueue(Email, email("ada@example.com"))
        yield* expectNotEnqueued(Email, { to: "bob@example.com" })
        yield* expectNotEnqueued(Email, {}, { state: "dead" })
        const error = yield* Effect.flip(expectNotEnqueued(Email, { to: "ada@example.com" }))
        assert.strictEqual(error._tag, "ExpectationFailed")
        assert.include(error.message, `expected no pending "t-email" job with payload matching {"to":"ada@example.com"}; found 1:`)
        assert.include(error.message, `#${id} pending`)
      })))

    it.effect(name("waitFor waits in real time for a worker's job, and times out saying the state last seen"), () =>
      withTestQueue(Effect.gen(function*() {
        const queue = yield* Queue.Queue
        yield* Worker.make({ handlers: [Job.handler(Email, () => Effect.void)] })
        const id = yield* queue.enqueue(Email, email("ada@example.com"))
        const job = yield* waitFor(id, "completed")
        assert.strictEqual(job.state, "completed")
        assert.strictEqual(job.id, id)
        const delayed = yield* queue.enqueue(Email, email("bob@example.com"), { delay: "1 hour" })
        const error = yield* Effect.flip(waitFor(delayed, ["completed", "dead"], { timeout: "300 millis" }))
        assert.strictEqual(error._tag, "WaitTimedOut")
        assert.strictEqual(error._tag === "WaitTimedOut" && error.lastSeen, "pending")
        assert.strictEqual(error.message, `job ${delayed} did not reach completed or dead within 300 ms; last seen: pending`)
        const missing = yield* Effect.flip(waitFor("999999999", "completed", { timeout: 50 }))
        assert.strictEqual(missing._tag === "WaitTimedOut" && missing.lastSeen, "not found")
      })))
  })
}
