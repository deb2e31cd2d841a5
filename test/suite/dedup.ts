/**
 * Unique keys' modes on every database: what an enqueue does to a job that holds its key (`skip`,
 * `replace`, `throttle`), keys unique within a period (TestClock), unique keys in `enqueueMany` and
 * `insertMany`, concurrent enqueues of one key, and options refused before any SQL.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as TestClock from "effect/TestClock"
import { Claimer, Job, Queue, Worker } from "../../src/index.js"
import { nowMicros } from "../../src/internal/time.js"
import { countJobs, realSleep, waitUntil, withQueue } from "../support/helpers.js"
import type { Target } from "../support/targets.js"

const Doc = Job.make("doc", { payload: Schema.Struct({ v: Schema.Number }) })
const OtherDoc = Job.make("other-doc", { payload: Schema.Struct({ v: Schema.Number }) })
/** A job whose payload names its mutex key. */
const KeyedDoc = Job.make("keyed-doc", {
  payload: Schema.Struct({ v: Schema.Number, m: Schema.String }),
  mutexKey: (p) => p.m
})

const hour = 3_600_000
/** 2026-12-05T10:20:00Z */
const t1020 = Date.UTC(2026, 11, 5, 10, 20)

/** A job's row as the queue reads it: state, payload, priority and due time (ms). */
const rowOf = (id: string) =>
  Effect.map(Effect.flatMap(Queue.Queue, (q) => q.get(id)), (j) => ({
    state: j.state,
    payload: j.payload,
    priority: j.priority,
    runAt: j.runAt.getTime()
  }))

/** Claims the due jobs of `name` (marks them running) as worker "w-test". */
const claim = (name: string) =>
  Effect.gen(function*() {
    const claimer = yield* Claimer.Claimer
    return yield* claimer.claim([{ name, priority: 0 }], 10, yield* nowMicros, "w-test")
  })

/** The jobs' `unique_key` column, by id. */
const storedKey = (prefix: string, id: string) =>
  Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    const rows = yield* sql<{ unique_key: string | null }>`SELECT unique_key FROM ${sql(prefix + "jobs")} WHERE id = ${id}`
    return rows[0]?.unique_key ?? null
  })

