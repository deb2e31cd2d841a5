/**
 * Scheduling semantics, on every database: unique keys, mutex keys, priorities across names,
 * claims that never deadlock, and periodic (cron) jobs.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as Cron from "effect/Cron"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import * as TestClock from "effect/TestClock"
import { Claimer, Job, PeriodicJob, Queue, Scheduler, Worker } from "../../src/index.js"
import { countJobs, realSleep, testLayer, waitUntil, withQueue } from "../support/helpers.js"
import type { QueueOptions } from "../../src/services/QueueConfig.js"
import type { Target } from "../support/targets.js"
import { Database } from "../../src/internal/Database.js"
import { nowMicros } from "../../src/internal/time.js"

/** A job whose payload names its mutex key (`null`: none). */
const Keyed = Job.make("keyed", {
  payload: Schema.Struct({ key: Schema.NullOr(Schema.String), i: Schema.Number }),
  mutexKey: (p) => p.key ?? undefined
})
const KeyedToo = Job.make("keyed-too", {
  payload: Schema.Struct({ key: Schema.String, i: Schema.Number }),
  mutexKey: (p) => p.key
})
const Plain = Job.make("plain", { payload: Schema.Struct({ i: Schema.Number }) })
/** Two keyed job names with one shape: a key shared across names. */
const KeyedX = Job.make("keyed-x", { payload: Schema.Struct({ key: Schema.String }), mutexKey: (p) => p.key })
const KeyedY = Job.make("keyed-y", { payload: Schema.Struct({ key: Schema.String }), mutexKey: (p) => p.key })
/** Dies at its first attempt: dead at once. */
const Dies = Job.make("dies", { payload: Schema.Struct({ i: Schema.Number }), retry: Job.attempts(1, Schedule.spaced("1 second")) })

const nowUs = () => Math.round((performance.timeOrigin + performance.now()) * 1000)

/** A table of handler runs: job id, mutex key, start and end (µs, this process's clock). */
const runsTable = (prefix: string) =>
  Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    const runs = sql(prefix + "ledger")
    yield* sql`CREATE TABLE ${runs} (job_id VARCHAR(32) NOT NULL, mkey VARCHAR(64) NULL,
      started_us BIGINT NOT NULL, ended_us BIGINT NOT NULL)`
    return {
      record: (jobId: string, key: string | null, startedUs: number) =>
        Effect.orDie(sql`INSERT INTO ${runs} (job_id, mkey, started_us, ended_us)
          VALUES (${jobId}, ${key}, ${startedUs}, ${nowUs()})`),
      all: Effect.map(
        sql<{ job_id: string; mkey: string | null; started_us: string; ended_us: string }>`SELECT * FROM ${runs}`,
        (rows) =>
          rows.map((r) => ({ id: r.job_id, key: r.mkey, start: Number(r.started_us), end: Number(r.ended_us) }))
      )
    }
  })

/** A worker on a QueueLive of its own (its own pool) on `prefix`, for the life of the scope. */
const otherWorker = <R>(
  target: Target,
  prefix: string,
  options: Worker.WorkerOptions<R>,
  queueOptions: QueueOptions = {}
) =>
  Layer.launch(
    Worker.layer(options).pipe(Layer.provide(testLayer(target, { ...queueOptions, prefix, migrate: false }).layer))
  ).pipe(Effect.forkScoped)

const Busy = Job.make("busy", { payload: Schema.Struct({ i: Schema.Number }) })
const Other = Job.make("other", { payload: Schema.Struct({ i: Schema.Number }) })

/**
 * A worker (concurrency 2) works through a backlog of the job name "busy" that a producer keeps
 * growing (about 200 jobs/s; the worker runs < 100/s) when `due` puts a job of `Other` (its id,
 * and how many busy jobs had been enqueued when it came due). Asserts that it ran before every
 * busy job enqueued after it came due (10 more: one batch of the producer in flight).
 */
const busyBacklog = (
  due: (
    queue: Queue.Queue["Type"],
    produced: () => number
  ) => Effect.Effect<{ readonly id: string; readonly producedAtDue: number }, unknown>
) =>
  Effect.gen(function*() {
    const queue = yield* Queue.Queue
    const order: Array<number | "other"> = []
    let stop = false
    let produced = 0
    yield* Worker.make({
      handlers: [
        Job.handler(Busy, (p) => Effect.zipRight(Effect.sync(() => order.push(p.i)), realSleep(20))),
        Job.handler(Other, () => Effect.sync(() => order.push("other")))
      ],
      concurrency: 2
    })
    const producer = Effect.gen(function*() {
      while (!stop) {
        yield* queue.enqueueMany(Busy, Array.from({ length: 10 }, () => ({ i: produced++ })))
        yield* realSleep(50)
      }
    })
    yield* Effect.forkScoped(producer)
    yield* realSleep(300)
    const { id, producedAtDue } = yield* due(queue, () => produced)
    // stop the producer after 8 s whatever happens, so the test ends
    yield* Effect.forkScoped(Effect.zipRight(realSleep(8_000), Effect.sync(() => {
      stop = true
    })))
    yield* waitUntil(Effect.map(queue.get(id), (j) => j.state === "completed"), 25_000, "the other name's job to run")
    stop = true
    const before = order.slice(0, order.indexOf("other")) as Array<number>
    const later = before.filter((i) => i >= producedAtDue + 10)
    assert.strictEqual(
      later.length,
      0,
      `the other job (due when ${producedAtDue} busy jobs existed) ran after ${later.length} busy jobs enqueued after it`
    )
  })

/** The claim's groups for job names of the default priority. */
const groupsOf = (...names: ReadonlyArray<string>) => names.map((name) => ({ name, priority: 0 }))