export const dedup = (target: Target) => {
  const name = (title: string) => `[${target.id}] dedup: ${title}`

  describe(`dedup [${target.id}]`, () => {
    it.effect(name("replace on a pending holder takes the new payload, priority and run_at (later or earlier); nothing new is written"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const queue = yield* Queue.Queue
          yield* TestClock.setTime(t1020)
          const unique = { key: "doc:1", mode: "replace" } as const
          const first = yield* queue.insert(Doc, { v: 1 }, { unique, delay: "30 seconds" })
          assert.deepStrictEqual(first, { id: first.id, duplicate: false })
          yield* TestClock.adjust("10 seconds")
          // debounce: the due time moves to this enqueue's, 30 s from now
          const second = yield* queue.insert(Doc, { v: 2 }, { unique, delay: "30 seconds", priority: 5 })
          assert.deepStrictEqual(second, { id: first.id, duplicate: true, replaced: true })
          assert.deepStrictEqual(yield* rowOf(first.id), {
            state: "pending",
            payload: { v: 2 },
            priority: 5,
            runAt: t1020 + 40_000
          })
          // earlier too: replace takes the new due time whichever it is
          assert.strictEqual(yield* queue.enqueue(Doc, { v: 3 }, { unique, runAt: new Date(t1020) }), first.id)
          assert.deepStrictEqual(yield* rowOf(first.id), { state: "pending", payload: { v: 3 }, priority: 0, runAt: t1020 })
          // skip (the default, and named) leaves the pending holder as it is
          assert.deepStrictEqual(yield* queue.insert(Doc, { v: 4 }, { unique: "doc:1" }), { id: first.id, duplicate: true })
          assert.deepStrictEqual(
            yield* queue.insert(Doc, { v: 5 }, { unique: { key: "doc:1", mode: "skip" }, delay: "1 hour" }),
            { id: first.id, duplicate: true }
          )
          assert.deepStrictEqual((yield* rowOf(first.id)).payload, { v: 3 })
          assert.strictEqual(yield* countJobs(prefix), 1)
        })))

    it.effect(name("throttle on a pending holder takes the new payload and keeps the earlier run_at"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const queue = yield* Queue.Queue
          yield* TestClock.setTime(t1020)
          const unique = { key: "doc:1", mode: "throttle" } as const
          const first = yield* queue.insert(Doc, { v: 1 }, { unique, delay: "30 seconds" })
          yield* TestClock.adjust("10 seconds")
          const second = yield* queue.insert(Doc, { v: 2 }, { unique, delay: "30 seconds" })
          assert.deepStrictEqual(second, { id: first.id, duplicate: true, replaced: true })
          // the earlier due time (the first enqueue's) stays, the payload is the latest
          assert.deepStrictEqual(yield* rowOf(first.id), { state: "pending", payload: { v: 2 }, priority: 0, runAt: t1020 + 30_000 })
          // an earlier due time than the holder's is taken
          assert.strictEqual(yield* queue.enqueue(Doc, { v: 3 }, { unique, delay: "5 seconds" }), first.id)
          assert.deepStrictEqual(yield* rowOf(first.id), { state: "pending", payload: { v: 3 }, priority: 0, runAt: t1020 + 15_000 })
          assert.strictEqual(yield* countJobs(prefix), 1)
        })))

    it.live(name("replace and throttle on a running holder write nothing (duplicate, replaced false); on a pending one the mutex key follows the payload"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const queue = yield* Queue.Queue
          const held = yield* queue.insert(KeyedDoc, { v: 1, m: "a" }, { unique: "k" })
          // the pending holder takes the new payload's mutex key with it
          const moved = yield* queue.insert(KeyedDoc, { v: 2, m: "b" }, { unique: { key: "k", mode: "replace" } })
          assert.deepStrictEqual(moved, { id: held.id, duplicate: true, replaced: true })
          const sql = (yield* SqlClient.SqlClient).withoutTransforms()
          const [m] = yield* sql<{ mutex_key: string }>`SELECT mutex_key FROM ${sql(prefix + "jobs")} WHERE id = ${held.id}`
          assert.strictEqual(m.mutex_key, "b")
          const claimed = yield* Effect.flatMap(Claimer.Claimer, (c) =>
            Effect.flatMap(nowMicros, (now) => c.claim([{ name: KeyedDoc.name, priority: 0 }], 10, now, "w-test", new Set([KeyedDoc.name]))))
          assert.deepStrictEqual(claimed.map((j) => j.id), [held.id])
          for (const mode of ["replace", "throttle", "skip"] as const) {
            const r = yield* queue.insert(KeyedDoc, { v: 9, m: "c" }, { unique: { key: "k", mode }, delay: "1 hour" })
            assert.deepStrictEqual(r, mode === "skip" ? { id: held.id, duplicate: true } : { id: held.id, duplicate: true, replaced: false })
          }
          const row = yield* rowOf(held.id)
          assert.deepStrictEqual([row.state, row.payload], ["running", { v: 2, m: "b" }])
          assert.strictEqual(yield* countJobs(prefix), 1)
        })))

    for (const mode of ["replace", "throttle"] as const) {
      it.live(name(`${mode} that makes a pending holder due now wakes a worker that waits for its earlier due time`), () =>
        withQueue(target, () =>
          Effect.gen(function*() {
            const queue = yield* Queue.Queue
            const ran: Array<number> = []
            yield* Worker.make({ handlers: [Job.handler(Doc, (p) => Effect.sync(() => ran.push(p.v)))] })
            const held = yield* queue.enqueue(Doc, { v: 1 }, { unique: "soon", delay: "1 hour" })
            // the worker has probed and waits for the job's due time, an hour away (and polls hourly)
            yield* realSleep(500)
            assert.deepStrictEqual(ran, [])
            assert.deepStrictEqual(
              yield* queue.insert(Doc, { v: 2 }, { unique: { key: "soon", mode } }),
              { id: held, duplicate: true, replaced: true }
            )
            yield* waitUntil(Effect.map(queue.get(held), (j) => j.state === "completed"), 10_000, "the replaced job to run")
            assert.deepStrictEqual(ran, [2])
          }), { pollInterval: "1 hour" }))
    }

    it.live(name("a holder of another job name is never replaced"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const queue = yield* Queue.Queue
          const held = yield* queue.enqueue(OtherDoc, { v: 1 }, { unique: "shared" })
          for (const mode of ["replace", "throttle"] as const) {
            const r = yield* queue.insert(Doc, { v: 2 }, { unique: { key: "shared", mode } })
            assert.deepStrictEqual(r, { id: held, duplicate: true, replaced: false })
          }
          const row = yield* Effect.flatMap(Queue.Queue, (q) => q.get(held))
          assert.deepStrictEqual([row.name, row.payload], [OtherDoc.name, { v: 1 }])
          assert.strictEqual(yield* countJobs(prefix), 1)
        })))

    it.live(name("on a completed holder: a duplicate that writes nothing with states [completed], whatever the mode; a new job without"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const queue = yield* Queue.Queue
          yield* Worker.make({ handlers: [Job.handler(Doc, () => Effect.void)] })
          const kept = yield* queue.enqueue(Doc, { v: 1 }, { unique: { key: "kept", states: ["completed"] } })
          const free = yield* queue.enqueue(Doc, { v: 1 }, { unique: "free" })
          yield* waitUntil(Effect.map(countJobs(prefix, "completed"), (n) => n === 2), 20_000, "2 jobs completed")
          for (const mode of ["skip", "replace", "throttle"] as const) {
            const r = yield* queue.insert(Doc, { v: 2 }, { unique: { key: "kept", mode }, delay: "1 hour" })
            assert.deepStrictEqual(r, mode === "skip" ? { id: kept, duplicate: true } : { id: kept, duplicate: true, replaced: false })
          }
          assert.deepStrictEqual(yield* rowOf(kept).pipe(Effect.map((r) => [r.state, r.payload])), ["completed", { v: 1 }])
          const fresh = yield* queue.insert(Doc, { v: 3 }, { unique: { key: "free", mode: "replace" }, delay: "1 hour" })
          assert.isFalse(fresh.duplicate)
          assert.notStrictEqual(fresh.id, free)
          assert.strictEqual(yield* countJobs(prefix), 3)
        }), { pollInterval: "100 millis" }))

    it.effect(name("period: one job per bucket of the enqueue's Clock time; a completed job holds its bucket by default"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const queue = yield* Queue.Queue
          yield* TestClock.setTime(t1020)
          const unique = { key: "digest:7", period: "1 hour" } as const
          const first = yield* queue.insert(Doc, { v: 1 }, { unique })
          assert.isFalse(first.duplicate)
          // stored as the key, U+001F, the period and the bucket's start (10:00), all in ms
          assert.strictEqual(yield* storedKey(prefix, first.id), `digest:7\u001f${hour}:${Date.UTC(2026, 11, 5, 10)}`)
          yield* TestClock.adjust("39 minutes") // 10:59
          // the due time does not choose the bucket: the enqueue's time does
          assert.deepStrictEqual(yield* queue.insert(Doc, { v: 2 }, { unique, delay: "2 hours" }), { id: first.id, duplicate: true })
          // a plain key of the same text is another key
          assert.isFalse((yield* queue.insert(Doc, { v: 3 }, { unique: "digest:7" })).duplicate)
          // the job runs and completes: with a period, completed holds the key by default
          yield* Worker.make({ handlers: [Job.handler(Doc, () => Effect.void)] })
          yield* waitUntil(
            Effect.zipRight(TestClock.adjust("1 millis"), Effect.map(queue.get(first.id), (j) => j.state === "completed")),
            20_000,
            "the first digest completed"
          )
          assert.deepStrictEqual(yield* queue.insert(Doc, { v: 4 }, { unique }), { id: first.id, duplicate: true })
          // 11:00: the next bucket, a new job; and again a duplicate within it
          yield* TestClock.setTime(Date.UTC(2026, 11, 5, 11))
          const next = yield* queue.insert(Doc, { v: 5 }, { unique, delay: "1 hour" })
          assert.isFalse(next.duplicate)
          assert.notStrictEqual(next.id, first.id)
          assert.deepStrictEqual(yield* queue.insert(Doc, { v: 6 }, { unique, delay: "1 hour" }), { id: next.id, duplicate: true })
          // explicit states leave completed out: once done, its bucket takes a new job
          const own = { key: "own", period: "1 hour", states: [] } as const
          const a = yield* queue.insert(Doc, { v: 7 }, { unique: own })
          yield* waitUntil(
            Effect.zipRight(TestClock.adjust("1 millis"), Effect.map(queue.get(a.id), (j) => j.state === "completed")),
            20_000,
            "the job of key own completed"
          )
          assert.isFalse((yield* queue.insert(Doc, { v: 8 }, { unique: own, delay: "1 hour" })).duplicate)
          // with a mode: a pending holder of the bucket takes the new payload
          assert.deepStrictEqual(
            yield* queue.insert(Doc, { v: 9 }, { unique: { ...unique, mode: "replace" }, delay: "2 hours" }),
            { id: next.id, duplicate: true, replaced: true }
          )
          assert.deepStrictEqual((yield* rowOf(next.id)).payload, { v: 9 })
        }), { pollInterval: "1 hour" }))

    it.effect(name("period: buckets are multiples of the period since the epoch, for any period"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const queue = yield* Queue.Queue
          yield* TestClock.setTime(7_000) // 7 s after the epoch
          const unique = { key: "p", period: 5_000 } as const // ms
          const a = yield* queue.insert(Doc, { v: 1 }, { unique, delay: "1 hour" })
          assert.strictEqual(yield* storedKey(prefix, a.id), "p\u001f5000:5000")
          yield* TestClock.adjust("2999 millis") // 9.999 s: same bucket
          assert.isTrue((yield* queue.insert(Doc, { v: 2 }, { unique, delay: "1 hour" })).duplicate)
          yield* TestClock.adjust("1 millis") // 10 s: the next
          const b = yield* queue.insert(Doc, { v: 3 }, { unique, delay: "1 hour" })
          assert.isFalse(b.duplicate)
          assert.strictEqual(yield* storedKey(prefix, b.id), "p\u001f5000:10000")
          // another period of the same key is another key
          assert.isFalse((yield* queue.insert(Doc, { v: 4 }, { unique: { key: "p", period: "1 minute" }, delay: "1 hour" })).duplicate)
          assert.strictEqual(yield* countJobs(prefix), 3)
        })))

    it.live(name("enqueueMany and insertMany take keys: duplicates within the batch and against rows, per mode, ids in input order"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const queue = yield* Queue.Queue
          const existing = yield* queue.enqueue(Doc, { v: 100 }, { unique: "k1", delay: "1 hour" })
          const running = yield* queue.enqueue(OtherDoc, { v: 200 }, { unique: "k3" })
          yield* claim(OtherDoc.name)
          // v: 1..8, keys by v; v 5 has none
          const keys: Record<number, string | Queue.UniqueOptions | undefined> = {
            1: "k1", // existing pending holder, skip
            2: { key: "k2", mode: "skip" }, // new
            3: { key: "k2", mode: "replace" }, // within the batch: replaces v 2
            4: { key: "k2" }, // skip: k2 keeps v 3
            5: undefined,
            6: { key: "k1", mode: "throttle" }, // existing holder takes v 6
            7: { key: "k3", mode: "replace" }, // running holder of another name: nothing
            8: "k4"
          }
          const payloads = [1, 2, 3, 4, 5, 6, 7, 8].map((v) => ({ v }))
          const results = yield* queue.insertMany(Doc, payloads, { delay: "1 hour", unique: (p) => keys[p.v] })
          const k2 = results[1].id
          const plain = results[4].id
          const k4 = results[7].id
          assert.deepStrictEqual(results, [
            { id: existing, duplicate: true },
            { id: k2, duplicate: false },
            { id: k2, duplicate: true, replaced: true },
            { id: k2, duplicate: true },
            { id: plain, duplicate: false },
            { id: existing, duplicate: true, replaced: true },
            { id: running, duplicate: true, replaced: false },
            { id: k4, duplicate: false }
          ])
          assert.strictEqual(new Set([existing, running, k2, plain, k4]).size, 5)
          assert.deepStrictEqual((yield* rowOf(k2)).payload, { v: 3 })
          assert.deepStrictEqual((yield* rowOf(existing)).payload, { v: 6 })
          assert.deepStrictEqual((yield* rowOf(running)).payload, { v: 200 })
          assert.deepStrictEqual((yield* rowOf(k4)).payload, { v: 8 })
          assert.strictEqual(yield* countJobs(prefix), 5)
          // enqueueMany gives the same ids: the holders' for duplicates
          const ids = yield* queue.enqueueMany(Doc, payloads, { delay: "1 hour", unique: (p) => keys[p.v] })
          assert.deepStrictEqual(
            ids.filter((_, i) => i !== 4),
            [existing, k2, k2, k2, existing, running, k4]
          )
          assert.notStrictEqual(ids[4], plain)
          assert.strictEqual(yield* countJobs(prefix), 6)
          // a batch without any key (the function gives none) is a plain batch
          const none = yield* queue.insertMany(Doc, [{ v: 1 }, { v: 2 }], { unique: () => undefined })
          assert.deepStrictEqual(none.map((r) => r.duplicate), [false, false])
          assert.strictEqual(yield* countJobs(prefix), 8)
        })))

    it.live(name("enqueueMany with keys joins the caller's transaction: a rollback leaves nothing"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const queue = yield* Queue.Queue
          const sql = yield* SqlClient.SqlClient
          const exit = yield* Effect.exit(sql.withTransaction(Effect.gen(function*() {
            const ids = yield* queue.enqueueMany(Doc, [{ v: 1 }, { v: 2 }, { v: 3 }], {
              unique: (p) => (p.v === 3 ? undefined : `t${p.v}`)
            })
            assert.strictEqual(ids.length, 3)
            assert.strictEqual(yield* countJobs(prefix), 3)
            return yield* Effect.fail("rollback" as const)
          })))
          assert.isTrue(exit._tag === "Failure")
          assert.strictEqual(yield* countJobs(prefix), 0)
          // the keys are free
          assert.isFalse((yield* queue.insert(Doc, { v: 1 }, { unique: "t1" })).duplicate)
        })))

    for (const mode of ["skip", "replace", "throttle"] as const) {
      it.live(name(`20 concurrent enqueues of one key (${mode}) leave one pending job with one of their payloads`), () =>
        withQueue(target, (prefix) =>
          Effect.gen(function*() {
            const queue = yield* Queue.Queue
            for (let round = 0; round < 3; round++) {
              const key = `race-${round}`
              const results = yield* Effect.all(
                Array.from({ length: 20 }, (_, i) => queue.insert(Doc, { v: i }, { unique: { key, mode }, delay: `${i + 1} minutes` })),
                { concurrency: "unbounded" }
              )
              assert.strictEqual(new Set(results.map((r) => r.id)).size, 1)
              assert.strictEqual(results.filter((r) => !r.duplicate).length, 1)
              const row = yield* rowOf(results[0].id)
              assert.strictEqual(row.state, "pending")
              const v = (row.payload as { v: number }).v
              assert.isTrue(v >= 0 && v < 20)
              if (mode === "skip") assert.isFalse(results[v].duplicate, "skip kept another payload than the writer's")
              // every duplicate of a mode that replaces gave the pending holder its payload
              else assert.isTrue(results.every((r) => !r.duplicate || r.replaced === true))
              // the enqueues ran within a few seconds: the due time is the stored payload's own
              // (skip: the writer's; replace: the last to write), or the earliest (throttle: v 0's)
              const createdAt = (yield* queue.get(results[0].id)).createdAt.getTime()
              const expected = createdAt + (mode === "throttle" ? 1 : v + 1) * 60_000
              assert.isTrue(Math.abs(row.runAt - expected) < 10_000, `run_at ${row.runAt - createdAt} ms after created, payload v ${v}`)
            }
            assert.strictEqual(yield* countJobs(prefix, "pending"), 3)
            assert.strictEqual(yield* countJobs(prefix), 3)
          }), { maxConnections: 10 }))
    }

    it.live(name("concurrent enqueueMany batches with overlapping keys in opposite orders: one job per key, no failure"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const queue = yield* Queue.Queue
          const vs = Array.from({ length: 10 }, (_, i) => i)
          const batches = yield* Effect.all(
            Array.from({ length: 6 }, (_, b) =>
              queue.enqueueMany(Doc, (b % 2 === 0 ? vs : [...vs].reverse()).map((v) => ({ v })), {
                delay: "1 hour",
                unique: (p) => ({ key: `m${p.v}`, mode: b % 3 === 0 ? "replace" : "skip" })
              })),
            { concurrency: "unbounded" }
          )
          // each batch got, for each key, the one job of that key
          const byKey = (ids: ReadonlyArray<string>, b: number) => (b % 2 === 0 ? ids : [...ids].reverse())
          for (let b = 1; b < batches.length; b++) assert.deepStrictEqual(byKey(batches[b], b), byKey(batches[0], 0))
          assert.strictEqual(yield* countJobs(prefix, "pending"), 10)
        }), { maxConnections: 10 }))

    it.live(name("concurrent enqueueMany batches repeating keys in mixed modes (skip, replace, throttle): none fails, one job per key"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const queue = yield* Queue.Queue
          const modes = ["skip", "replace", "throttle"] as const
          // 8 fibers × 12 batches of 8 rows over 12 keys, each key twice or more in some batches: on
          // MySQL/MariaDB a skip's duplicate check and a replace's update of one key deadlocked with
          // another batch doing the same, more often than its retries could absorb.
          const results = yield* Effect.all(
            Array.from({ length: 8 }, (_, f) =>
              Effect.forEach(Array.from({ length: 12 }, (_, r) => r), (r) =>
                Effect.either(queue.enqueueMany(Doc, Array.from({ length: 8 }, (_, i) => ({ v: (i * 3 + f + r) % 12 })), {
                  delay: "1 hour",
                  unique: (p, i) => ({ key: `mixed:${p.v}`, mode: modes[(i + f) % 3] })
                })))),
            { concurrency: "unbounded" }
          )
          const failed = results.flat().filter((e) => e._tag === "Left")
          assert.deepStrictEqual(failed.map((e) => String(e.left)).slice(0, 3), [])
          assert.strictEqual(yield* countJobs(prefix, "pending"), 12)
        }), { maxConnections: 10 }), 120_000)

    it.live(name("bad input is refused with InvalidEnqueueOption and a path, and writes nothing"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const queue = yield* Queue.Queue
          const refused = (effect: Effect.Effect<unknown, unknown>) =>
            Effect.map(Effect.flip(effect), (e: any) => [e._tag, e.path, e.reason])
          const one = (unique: unknown) => refused(queue.enqueue(Doc, { v: 1 }, { unique: unique as any }))
          assert.deepStrictEqual(yield* one({ key: "k", mode: "debounce" }), ["InvalidEnqueueOption", "unique.mode", "type"])
          assert.deepStrictEqual(yield* one({ key: "k", mode: null }), ["InvalidEnqueueOption", "unique.mode", "type"])
          assert.deepStrictEqual(yield* one({ key: "k", period: 0 }), ["InvalidEnqueueOption", "unique.period", "range"])
          assert.deepStrictEqual(yield* one({ key: "k", period: -5 }), ["InvalidEnqueueOption", "unique.period", "range"])
          assert.deepStrictEqual(yield* one({ key: "k", period: Number.NaN }), ["InvalidEnqueueOption", "unique.period", "range"])
          assert.deepStrictEqual(yield* one({ key: "k", period: Infinity }), ["InvalidEnqueueOption", "unique.period", "range"])
          assert.deepStrictEqual(yield* one({ key: "k", period: "banana" }), ["InvalidEnqueueOption", "unique.period", "type"])
          assert.deepStrictEqual(yield* one({ key: "k", period: "1500 micros" }), ["InvalidEnqueueOption", "unique.period", "range"])
          assert.deepStrictEqual(yield* one({ key: "x".repeat(201), period: "1 hour" }), ["InvalidEnqueueOption", "unique.key", "range"])
          assert.deepStrictEqual(yield* one({ key: "k", states: "completed" }), ["InvalidEnqueueOption", "unique.states", "type"])
          // A misspelt option is refused, not ignored; a negative period is named as typed.
          const typo = yield* Effect.flip(queue.enqueue(Doc, { v: 1 }, { unique: { key: "k", mdoe: "replace" } as any }))
          assert.deepStrictEqual([typo._tag, (typo as any).path], ["InvalidEnqueueOption", "unique"])
          assert.include(typo.message, `unknown option "mdoe" (did you mean "mode"?)`)
          const negative = yield* Effect.flip(queue.enqueue(Doc, { v: 1 }, { unique: { key: "k", period: "-1 hour" } }))
          assert.include(negative.message, `unique.period must be a whole number of milliseconds from 1 to 9007199254740991, got "-1 hour"`)
          assert.include((yield* Effect.flip(queue.enqueue(Doc, { v: 1 }, { unique: { key: "k", period: -5 } }))).message, "got -5")
          assert.include(
            (yield* Effect.flip(queue.enqueue(Doc, { v: 1 }, { unique: { key: "k", period: "100000000 weeks" } }))).message,
            `to 9007199254740991, got "100000000 weeks"`
          )
          // A misspelt option of the enqueue itself is refused too (a job meant to be unique written twice).
          const uniqe = yield* Effect.flip(queue.enqueue(Doc, { v: 1 }, { uniqe: "k" } as any))
          assert.deepStrictEqual([uniqe._tag, (uniqe as any).path, (uniqe as any).reason], ["InvalidEnqueueOption", "options", "type"])
          assert.include(uniqe.message, `unknown option "uniqe" (did you mean "unique"?)`)
          const manyTypo = yield* Effect.flip(queue.enqueueMany(Doc, [{ v: 1 }], { uniqe: () => "k" } as any))
          assert.deepStrictEqual([manyTypo._tag, (manyTypo as any).path], ["InvalidEnqueueOption", "options"])
          // 200 characters with a period, and 255 without, are taken
          assert.isFalse((yield* queue.insert(Doc, { v: 1 }, { unique: { key: "y".repeat(200), period: "1 hour" } })).duplicate)
          assert.isFalse((yield* queue.insert(Doc, { v: 1 }, { unique: { key: "z".repeat(255), mode: "replace" } })).duplicate)
          assert.strictEqual(yield* countJobs(prefix), 2)
          // enqueueMany: a bad key of one payload refuses the batch; so do a non-function and a throw
          const many = (unique: unknown) =>
            refused(queue.enqueueMany(Doc, [{ v: 1 }, { v: 2 }, { v: 3 }], { unique: unique as any }))
          const badSecond = yield* Effect.flip(queue.enqueueMany(Doc, [{ v: 1 }, { v: 2 }, { v: 3 }], {
            unique: (p) => (p.v === 2 ? { key: "ok", mode: "sometimes" as any } : `ok${p.v}`)
          }))
          assert.deepStrictEqual([badSecond._tag, (badSecond as any).path], ["InvalidEnqueueOption", "unique.mode"])
          assert.include(badSecond.message, "payloads[1]")
          assert.deepStrictEqual(yield* many("k"), ["InvalidEnqueueOption", "unique", "type"])
          assert.deepStrictEqual(yield* many(() => ""), ["InvalidEnqueueOption", "unique", "range"])
          assert.deepStrictEqual(yield* many(() => 42), ["InvalidEnqueueOption", "unique", "type"])
          assert.deepStrictEqual(yield* many(() => ({ key: "k", period: "0 seconds" })), ["InvalidEnqueueOption", "unique.period", "range"])
          assert.deepStrictEqual(
            yield* many(() => {
              throw new Error("no key")
            }),
            ["InvalidEnqueueOption", "unique", "threw"]
          )
          assert.strictEqual(yield* countJobs(prefix), 2)
          // nothing was written: the keys of the refused batches are free
          assert.isFalse((yield* queue.insert(Doc, { v: 1 }, { unique: "ok1" })).duplicate)
          assert.isFalse((yield* queue.insert(Doc, { v: 1 }, { unique: "k" })).duplicate)
        })))

    it.live(name("a replace that meets an uncommitted holder waits for its transaction, then replaces it (commit) or inserts (rollback)"), () =>
      Effect.forEach(["commits", "rolls back"] as const, (outcome) =>
        withQueue(target, (prefix) =>
          Effect.gen(function*() {
            const sql = yield* SqlClient.SqlClient
            const queue = yield* Queue.Queue
            const enqueued = yield* Deferred.make<string>()
            const release = yield* Deferred.make<void>()
            const a = yield* Effect.gen(function*() {
              const id = yield* queue.enqueue(Doc, { v: 1 }, { unique: "k", delay: "1 hour" })
              yield* Deferred.succeed(enqueued, id)
              yield* Deferred.await(release)
              if (outcome === "rolls back") return yield* Effect.fail("rollback" as const)
              return id
            }).pipe(sql.withTransaction, Effect.exit, Effect.fork)
            const aId = yield* Deferred.await(enqueued)
            const b = yield* Effect.fork(queue.insert(Doc, { v: 2 }, { unique: { key: "k", mode: "replace" }, delay: "1 hour" }))
            yield* realSleep(300)
            assert.isNull(b.unsafePoll(), "the replace returned before the holder's transaction ended")
            yield* Deferred.succeed(release, undefined)
            yield* a.await
            const r = yield* b.await.pipe(Effect.flatten)
            if (outcome === "commits") assert.deepStrictEqual(r, { id: aId, duplicate: true, replaced: true })
            else assert.isFalse(r.duplicate)
            assert.deepStrictEqual((yield* rowOf(r.id)).payload, { v: 2 })
            assert.strictEqual(yield* countJobs(prefix), 1)
          })), { discard: true }))
  })
}