export const scheduling = (target: Target) => {
  const name = (title: string) => `[${target.id}] ${title}`

  describe(`scheduling [${target.id}]`, () => {
    // ---------------------------------------------------------------- unique keys

    it.live(name("unique: a second enqueue of a pending key returns the first job's id and writes nothing"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const queue = yield* Queue.Queue
          const first = yield* queue.insert(Plain, { i: 1 }, { unique: "report:2026-11" })
          assert.isFalse(first.duplicate)
          const again = yield* queue.insert(Plain, { i: 2 }, { unique: { key: "report:2026-11" } })
          assert.deepStrictEqual(again, { id: first.id, duplicate: true })
          assert.strictEqual(yield* queue.enqueue(Plain, { i: 3 }, { unique: "report:2026-11" }), first.id)
          assert.strictEqual(yield* countJobs(prefix), 1)
          assert.deepStrictEqual((yield* queue.get(first.id)).payload, { i: 1 })
          // another key is another job; no key is never a duplicate
          assert.isFalse((yield* queue.insert(Plain, { i: 4 }, { unique: "report:2026-12" })).duplicate)
          assert.isFalse((yield* queue.insert(Plain, { i: 5 })).duplicate)
          assert.strictEqual(yield* countJobs(prefix), 3)
          // out-of-range keys are refused
          const long = yield* Effect.flip(queue.enqueue(Plain, { i: 6 }, { unique: "x".repeat(256) }))
          assert.strictEqual(long._tag, "InvalidEnqueueOption")
          const empty = yield* Effect.flip(queue.enqueue(Plain, { i: 6 }, { unique: "" }))
          assert.strictEqual(empty._tag, "InvalidEnqueueOption")
          assert.strictEqual(yield* countJobs(prefix), 3)
        })))

    it.live(name("unique: guarded states — after completion a key is free by default, not with states [completed]"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const queue = yield* Queue.Queue
          yield* Worker.make({ handlers: [Job.handler(Plain, () => Effect.void)] })
          const a = yield* queue.enqueue(Plain, { i: 1 }, { unique: "free-after" })
          const b = yield* queue.enqueue(Plain, { i: 1 }, { unique: { key: "once-ever", states: ["completed"] } })
          yield* waitUntil(Effect.map(Effect.all([queue.get(a), queue.get(b)]), (js) => js.every((j) => j.state === "completed")))
          const a2 = yield* queue.insert(Plain, { i: 2 }, { unique: "free-after" })
          assert.isFalse(a2.duplicate)
          assert.notStrictEqual(a2.id, a)
          const b2 = yield* queue.insert(Plain, { i: 2 }, { unique: { key: "once-ever", states: ["completed"] } })
          assert.deepStrictEqual(b2, { id: b, duplicate: true })
          // The mask is the existing job's: a job guarding only pending/running still blocks while
          // it is pending, whatever the newcomer asks.
          yield* waitUntil(Effect.map(queue.get(a2.id), (j) => j.state === "completed"))
          assert.strictEqual(yield* countJobs(prefix), 3)
        }), { pollInterval: "100 millis" }))

    it.live(name("unique: a cancelled job whose key was taken again is not retried (retry returns false)"), () =>
      withQueue(target, () =>
        Effect.gen(function*() {
          const queue = yield* Queue.Queue
          const old = yield* queue.enqueue(Plain, { i: 1 }, { unique: "k", delay: "1 hour" })
          assert.isTrue(yield* queue.cancel(old))
          const fresh = yield* queue.insert(Plain, { i: 2 }, { unique: "k", delay: "1 hour" })
          assert.isFalse(fresh.duplicate)
          assert.isFalse(yield* queue.retry(old))
          assert.strictEqual((yield* queue.get(old)).state, "cancelled")
          assert.isTrue(yield* queue.cancel(fresh.id))
          assert.isTrue(yield* queue.retry(old))
          assert.strictEqual((yield* queue.get(old)).state, "pending")
        })))

    it.live(name("unique: 8 fibers enqueue one key at once → one job, every caller gets its id"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const queue = yield* Queue.Queue
          for (let round = 0; round < 5; round++) {
            const results = yield* Effect.all(
              Array.from({ length: 8 }, (_, i) => queue.insert(Plain, { i }, { unique: `race-${round}` })),
              { concurrency: "unbounded" }
            )
            assert.strictEqual(new Set(results.map((r) => r.id)).size, 1)
            assert.strictEqual(results.filter((r) => !r.duplicate).length, 1)
          }
          assert.strictEqual(yield* countJobs(prefix), 5)
        }), { maxConnections: 10 }))

    for (const outcome of ["rolls back", "commits"] as const) {
      it.live(name(`unique: transaction A enqueues k and ${outcome} while B and C enqueue k → exactly one k`), () =>
        withQueue(target, (prefix) =>
          Effect.gen(function*() {
            const sql = yield* SqlClient.SqlClient
            const queue = yield* Queue.Queue
            const enqueued = yield* Deferred.make<string>()
            const release = yield* Deferred.make<void>()
            const a = yield* Effect.gen(function*() {
              const id = yield* queue.enqueue(Plain, { i: 1 }, { unique: "k" })
              yield* Deferred.succeed(enqueued, id)
              yield* Deferred.await(release)
              if (outcome === "rolls back") return yield* Effect.fail("rollback" as const)
              return id
            }).pipe(sql.withTransaction, Effect.fork)
            const aId = yield* Deferred.await(enqueued)
            // Two waiters: on InnoDB, A's rollback makes one of them deadlock (retried by sqlane).
            const b = yield* Effect.fork(queue.insert(Plain, { i: 2 }, { unique: "k" }))
            const c = yield* Effect.fork(queue.insert(Plain, { i: 3 }, { unique: "k" }))
            yield* realSleep(500)
            // B and C wait for A's transaction: they cannot know yet whether k is taken.
            assert.isTrue(Option.isNone(yield* Fiber.poll(b)), "B returned before A ended")
            assert.isTrue(Option.isNone(yield* Fiber.poll(c)), "C returned before A ended")
            yield* Deferred.succeed(release, undefined)
            const aExit = yield* Fiber.await(a)
            const results = [yield* Fiber.join(b), yield* Fiber.join(c)]
            assert.strictEqual(yield* countJobs(prefix), 1)
            assert.strictEqual(new Set(results.map((r) => r.id)).size, 1)
            if (outcome === "rolls back") {
              assert.isTrue(Exit.isFailure(aExit))
              // exactly one of B and C wrote the only k; the other was told it was a duplicate
              assert.deepStrictEqual(results.map((r) => r.duplicate).sort(), [false, true])
              const info = yield* queue.get(results[0].id)
              assert.deepStrictEqual(info.payload, results[0].duplicate ? { i: 3 } : { i: 2 })
            } else {
              assert.isTrue(Exit.isSuccess(aExit))
              assert.deepStrictEqual(results, [{ id: aId, duplicate: true }, { id: aId, duplicate: true }])
              assert.deepStrictEqual((yield* queue.get(aId)).payload, { i: 1 })
            }
          })))
    }

    if (target.dialect === "pg") {
      it.live(name("retry inside the caller's transaction that loses a race for the key returns false and leaves the transaction usable"), () =>
        withQueue(target, (prefix) =>
          Effect.gen(function*() {
            const queue = yield* Queue.Queue
            const sql = yield* SqlClient.SqlClient
            const old = yield* queue.enqueue(Plain, { i: 1 }, { unique: "race", delay: "1 hour" })
            assert.isTrue(yield* queue.cancel(old))
            // A takes the key in a transaction that commits a little later
            const a = yield* Effect.fork(sql.withTransaction(Effect.gen(function*() {
              const id = yield* queue.enqueue(Plain, { i: 2 }, { unique: "race", delay: "1 hour" })
              yield* realSleep(500)
              return id
            })))
            yield* realSleep(200)
            // B retries the old job in its own transaction: the NOT EXISTS guard cannot see A's
            // uncommitted row, so the update meets the index, waits for A, and is refused
            const after = yield* sql.withTransaction(Effect.gen(function*() {
              const retried = yield* queue.retry(old)
              const rows = yield* sql<{ n: number }>`SELECT 1 AS n`
              return { retried, n: rows[0].n }
            }))
            assert.deepStrictEqual(after, { retried: false, n: 1 })
            yield* a.await
            assert.strictEqual((yield* queue.get(old)).state, "cancelled")
            assert.strictEqual(yield* countJobs(prefix), 2)
          })))
    }

    it.live(name("unique.states variants: dead / cancelled guard, unknown state refused"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const queue = yield* Queue.Queue
          const bogus = yield* Effect.flip(queue.enqueue(Plain, { i: 0 }, { unique: { key: "b", states: ["bogus" as any] } }))
          assert.deepStrictEqual(
            bogus._tag === "InvalidEnqueueOption" ? [bogus.path, bogus.reason] : [bogus._tag],
            ["unique.states", "type"]
          )
          const empty = yield* queue.insert(Plain, { i: 0 }, { unique: { key: "e", states: [] } })
          assert.isFalse(empty.duplicate)
          assert.isTrue((yield* queue.insert(Plain, { i: 0 }, { unique: { key: "e", states: [] } })).duplicate)
          // cancelled guarded
          const c = yield* queue.insert(Plain, { i: 1 }, { unique: { key: "c", states: ["cancelled"] }, delay: "1 hour" })
          assert.isTrue(yield* queue.cancel(c.id))
          assert.deepStrictEqual(yield* queue.insert(Plain, { i: 2 }, { unique: "c" }), { id: c.id, duplicate: true })
          // dead guarded
          yield* Worker.make({ handlers: [Job.handler(Dies, () => Effect.die("boom"))] })
          const d = yield* queue.insert(Dies, { i: 1 }, { unique: { key: "d", states: ["dead"] } })
          yield* waitUntil(Effect.map(queue.get(d.id), (j) => j.state === "dead"))
          assert.deepStrictEqual(yield* queue.insert(Dies, { i: 2 }, { unique: "d" }), { id: d.id, duplicate: true })
          // not guarded in dead: a dead job's key is free, and then retry of the dead one says false
          const d2 = yield* queue.insert(Dies, { i: 1 }, { unique: "d2" })
          yield* waitUntil(Effect.map(queue.get(d2.id), (j) => j.state === "dead"))
          const d3 = yield* queue.insert(Plain, { i: 3 }, { unique: "d2", delay: "1 hour" })
          assert.isFalse(d3.duplicate)
          assert.isFalse(yield* queue.retry(d2.id))
          assert.strictEqual((yield* queue.get(d2.id)).state, "dead")
          assert.strictEqual(yield* countJobs(prefix), 5)
        }), { pollInterval: "100 millis" }))

    // KNOWN DIVERGENCE (not fixed): on MySQL/MariaDB the key columns are VARCHAR utf8mb4_bin, a PAD SPACE
    // collation, so keys that differ only by trailing spaces are one key there (and two on PostgreSQL).
    // A fix needs a migration (VARBINARY key columns, or a NO PAD collation where the server has one).
    // Documented in docs/jobs.md (*Unique jobs*).
    ;(target.dialect === "mysql" ? it.live.fails : it.live)(name("unique keys are compared exactly: 'a' and 'a ' are two keys"), () =>
      withQueue(target, () =>
        Effect.gen(function*() {
          const queue = yield* Queue.Queue
          const a = yield* queue.insert(Plain, { i: 1 }, { unique: "a", delay: "1 hour" })
          const b = yield* queue.insert(Plain, { i: 2 }, { unique: "a ", delay: "1 hour" })
          assert.isFalse(a.duplicate)
          assert.isFalse(b.duplicate, "'a ' was treated as a duplicate of 'a'")
        })))

    // ---------------------------------------------------------------- mutex keys

    it.live(name("mutex: a claim takes one due job per key, none of a running key; the index forbids two running"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const queue = yield* Queue.Queue
          const claimer = yield* Claimer.Claimer
          const sql = (yield* SqlClient.SqlClient).withoutTransforms()
          const k1 = yield* queue.enqueueMany(Keyed, [{ key: "k", i: 1 }, { key: "k", i: 2 }, { key: "k", i: 3 }])
          const free = yield* queue.enqueueMany(Keyed, [{ key: null, i: 4 }, { key: null, i: 5 }])
          const other = yield* queue.enqueue(KeyedToo, { key: "k2", i: 6 })
          // another job name, the same key as the first three
          const crossName = yield* queue.enqueue(KeyedToo, { key: "k", i: 7 })
          const keyed = new Set([Keyed.name, KeyedToo.name])
          const now = (yield* nowMicros) + 1000
          // The plain claim never takes a keyed job
          const plain = yield* claimer.claim(groupsOf(Keyed.name, KeyedToo.name), 10, now, "w0")
          assert.deepStrictEqual(plain.map((r) => r.id), free)
          yield* sql`UPDATE ${sql(prefix + "jobs")} SET state = 'pending', attempts = 0 WHERE id IN ${sql.in(free)}`
          const first = yield* claimer.claim(groupsOf(Keyed.name, KeyedToo.name), 10, now, "w1", keyed)
          assert.deepStrictEqual(first.map((r) => r.id).sort(), [k1[0], ...free, other].sort())
          const second = yield* claimer.claim(groupsOf(Keyed.name, KeyedToo.name), 10, now, "w2", keyed)
          assert.deepStrictEqual(second, []) // k and k2 are running
          // The database itself refuses a second running job of k.
          const forced = yield* Effect.exit(sql`UPDATE ${sql(prefix + "jobs")} SET state = 'running' WHERE id = ${k1[1]}`)
          assert.isTrue(Exit.isFailure(forced))
          yield* sql`UPDATE ${sql(prefix + "jobs")} SET state = 'completed' WHERE id = ${k1[0]}`
          const third = yield* claimer.claim(groupsOf(Keyed.name), 10, now, "w3", keyed)
          assert.deepStrictEqual(third.map((r) => r.id), [k1[1]])
          yield* sql`UPDATE ${sql(prefix + "jobs")} SET state = 'completed' WHERE id IN ${sql.in([k1[1], k1[2]])}`
          // k is free: the job of the other name that shares it is claimed now, not before
          const fourth = yield* claimer.claim(groupsOf(Keyed.name, KeyedToo.name), 10, now, "w4", keyed)
          assert.deepStrictEqual(fourth.map((r) => r.id), [crossName])
        })))

    it.live(name("mutex: 20 jobs of one key, 3 workers at concurrency 10 — no overlap; other keys run in parallel"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const runs = yield* runsTable(prefix)
          const handler = Job.handler(Keyed, (p, ctx) =>
            Effect.gen(function*() {
              const start = nowUs()
              yield* Effect.sleep("40 millis")
              yield* runs.record(ctx.id, p.key, start)
            }))
          const queue = yield* Queue.Queue
          yield* queue.enqueueMany(Keyed, Array.from({ length: 20 }, (_, i) => ({ key: "serial", i })))
          yield* queue.enqueueMany(Keyed, Array.from({ length: 40 }, (_, i) => ({ key: `other-${i % 20}`, i })))
          yield* queue.enqueueMany(Keyed, Array.from({ length: 20 }, (_, i) => ({ key: null, i })))
          yield* Worker.make({ handlers: [handler], concurrency: 10 })
          yield* otherWorker(target, prefix, { handlers: [handler], concurrency: 10 }, { pollInterval: "1 hour" })
          yield* otherWorker(target, prefix, { handlers: [handler], concurrency: 10 }, { pollInterval: "1 hour" })
          const started = Date.now()
          yield* waitUntil(Effect.map(countJobs(prefix, "completed"), (n) => n === 80), 60_000, "80 jobs completed")
          // The poll is 1 hour: the next job of the key is claimed when the previous one ends.
          assert.isBelow(Date.now() - started, 20_000)
          const all = yield* runs.all
          assert.strictEqual(all.length, 80)
          assert.strictEqual(new Set(all.map((r) => r.id)).size, 80)
          const byKey = new Map<string | null, Array<{ start: number; end: number }>>()
          for (const r of all) byKey.set(r.key, [...(byKey.get(r.key) ?? []), r])
          for (const [key, intervals] of byKey) {
            if (key === null) continue
            intervals.sort((a, b) => a.start - b.start)
            for (let i = 1; i < intervals.length; i++) {
              assert.isAtLeast(intervals[i].start, intervals[i - 1].end, `key ${key}: two runs overlap`)
            }
          }
          // Meanwhile other keys ran in parallel: some run of another key overlaps a run of "serial",
          // and at some instant more than 3 jobs ran at once.
          const serial = byKey.get("serial")!
          assert.strictEqual(serial.length, 20)
          const others = all.filter((r) => r.key !== "serial")
          const overlapping = others.filter((o) => serial.some((s) => o.start < s.end && s.start < o.end))
          assert.isAbove(overlapping.length, 0)
          const maxAtOnce = Math.max(...all.map((r) => all.filter((o) => o.start <= r.start && r.start < o.end).length))
          assert.isAbove(maxAtOnce, 3)
        }), { pollInterval: "1 hour" }), 120_000)

    it.live(name("mutex: a job of key k waiting to retry blocks neither k nor other keys"), () =>
      withQueue(target, () =>
        Effect.gen(function*() {
          const Fails = Job.make("fails-once", {
            payload: Schema.Struct({ key: Schema.String, fail: Schema.Boolean }),
            mutexKey: (p) => p.key,
            retry: Schedule.spaced("1 hour")
          })
          const ran: Array<string> = []
          yield* Worker.make({
            handlers: [Job.handler(Fails, (p, ctx) =>
              Effect.suspend(() => {
                ran.push(ctx.id)
                return p.fail ? Effect.die("boom") : Effect.void
              }))],
            concurrency: 1
          })
          const queue = yield* Queue.Queue
          const failing = yield* queue.enqueue(Fails, { key: "k", fail: true })
          yield* waitUntil(Effect.map(queue.get(failing), (j) => j.state === "pending" && j.attempts === 1))
          const sameKey = yield* queue.enqueue(Fails, { key: "k", fail: false })
          const otherKey = yield* queue.enqueue(Fails, { key: "k2", fail: false })
          yield* waitUntil(
            Effect.map(Effect.all([queue.get(sameKey), queue.get(otherKey)]), (js) => js.every((j) => j.state === "completed"))
          )
          assert.strictEqual((yield* queue.get(failing)).state, "pending")
          assert.deepStrictEqual(ran.slice().sort(), [failing, sameKey, otherKey].sort())
        })))

    it.live(name("mutex keys that differ only by trailing spaces do not stall the keyed claim"), () =>
      withQueue(target, () =>
        Effect.gen(function*() {
          const queue = yield* Queue.Queue
          const ids = [
            yield* queue.enqueue(Keyed, { key: "acct", i: 1 }),
            yield* queue.enqueue(Keyed, { key: "acct ", i: 2 })
          ]
          yield* Worker.make({ handlers: [Job.handler(Keyed, () => realSleep(50))], concurrency: 4 })
          yield* waitUntil(
            Effect.map(Effect.forEach(ids, queue.get), (js) => js.every((j) => j.state === "completed")),
            10_000,
            "both keyed jobs completed"
          )
        }), { pollInterval: "200 millis" }))

    it.live(name("mutex across names: a job waiting for a key held by another name's worker runs when it is freed"), () =>
      withQueue(target, () =>
        Effect.gen(function*() {
          const queue = yield* Queue.Queue
          let releaseX = false
          // two workers in one process, each handling one of two keyed names
          yield* Worker.make({
            handlers: [Job.handler(KeyedX, () => Effect.promise(async () => {
              while (!releaseX) await new Promise((r) => setTimeout(r, 10))
            }))]
          })
          yield* Worker.make({ handlers: [Job.handler(KeyedY, () => Effect.void)] })
          const x = yield* queue.enqueue(KeyedX, { key: "shared" })
          yield* waitUntil(Effect.map(queue.get(x), (j) => j.state === "running"))
          const y = yield* queue.enqueue(KeyedY, { key: "shared" })
          yield* realSleep(500)
          assert.strictEqual((yield* queue.get(y)).state, "pending")
          releaseX = true
          yield* waitUntil(Effect.map(queue.get(x), (j) => j.state === "completed"))
          // the poll is an hour: only the release's wake-up can start y
          yield* waitUntil(Effect.map(queue.get(y), (j) => j.state === "completed"), 5_000, "y to run after x freed the key")
        }), { pollInterval: "1 hour", rescueInterval: "1 hour" }))

    // ---------------------------------------------------------------- priorities

    it.live(name("priorities across names: 100 low-priority jobs enqueued first, 1 high-priority job runs first"), () =>
      withQueue(target, () =>
        Effect.gen(function*() {
          const queue = yield* Queue.Queue
          yield* queue.enqueueMany(Plain, Array.from({ length: 100 }, (_, i) => ({ i })), { priority: 10 })
          yield* queue.enqueue(KeyedToo, { key: "urgent", i: 1000 }, { priority: -5 })
          yield* queue.enqueue(Keyed, { key: null, i: 2000 }, { priority: 0 })
          const order: Array<number> = []
          const record = (i: number) => Effect.sync(() => order.push(i))
          yield* Worker.make({
            handlers: [
              Job.handler(Plain, (p) => record(p.i)),
              Job.handler(Keyed, (p) => record(p.i)),
              Job.handler(KeyedToo, (p) => record(p.i))
            ],
            concurrency: 1
          })
          yield* waitUntil(Effect.sync(() => order.length === 102))
          assert.deepStrictEqual(order.slice(0, 3), [1000, 2000, 0])
        })))

    it.live(name("priorities across names without mutex keys (the plain claim): the high-priority job runs first"), () =>
      withQueue(target, () =>
        Effect.gen(function*() {
          const Urgent = Job.make("urgent", { payload: Schema.Struct({ i: Schema.Number }), priority: -1 })
          const queue = yield* Queue.Queue
          yield* queue.enqueueMany(Plain, Array.from({ length: 100 }, (_, i) => ({ i })))
          yield* queue.enqueue(Urgent, { i: 1000 })
          const order: Array<number> = []
          const record = (i: number) => Effect.sync(() => order.push(i))
          yield* Worker.make({
            handlers: [Job.handler(Plain, (p) => record(p.i)), Job.handler(Urgent, (p) => record(p.i))],
            concurrency: 1
          })
          yield* waitUntil(Effect.sync(() => order.length === 101))
          assert.deepStrictEqual(order, [1000, ...Array.from({ length: 100 }, (_, i) => i)])
        })))

    for (const count of [3, 40]) {
      it.live(
        name(`the probe finds a due job behind a not-yet-due one of better priority, with ${count} job names`),
        () =>
          withQueue(target, (prefix) =>
            Effect.gen(function*() {
              // Few names: the probe starts from them; many: it scans every group with pending jobs.
              const jobs = Array.from({ length: count }, (_, i) =>
                Job.make(`${prefix}probe${i}`, { payload: Schema.Struct({ i: Schema.Number }) }))
              const last = jobs[count - 1]
              const queue = yield* Queue.Queue
              yield* queue.enqueue(last, { i: 1 }, { priority: 0, delay: "1 hour" })
              yield* queue.enqueue(last, { i: 2 }, { priority: 5 })
              yield* queue.enqueue(last, { i: 3 }, { priority: 9, delay: "2 hours" })
              yield* queue.enqueue(jobs[0], { i: 4 }, { priority: 7 })
              const ran: Array<number> = []
              // Started after the enqueues and with an hour-long poll: only its first probe can find them.
              yield* Worker.make({
                handlers: jobs.map((job) => Job.handler(job, (p) => Effect.sync(() => ran.push(p.i)))),
                concurrency: 1
              })
              yield* waitUntil(Effect.sync(() => ran.length === 2), 10_000, "both due jobs")
              assert.deepStrictEqual(ran, [2, 4])
            }), { pollInterval: "1 hour" })
      )
    }

    it.live(name("the probe of 40 names, most with pending jobs, answers the same each time (whichever form it takes)"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          // The first probe of many names scans every group; once it found groups in most of the
          // names, the next ones start from the names (PostgreSQL). Both must give one answer.
          const jobs = Array.from({ length: 40 }, (_, i) =>
            Job.make(`${prefix}many${String(i).padStart(2, "0")}`, { payload: Schema.Struct({ i: Schema.Number }) }))
          const other = Job.make(`${prefix}other`, { payload: Schema.Struct({ i: Schema.Number }) })
          const queue = yield* Queue.Queue
          const expected: Array<string> = []
          for (let i = 0; i < 30; i++) {
            yield* queue.enqueue(jobs[i], { i }, { priority: 0 })
            expected.push(`${jobs[i].name}/0`)
            if (i < 10) {
              yield* queue.enqueue(jobs[i], { i }, { priority: 5 })
              expected.push(`${jobs[i].name}/5`)
            }
            // Not yet due: not among the due groups, but the probe's next run_at.
            if (i >= 10 && i < 15) yield* queue.enqueue(jobs[i], { i }, { priority: 3, delay: "1 hour" })
          }
          yield* queue.enqueue(other, { i: 0 })
          const claimer = yield* Claimer.Claimer
          const names = jobs.map((j) => j.name)
          for (let round = 0; round < 3; round++) {
            // The enqueues took their run_at from Effect's Clock, which may drift from Date.now().
            const nowUs = yield* nowMicros
            const probe = yield* claimer.probe(names, nowUs)
            assert.deepStrictEqual(probe.due.map((g) => `${g.name}/${g.priority}`).sort(), expected.slice().sort())
            // Best first: priority 0 before 5.
            assert.deepStrictEqual(probe.due.map((g) => g.priority), [...Array(30).fill(0), ...Array(10).fill(5)])
            assert.isDefined(probe.nextUs)
            assert.isTrue(probe.nextUs! > nowUs + 3_000_000_000 && probe.nextUs! < nowUs + 3_700_000_000, `nextUs ${probe.nextUs}`)
          }
        })))

    it.live(name("priorities: within one priority names interleave by run_at, none starves"), () =>
      withQueue(target, () =>
        Effect.gen(function*() {
          const queue = yield* Queue.Queue
          const expected: Array<string> = []
          for (let i = 0; i < 30; i++) {
            // three names, enqueued in turn: the order of run_at
            yield* queue.enqueue(Plain, { i })
            yield* queue.enqueue(Keyed, { key: null, i })
            yield* queue.enqueue(KeyedToo, { key: `k${i}`, i })
            expected.push(`plain${i}`, `keyed${i}`, `keyed-too${i}`)
          }
          const order: Array<string> = []
          yield* Worker.make({
            handlers: [
              Job.handler(Plain, (p) => Effect.sync(() => order.push(`plain${p.i}`))),
              Job.handler(Keyed, (p) => Effect.sync(() => order.push(`keyed${p.i}`))),
              Job.handler(KeyedToo, (p) => Effect.sync(() => order.push(`keyed-too${p.i}`)))
            ],
            concurrency: 1
          })
          yield* waitUntil(Effect.sync(() => order.length === 90))
          assert.deepStrictEqual(order, expected)
        })))

    it.live(name("priorities: a job of another name that became due during a backlog runs before later jobs of the busy name"), () =>
      withQueue(target, () =>
        busyBacklog((queue, produced) =>
          Effect.gen(function*() {
            const producedAtDue = produced()
            return { id: yield* queue.enqueue(Other, { i: 0 }), producedAtDue }
          })), { pollInterval: "1 hour", rescueInterval: "1 hour" }), 60_000)

    it.live(name("priorities: a delayed job of another name that comes due during a backlog is not starved"), () =>
      withQueue(target, () =>
        busyBacklog((queue, produced) =>
          Effect.gen(function*() {
            const id = yield* queue.enqueue(Other, { i: 0 }, { delay: "500 millis" })
            yield* realSleep(600)
            return { id, producedAtDue: produced() }
          })), { pollInterval: "1 hour", rescueInterval: "1 hour" }), 60_000)

    // ---------------------------------------------------------------- no deadlocks

    it.live(name("no deadlocks: 3 claimers on 500 jobs with one run_at and priority (keyed and not) run each once"), () => {
      // Every warning logged meanwhile (a claim that failed even after its retries would log one).
      const warnings: Array<string> = []
      const recorder = Logger.make(({ logLevel, message }) => {
        if (LogLevel.greaterThanEqual(logLevel, LogLevel.Warning)) warnings.push(String(message))
      })
      return withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const runs = yield* runsTable(prefix)
          const handler = Job.handler(Keyed, (p, ctx) => runs.record(ctx.id, p.key, nowUs()))
          const plainHandler = Job.handler(Plain, (_, ctx) => runs.record(ctx.id, null, nowUs()))
          const queue = yield* Queue.Queue
          // enqueueMany gives every job of a call the same run_at and priority
          yield* queue.enqueueMany(Keyed, Array.from({ length: 250 }, (_, i) => ({ key: i % 2 === 0 ? `k${i % 25}` : null, i })))
          yield* queue.enqueueMany(Plain, Array.from({ length: 250 }, (_, i) => ({ i })))
          const handlers = [handler, plainHandler]
          yield* Worker.make({ handlers, concurrency: 10 })
          yield* otherWorker(target, prefix, { handlers, concurrency: 10 })
          yield* otherWorker(target, prefix, { handlers, concurrency: 10 })
          // Meanwhile three transactions at once enqueue jobs of a new mutex key, several times.
          const sql = yield* SqlClient.SqlClient
          for (let round = 0; round < 5; round++) {
            yield* Effect.all(
              Array.from({ length: 3 }, (_, i) =>
                sql.withTransaction(queue.enqueue(Keyed, { key: `new-${round}`, i: 1000 + round * 3 + i }))),
              { concurrency: "unbounded" }
            )
          }
          yield* waitUntil(Effect.map(countJobs(prefix, "completed"), (n) => n === 515), 60_000, "515 jobs completed")
          const all = yield* runs.all
          assert.strictEqual(all.length, 515)
          assert.strictEqual(new Set(all.map((r) => r.id)).size, 515)
          assert.strictEqual(yield* countJobs(prefix), 515)
          assert.deepStrictEqual(warnings, [])
        }), { pollInterval: "200 millis" }).pipe(Effect.provide(Logger.add(recorder)))
    }, 120_000)

    // ---------------------------------------------------------------- periodic jobs

    it.effect(name("cron: an invalid expression, a misspelt time zone or a cron that never fires is refused at declaration"), () =>
      Effect.gen(function*() {
        const Tick = Job.make("tick", { payload: Schema.Struct({}) })
        const zone = PeriodicJob.make("p", { cron: "0 9 * * *", timeZone: "Europe/Berln", job: Tick, payload: {} })
        assert.isTrue(Either.isLeft(zone))
        if (Either.isLeft(zone)) {
          assert.strictEqual(zone.left._tag, "InvalidSchedule")
          assert.strictEqual(zone.left.schedule, "p")
          assert.include(zone.left.message, "Europe/Berln")
        }
        const expr = PeriodicJob.make("p", { cron: "61 * * * *", job: Tick, payload: {} })
        assert.isTrue(Either.isLeft(expr) && expr.left.message.includes("61"))
        assert.isTrue(Either.isLeft(PeriodicJob.make("p", { cron: "0 0 30 2 *", job: Tick, payload: {} })))
        const Typed = Job.make("typed", { payload: Schema.Struct({ n: Schema.Number }) })
        assert.isTrue(Either.isLeft(PeriodicJob.make("p", { cron: "* * * * *", job: Typed, payload: { n: "x" } as any })))
        const error = yield* Effect.flip(PeriodicJob.make("p", { cron: "* * * *", job: Tick, payload: {} }))
        assert.strictEqual(error._tag, "InvalidSchedule")
        // time zone aware: 09:00 in New York is 14:00 UTC in January, 13:00 UTC in July
        const ny = PeriodicJob.unsafeMake("ny", { cron: "0 9 * * *", timeZone: "America/New_York", job: Tick, payload: {} })
        assert.strictEqual(Cron.next(ny.cron, new Date("2026-01-15T00:00:00Z")).toISOString(), "2026-01-15T14:00:00.000Z")
        assert.strictEqual(Cron.next(ny.cron, new Date("2026-07-15T00:00:00Z")).toISOString(), "2026-07-15T13:00:00.000Z")
      }))

    it.effect(name("cron (TestClock): 3 workers with schedulers, a per-minute schedule → exactly one job per minute over 10 minutes"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const Tick = Job.make("tick", { payload: Schema.Struct({ at: Schema.Date }) })
          const everyMinute = PeriodicJob.unsafeMake("every-minute", {
            cron: "* * * * *",
            job: Tick,
            payload: (at) => ({ at })
          })
          const ran: Array<{ id: string; at: number; runAt: number }> = []
          const handler = Job.handler(Tick, (p, ctx) =>
            Effect.sync(() => ran.push({ id: ctx.id, at: p.at.getTime(), runAt: ctx.runAt.getTime() })))
          for (let w = 0; w < 3; w++) {
            const live = testLayer(target, { prefix, migrate: false, pollInterval: "1 hour", rescueInterval: "1 hour" })
            yield* Layer.launch(
              Layer.mergeAll(Worker.layer({ handlers: [handler] }), Scheduler.layer({ schedules: [everyMinute] })).pipe(
                Layer.provide(live.layer)
              )
            ).pipe(Effect.forkScoped)
          }
          yield* realSleep(1000) // every scheduler has read its state and sleeps until 00:01
          const sql = (yield* SqlClient.SqlClient).withoutTransforms()
          const jobs = sql<{ n: number }>`SELECT COUNT(*) AS n FROM ${sql(prefix + "jobs")}`
          assert.strictEqual(Number((yield* jobs)[0].n), 0)
          for (let minute = 1; minute <= 10; minute++) {
            yield* TestClock.adjust("1 minute")
            yield* waitUntil(Effect.sync(() => ran.length >= minute), 20_000, `the tick of minute ${minute}`)
          }
          yield* realSleep(500) // a duplicate, if any, would show now
          assert.strictEqual(Number((yield* jobs)[0].n), 10)
          assert.strictEqual(yield* countJobs(prefix, "completed"), 10)
          assert.deepStrictEqual(
            ran.map((r) => r.at).sort((a, b) => a - b),
            Array.from({ length: 10 }, (_, i) => (i + 1) * 60_000)
          )
          assert.isTrue(ran.every((r) => r.runAt === r.at))
          assert.strictEqual(new Set(ran.map((r) => r.id)).size, 10)
        }), { pollInterval: "1 hour", rescueInterval: "1 hour" }), 120_000)

    it.effect(name("cron (TestClock): through the fall-back hour in Los Angeles, two schedulers, per-minute → 110 jobs, hourly fires at 09:00 UTC, 01:30 once"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          // 2026-11-01 09:00 UTC: 02:00 PDT becomes 01:00 PST, so 01:00–01:59 happens twice
          // (08:00–08:59 UTC, then 09:00–09:59 UTC). By real time, (08:20, 10:10] holds 110 minutes
          // and the hours 09:00 and 10:00; a fixed-hour 01:30 fires once, at the first 01:30 (08:30).
          const Tick = Job.make("tick", { payload: Schema.Struct({ from: Schema.String, at: Schema.Number }) })
          const of = (from: string, cron: string) =>
            PeriodicJob.unsafeMake(from, {
              cron,
              timeZone: "America/Los_Angeles",
              job: Tick,
              payload: (at) => ({ from, at: at.getTime() })
            })
          const start = Date.parse("2026-11-01T08:20:00Z")
          yield* TestClock.setTime(start)
          const schedules = [of("minutely", "* * * * *"), of("hourly", "0 * * * *"), of("at-0130", "30 1 * * *")]
          // two schedulers of the same periodic jobs: each tick of the repeated hour is enqueued once
          yield* Scheduler.make({ schedules })
          yield* Scheduler.make({ schedules })
          yield* realSleep(500) // the schedulers have read their state and sleep until 08:21
          const sql = (yield* SqlClient.SqlClient).withoutTransforms()
          const ticks = Effect.map(
            sql<{ payload: string }>`SELECT payload FROM ${sql(prefix + "jobs")}`,
            (rows) => {
              const by: Record<string, Array<number>> = { minutely: [], hourly: [], "at-0130": [] }
              for (const r of rows) {
                const p = JSON.parse(r.payload)
                by[p.from].push(p.at)
              }
              for (const list of Object.values(by)) list.sort((a, b) => a - b)
              return by
            }
          )
          const minutes = Effect.map(ticks, (t) => t.minutely.length)
          for (let minute = 1; minute <= 110; minute++) {
            yield* TestClock.adjust("1 minute")
            // a minute without its tick is the lost repeated hour: fail fast rather than time out
            yield* waitUntil(Effect.map(minutes, (n) => n >= minute), 5_000, `the tick of minute ${minute}`)
          }
          yield* realSleep(500) // a duplicate, if any, would show now
          const all = yield* ticks
          assert.deepStrictEqual(all.minutely, Array.from({ length: 110 }, (_, i) => start + (i + 1) * 60_000))
          assert.deepStrictEqual(all.hourly, [Date.parse("2026-11-01T09:00:00Z"), Date.parse("2026-11-01T10:00:00Z")])
          assert.deepStrictEqual(all["at-0130"], [Date.parse("2026-11-01T08:30:00Z")], "01:30 fires once, not twice")
        }), { pollInterval: "1 hour", rescueInterval: "1 hour" }), 120_000)

    it.live(name("a periodic tick is enqueued once, even after its job row is pruned, and never behind a later tick"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          // With `retention.completed` 0 the pruner deletes a tick's job within a minute, and with it
          // the tick's unique key: a scheduler that was late (a paused process) enqueued it again.
          const { driver } = yield* Database
          const queue = yield* Queue.Queue
          const Tick = Job.make("tick", { payload: Schema.Struct({ us: Schema.Number }) })
          const sql = (yield* SqlClient.SqlClient).withoutTransforms()
          const t = 1_800_000_000_000_000
          const fire = (tickUs: number) =>
            driver.scheduleFire("every-second", tickUs, Date.now() * 1000, queue.insert(Tick, { us: tickUs }))
          const first = yield* fire(t)
          assert.isTrue(first !== undefined && !first.duplicate)
          yield* sql`DELETE FROM ${sql(prefix + "jobs")}`
          assert.isUndefined(yield* fire(t), "the same tick, its job row gone")
          assert.isUndefined(yield* fire(t - 1_000_000), "an earlier tick")
          // Five schedulers at once on the next tick: one enqueues it.
          const next = yield* Effect.all(Array.from({ length: 5 }, () => fire(t + 1_000_000)), { concurrency: "unbounded" })
          assert.strictEqual(next.filter((r) => r !== undefined).length, 1)
          assert.strictEqual(yield* countJobs(prefix), 1)
          assert.strictEqual(yield* driver.scheduleGet("every-second"), t + 1_000_000)
          // A failed enqueue records nothing: the tick is tried again.
          const failed = yield* Effect.either(
            driver.scheduleFire("every-second", t + 2_000_000, Date.now() * 1000, Effect.fail("no"))
          )
          assert.isTrue(Either.isLeft(failed))
          assert.strictEqual(yield* driver.scheduleGet("every-second"), t + 1_000_000)
          assert.isDefined(yield* fire(t + 2_000_000))
        }), { maxConnections: 8 }))

    it.effect(name("cron (TestClock): a tick whose payload function throws is skipped; the next tick is enqueued"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const Tick = Job.make("tick", { payload: Schema.Struct({ at: Schema.Number }) })
          const flaky = PeriodicJob.unsafeMake("flaky", {
            cron: "* * * * *",
            job: Tick,
            payload: (at) => {
              if (at.getTime() === 60_000) throw new Error("no payload for minute 1")
              return { at: at.getTime() }
            }
          })
          yield* Scheduler.make({ schedules: [flaky] })
          yield* realSleep(500)
          yield* TestClock.adjust("1 minute")
          yield* realSleep(500)
          assert.strictEqual(yield* countJobs(prefix), 0)
          yield* TestClock.adjust("1 minute")
          yield* waitUntil(Effect.map(countJobs(prefix), (n) => n === 1), 20_000, "the tick of minute 2")
          const sql = (yield* SqlClient.SqlClient).withoutTransforms()
          const [row] = yield* sql<{ payload: string }>`SELECT payload FROM ${sql(prefix + "jobs")}`
          assert.deepStrictEqual(JSON.parse(row.payload), { at: 120_000 })
        }).pipe(Logger.withMinimumLogLevel(LogLevel.None)), { pollInterval: "1 hour", rescueInterval: "1 hour" }))

    it.effect(name("cron (TestClock): two schedules of one expression both fire; missed ticks skipped, or run once"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const Tick = Job.make("tick", { payload: Schema.Struct({ from: Schema.String, at: Schema.Number }) })
          const skipper = PeriodicJob.unsafeMake("skipper", {
            cron: "* * * * *",
            job: Tick,
            payload: (at) => ({ from: "skipper", at: at.getTime() / 60_000 })
          })
          const catcher = PeriodicJob.unsafeMake("catcher", {
            cron: "* * * * *",
            job: Tick,
            payload: (at) => ({ from: "catcher", at: at.getTime() / 60_000 }),
            missed: "runOnce"
          })
          const sql = (yield* SqlClient.SqlClient).withoutTransforms()
          const ticks = Effect.map(
            sql<{ payload: string }>`SELECT payload FROM ${sql(prefix + "jobs")} ORDER BY id`,
            (rows) => {
              const by: Record<string, Array<number>> = { skipper: [], catcher: [] }
              for (const r of rows) {
                const p = JSON.parse(r.payload)
                by[p.from].push(p.at)
              }
              return by
            }
          )
          const count = Effect.map(ticks, (t) => t.skipper.length + t.catcher.length)
          const start = Effect.gen(function*() {
            const scope = yield* Scope.make()
            yield* Scheduler.make({ schedules: [skipper, catcher] }).pipe(Scope.extend(scope))
            yield* realSleep(500)
            return scope
          })
          const first = yield* start
          yield* TestClock.adjust("1 minute")
          yield* waitUntil(Effect.map(count, (n) => n === 2), 20_000, "both schedules' first tick")
          yield* Scope.close(first, Exit.void)
          // every scheduler is down for 10 minutes
          yield* TestClock.adjust("10 minutes")
          yield* realSleep(300)
          assert.strictEqual(yield* count, 2)
          yield* start
          yield* waitUntil(Effect.map(count, (n) => n === 3), 20_000, "the missed tick run once")
          yield* realSleep(300)
          assert.deepStrictEqual(yield* ticks, { skipper: [1], catcher: [1, 11] })
          yield* TestClock.adjust("1 minute")
          yield* waitUntil(Effect.map(count, (n) => n === 5), 20_000, "the tick of minute 12")
          assert.deepStrictEqual(yield* ticks, { skipper: [1, 12], catcher: [1, 11, 12] })
        }), { pollInterval: "1 hour", rescueInterval: "1 hour" }), 60_000)

    it.effect(name("cron (TestClock): missed runOnce after a DST gap does not stop the periodic job"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const Tick = Job.make("tick", { payload: Schema.Struct({ at: Schema.String }) })
          const nightly = PeriodicJob.unsafeMake("nightly", {
            cron: "30 2 * * *",
            timeZone: "Europe/Berlin",
            job: Tick,
            payload: (at) => ({ at: at.toISOString() }),
            missed: "runOnce"
          })
          const sql = (yield* SqlClient.SqlClient).withoutTransforms()
          const ticks = Effect.map(
            sql<{ payload: string }>`SELECT payload FROM ${sql(prefix + "jobs")} ORDER BY id`,
            (rows) => rows.map((r) => JSON.parse(r.payload).at as string)
          )
          const start = Effect.gen(function*() {
            const scope = yield* Scope.make()
            yield* Scheduler.make({ schedules: [nightly] }).pipe(Scope.extend(scope))
            yield* realSleep(300)
            return scope
          })
          yield* TestClock.setTime(Date.parse("2026-03-28T01:29:00Z"))
          const first = yield* start
          yield* TestClock.adjust("1 minute")
          yield* waitUntil(Effect.map(ticks, (t) => t.length === 1), 10_000, "the tick of 28 March")
          yield* Scope.close(first, Exit.void)
          // every scheduler is down over the DST change; one starts the morning after
          yield* TestClock.setTime(Date.parse("2026-03-29T03:00:00Z"))
          yield* start
          yield* waitUntil(Effect.map(ticks, (t) => t.length === 2), 10_000, "the missed tick of 29 March, run once")
          // and it goes on: the tick of 30 March (02:30 CEST = 00:30Z)
          yield* TestClock.adjust("22 hours")
          yield* waitUntil(Effect.map(ticks, (t) => t.length === 3), 10_000, "the tick of 30 March")
          assert.deepStrictEqual(yield* ticks, [
            "2026-03-28T01:30:00.000Z",
            "2026-03-29T01:30:00.000Z",
            "2026-03-30T00:30:00.000Z"
          ])
        }), { pollInterval: "1 hour", rescueInterval: "1 hour" }))
  })
}
