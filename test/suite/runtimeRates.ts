/**
 * Rate limits set at run time (`Admin.setLimits` with `rate` / `ratePerKey`, `sqlane limit --rate`),
 * on every database: two workers in their own pools follow them under TestClock (a name without a
 * rate is claimed under one; a run-time rate wins over the definition's, and once removed the
 * definition's applies again), a rate whose period changes, the refusals, the CLI's forms, and the
 * pruner's periods.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as TestClock from "effect/TestClock"
import { parseRate } from "../../src/cli/rateText.js"
import { Admin, Claimer, Errors, Job, Queue, Worker } from "../../src/index.js"
import { Database } from "../../src/internal/Database.js"
import { limitsOf } from "../../src/internal/limits.js"
import { nowMicros } from "../../src/internal/time.js"
import type { QueueOptions } from "../../src/services/QueueConfig.js"
import { realSleep, testLayer, waitUntil, withQueue } from "../support/helpers.js"
import { runCli } from "../support/processes.js"
import type { Target } from "../support/targets.js"

/** No limits in its definition. */
const Unrated = Job.make("unrated", { payload: Schema.Struct({ i: Schema.Number }) })
/** 3 starts per 10 s in its definition. */
const Defined = Job.make("defined-rate", {
  payload: Schema.Struct({ i: Schema.Number }),
  limits: { rate: { starts: 3, per: "10 seconds" } }
})
/** A concurrency key and no limit. */
const Keyed = Job.make("keyed", {
  payload: Schema.Struct({ tenant: Schema.String, i: Schema.Number }),
  limits: { key: (p) => p.tenant }
})

const hour = 3_600_000_000
const minute = 60_000_000
const groupsOf = (...names: ReadonlyArray<string>) => names.map((name) => ({ name, priority: 0 }))

/** A worker on a QueueLive of its own (its own pool and notifier) on `prefix`, for the life of the scope. */
const otherWorker = <R>(target: Target, prefix: string, options: Worker.WorkerOptions<R>, queueOptions: QueueOptions) =>
  Layer.launch(
    Worker.layer(options).pipe(Layer.provide(testLayer(target, { ...queueOptions, prefix, migrate: false }).layer))
  ).pipe(Effect.forkScoped)

/** Starts (TestClock ms) counted per window of `perMs` from `fromMs` on: `[windowStartMs, starts]`, in order. */
const perWindow = (started: ReadonlyArray<number>, perMs: number, fromMs = 0) => {
  const counts = new Map<number, number>()
  for (const ms of started) if (ms >= fromMs) counts.set(Math.floor(ms / perMs) * perMs, (counts.get(Math.floor(ms / perMs) * perMs) ?? 0) + 1)
  return Array.from(counts).sort((a, b) => a[0] - b[0])
}

/**
 * A worker of `Unrated` at concurrency 1 whose first attempt fails with `RateLimited` of scope `name`
 * and `delay`, the others succeed; returns the TestClock ms of each start.
 */
const firstHoldsName = (delay: number) =>
  Effect.gen(function*() {
    const started: Array<number> = []
    let first = true
    yield* Worker.make({
      handlers: [Job.handler(Unrated, () =>
        Effect.flatMap(Clock.currentTimeMillis, (ms) => {
          started.push(ms)
          if (!first) return Effect.void
          first = false
          return Effect.fail(new Errors.RateLimited({ delay, scope: "name" }))
        }))],
      concurrency: 1
    })
    return started
  })

export const runtimeRates = (target: Target) => {
  const name = (s: string) => `[${target.id}] ${s}`
  const queueOptions = { pollInterval: "1 hour", rescueInterval: "300 millis" } as const

  describe(`runtime rates [${target.id}]`, () => {
    it.effect(name("a rate set at run time on a name without one holds two workers' claims to it; removed, the name runs without one"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const started: Array<number> = []
          const workers = new Set<string>()
          const handler = (worker: string) =>
            Job.handler(Unrated, () =>
              Effect.map(Clock.currentTimeMillis, (ms) => {
                started.push(ms)
                workers.add(worker)
              }))
          yield* Worker.make({ handlers: [handler("a")], concurrency: 5 })
          yield* otherWorker(target, prefix, { handlers: [handler("b")], concurrency: 5 }, queueOptions)
          const admin = yield* Admin.Admin
          const queue = yield* Queue.Queue
          // Without a rate: 6 start at once.
          yield* queue.enqueueMany(Unrated, Array.from({ length: 6 }, (_, i) => ({ i })))
          yield* waitUntil(Effect.sync(() => started.length === 6), 20_000, "6 starts without a rate")
          started.length = 0
          const set = yield* admin.setLimits(Unrated.name, { rate: { starts: 3, per: "10 seconds" } })
          assert.deepStrictEqual(set, { running: undefined, runningPerKey: undefined, rate: { starts: 3, perMs: 10_000 }, ratePerKey: undefined })
          // The other process's worker has it within one rescue interval (0.3 s of wall-clock time).
          yield* realSleep(1_000)
          yield* queue.enqueueMany(Unrated, Array.from({ length: 10 }, (_, i) => ({ i })))
          yield* waitUntil(Effect.sync(() => started.length === 3), 20_000, "3 starts")
          yield* realSleep(500)
          assert.deepStrictEqual(started, [0, 0, 0])
          // Status shows the run-time rate and its window.
          const status = (yield* admin.status).names.find((n) => n.name === Unrated.name)?.limits
          assert.deepStrictEqual(
            [status?.rate, status?.setAtRunTime, status?.rateWindow?.starts, status?.rateWindow?.nextWindowAt.getTime()],
            [{ starts: 3, perMs: 10_000 }, true, 3, 10_000]
          )
          yield* TestClock.adjust("10 seconds")
          yield* waitUntil(Effect.sync(() => started.length === 6), 20_000, "6 starts")
          yield* realSleep(500)
          assert.deepStrictEqual(perWindow(started, 10_000), [[0, 3], [10_000, 3]])
          // Removed: neither worker holds the name to a rate any more (one that found the window used
          // up before waits for its end), so some window has more than 3.
          assert.isTrue(yield* admin.clearLimits(Unrated.name))
          yield* realSleep(1_000)
          yield* queue.enqueueMany(Unrated, Array.from({ length: 4 }, (_, i) => ({ i: 10 + i })))
          yield* TestClock.adjust("10 seconds")
          yield* waitUntil(Effect.sync(() => started.length === 14), 20_000, "every job started")
          assert.isAbove(Math.max(...perWindow(started, 10_000, 10_000).map(([, n]) => n)), 3, JSON.stringify(started))
          assert.deepStrictEqual((yield* admin.status).names.find((n) => n.name === Unrated.name)?.limits, undefined)
        }), queueOptions), 60_000)

    it.effect(name("a worker that found the window used up claims again as soon as the rate is raised, not at the window's end"), () =>
      withQueue(target, () =>
        Effect.gen(function*() {
          const started: Array<number> = []
          yield* Worker.make({
            handlers: [Job.handler(Unrated, () => Effect.map(Clock.currentTimeMillis, (ms) => void started.push(ms)))],
            concurrency: 5
          })
          const admin = yield* Admin.Admin
          const queue = yield* Queue.Queue
          yield* admin.setLimits(Unrated.name, { rate: { starts: 2, per: "1 hour" } })
          // As in the test above: the worker reads the new limits before the jobs come.
          yield* realSleep(1_000)
          yield* queue.enqueueMany(Unrated, Array.from({ length: 6 }, (_, i) => ({ i })))
          yield* waitUntil(Effect.sync(() => started.length === 2), 20_000, "2 starts")
          yield* realSleep(500)
          assert.strictEqual(started.length, 2)
          // Raised: the same window (the clock has not moved) admits 4 more, without waiting an hour.
          yield* admin.setLimits(Unrated.name, { rate: { starts: 6, per: "1 hour" } })
          yield* waitUntil(Effect.sync(() => started.length === 6), 20_000, "6 starts in the raised window")
          assert.deepStrictEqual(started, [0, 0, 0, 0, 0, 0])
        }), queueOptions), 60_000)

    it.effect(name("RateLimited with scope name holds a name rated only at run time in every claim until its delay"), () =>
      withQueue(target, () =>
        Effect.gen(function*() {
          const started = yield* firstHoldsName(60_000)
          const admin = yield* Admin.Admin
          const queue = yield* Queue.Queue
          yield* admin.setLimits(Unrated.name, { rate: { starts: 100, per: "1 hour" } })
          yield* realSleep(1_000)
          yield* queue.enqueueMany(Unrated, Array.from({ length: 3 }, (_, i) => ({ i })))
          yield* waitUntil(Effect.sync(() => started.length === 1), 20_000, "the first start")
          // The name is held for a minute: nothing else starts, though the window has room.
          yield* realSleep(1_000)
          assert.strictEqual(started.length, 1)
          yield* TestClock.adjust("61 seconds")
          yield* waitUntil(Effect.sync(() => started.length === 4), 20_000, "every job started after the hold")
          assert.isTrue(started.slice(1).every((ms) => ms >= 60_000), JSON.stringify(started))
        }), queueOptions), 60_000)

    it.effect(name("a run-time rate wins over the definition's, in two workers; removed, the definition's applies again"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const started: Array<number> = []
          const handler = Job.handler(Defined, () => Effect.map(Clock.currentTimeMillis, (ms) => void started.push(ms)))
          yield* Worker.make({ handlers: [handler], concurrency: 5 })
          yield* otherWorker(target, prefix, { handlers: [handler], concurrency: 5 }, queueOptions)
          const admin = yield* Admin.Admin
          const queue = yield* Queue.Queue
          // 2 per 5 s at run time, over the definition's 3 per 10 s.
          yield* admin.setLimits(Defined.name, { rate: { starts: 2, per: Duration.seconds(5) } })
          yield* realSleep(1_000)
          yield* queue.enqueueMany(Defined, Array.from({ length: 14 }, (_, i) => ({ i })))
          yield* waitUntil(Effect.sync(() => started.length === 2), 20_000, "2 starts")
          yield* realSleep(500)
          assert.deepStrictEqual(started, [0, 0])
          yield* TestClock.adjust("5 seconds")
          yield* waitUntil(Effect.sync(() => started.length === 4), 20_000, "4 starts")
          yield* realSleep(500)
          assert.deepStrictEqual(perWindow(started, 5_000), [[0, 2], [5_000, 2]])
          // The definition's 3 per 10 s again: within 0–10 s a worker not waiting for the end of the
          // 5 s window may start one more (the row of the window 5–10 s counts its 2).
          yield* admin.setLimits(Defined.name, { rate: null })
          yield* realSleep(1_000)
          assert.isAtMost(started.length, 5)
          yield* TestClock.adjust("5 seconds")
          yield* waitUntil(Effect.sync(() => perWindow(started, 10_000, 10_000).length === 1), 20_000, "starts at 10 s")
          yield* realSleep(500)
          yield* TestClock.adjust("10 seconds")
          yield* waitUntil(Effect.sync(() => perWindow(started, 10_000, 20_000).length === 1), 20_000, "starts at 20 s")
          yield* realSleep(500)
          assert.deepStrictEqual(perWindow(started, 10_000, 10_000), [[10_000, 3], [20_000, 3]])
          assert.isAtMost(perWindow(started, 10_000)[0][1], 5)
        }), queueOptions), 60_000)

    it.live(name("a rate whose period is made longer counts the window row it finds and does not wait a new period after it"), () =>
      withQueue(target, () =>
        Effect.gen(function*() {
          const queue = yield* Queue.Queue
          const claimer = yield* Claimer.Claimer
          const keyed = new Set([Keyed.name])
          const limits = (rate: { starts: number; perMs: number }, ratePerKey: { starts: number; perMs: number }) =>
            new Map([[Keyed.name, { running: undefined, runningPerKey: undefined, rate, ratePerKey, fair: false }]])
          const a = yield* queue.enqueueMany(Keyed, Array.from({ length: 6 }, (_, i) => ({ tenant: "a", i })))
          const b = yield* queue.enqueueMany(Keyed, Array.from({ length: 6 }, (_, i) => ({ tenant: "b", i })))
          const window = Math.ceil(Date.now() * 1000 / hour) * hour
          // 3 a minute, 2 per key a minute: at 12:34, 2 of a and 1 of b.
          const perMinute = limits({ starts: 3, perMs: 60_000 }, { starts: 2, perMs: 60_000 })
          const first = yield* claimer.claimWithHolds(groupsOf(Keyed.name), 10, window + 34 * minute, "w1", keyed, perMinute)
          assert.deepStrictEqual(first.claimed.map((r) => r.id), [a[0], a[1], b[0]])
          // Made 5 an hour, 3 per key an hour at 12:35: the window 12:00–13:00 counts the 3 (and a's 2, b's
          // 1) of the rows that began at 12:34, so 2 more start (a's third, b's second), not none until 13:34.
          const perHour = limits({ starts: 5, perMs: 3_600_000 }, { starts: 3, perMs: 3_600_000 })
          const second = yield* claimer.claimWithHolds(groupsOf(Keyed.name), 10, window + 35 * minute, "w2", keyed, perHour)
          assert.deepStrictEqual(second.claimed.map((r) => r.id), [a[2], b[1]])
          assert.strictEqual(second.heldUntilUs.get(Keyed.name), window + hour)
          const third = yield* claimer.claimWithHolds(groupsOf(Keyed.name), 10, window + 59 * minute, "w3", keyed, perHour)
          assert.deepStrictEqual(third.claimed, [])
          // 13:00: a window of the new length, 3 of each key at most.
          const next = yield* claimer.claimWithHolds(groupsOf(Keyed.name), 10, window + hour, "w4", keyed, perHour)
          assert.deepStrictEqual(next.claimed.map((r) => r.id), [a[3], a[4], a[5], b[2], b[3]])
        })))

    it.live(name("bad run-time rates fail with InvalidLimit naming the option and what was given, and change nothing"), () =>
      withQueue(target, () =>
        Effect.gen(function*() {
          const admin = yield* Admin.Admin
          yield* admin.setLimits(Unrated.name, { running: 4, rate: { starts: 10, per: "1 minute" } })
          const before = Effect.map(admin.limits, (ls) => ls.map((l) => [l.name, l.running, l.rate, l.ratePerKey]))
          assert.deepStrictEqual(yield* before, [[Unrated.name, 4, { starts: 10, perMs: 60_000 }, undefined]])
          for (const [limits, option, reason, message] of [
            [{ rate: { starts: 0, per: "1 second" } }, "rate", "range", "rate (or null to remove it): starts must be an integer from 1 to 1000000, got 0"],
            [{ rate: { starts: 1_000_001, per: "1 second" } }, "rate", "range", "got 1000001"],
            [{ rate: { starts: 1.5, per: "1 second" } }, "rate", "range", "got 1.5"],
            [{ rate: { starts: "5", per: "1 second" } }, "rate", "type", `starts must be a number, got "5"`],
            [{ rate: { starts: 5, per: 0.5 } }, "rate", "range", "per must be at least 1 millisecond, in whole milliseconds, got 0.5"],
            [{ rate: { starts: 5, per: "367 days" } }, "rate", "range", `per must be at most 366 days (31622400000 ms), got "367 days"`],
            [{ rate: { starts: 5, per: "soon" } }, "rate", "type", `got "soon"`],
            [{ rate: { starts: 5, per: 60n } }, "rate", "type", "got the bigint 60n, which Effect would read as nanoseconds"],
            [{ rate: { starts: 5, per: 1000, burst: 2 } }, "rate", "type", `has an unknown option "burst"`],
            [{ rate: 5 }, "rate", "type", "must be { starts, per }, got 5"],
            // With a good limit beside it: nothing of the call is written.
            [{ running: 2, ratePerKey: { starts: 0, per: 1000 } }, "ratePerKey", "range", "ratePerKey (or null to remove it): starts must be"],
            [{ rates: { starts: 5, per: 1000 } }, "limits", "type", `unknown option "rates" (did you mean "rate"?)`]
          ] as const) {
            const error = yield* Effect.flip(admin.setLimits(Unrated.name, limits as any))
            assert.instanceOf(error, Errors.InvalidLimit)
            const e = error as Errors.InvalidLimit
            assert.deepStrictEqual([e.name, e.option, e.reason], [Unrated.name, option, reason], JSON.stringify(limits, (_, v) => typeof v === "bigint" ? `${v}n` : v))
            assert.include(e.message, message)
          }
          assert.deepStrictEqual(yield* before, [[Unrated.name, 4, { starts: 10, perMs: 60_000 }, undefined]])
          // A name `Job.make` refuses (MySQL/MariaDB would compare "unrated " equal to "unrated").
          const spaced = (yield* Effect.flip(admin.setLimits(`${Unrated.name} `, { running: 1 }))) as Errors.InvalidLimit
          assert.instanceOf(spaced, Errors.InvalidLimit)
          assert.deepStrictEqual([spaced.option, spaced.reason], ["name", "characters"])
          assert.include(spaced.message, "without U+0000 or a trailing space")
          assert.deepStrictEqual(yield* before, [[Unrated.name, 4, { starts: 10, perMs: 60_000 }, undefined]])
          // Every form a definition takes is taken.
          for (const per of [60_000, "1 minute", Duration.minutes(1), [60, 0]] as ReadonlyArray<Job.Rate["per"]>) {
            const now = yield* admin.setLimits(Unrated.name, { ratePerKey: { starts: 2, per } })
            assert.deepStrictEqual(now.ratePerKey, { starts: 2, perMs: 60_000 })
          }
          // null removes one rate; the row goes with its last limit.
          assert.deepStrictEqual(yield* admin.setLimits(Unrated.name, { running: null, rate: null }), {
            running: undefined,
            runningPerKey: undefined,
            rate: undefined,
            ratePerKey: { starts: 2, perMs: 60_000 }
          })
          yield* admin.setLimits(Unrated.name, { ratePerKey: null })
          assert.deepStrictEqual(yield* admin.limits, [])
        })))

    it(name("sqlane limit reads --rate as STARTS/PERIOD"), () => {
      const ms = (text: string) => {
        const r = parseRate(text)
        return r === undefined ? undefined : [r.starts, Duration.toMillis(r.per)]
      }
      assert.deepStrictEqual(ms("100/1s"), [100, 1_000])
      assert.deepStrictEqual(ms("100/500ms"), [100, 500])
      assert.deepStrictEqual(ms("100/1m"), [100, 60_000])
      assert.deepStrictEqual(ms("100/1h"), [100, 3_600_000])
      assert.deepStrictEqual(ms("100/1d"), [100, 86_400_000])
      assert.deepStrictEqual(ms("100/m"), [100, 60_000])
      assert.deepStrictEqual(ms("100/1.5s"), [100, 1_500])
      assert.deepStrictEqual(ms("100/1 minute"), [100, 60_000])
      assert.deepStrictEqual(ms("100/30 seconds"), [100, 30_000])
      // Forms of a rate whose range `Admin.setLimits` refuses.
      assert.deepStrictEqual(ms("0/1s"), [0, 1_000])
      assert.deepStrictEqual(ms("10/0s"), [10, 0])
      // Not of the form.
      for (const bad of ["100", "x/1s", "10/1y", "10/", "/1s", "-1/1s", "10/1s/2", "1e3/1s", ""]) {
        assert.isUndefined(parseRate(bad), bad)
      }
    })

    it.effect(name("RateLimited with a delay past 366 days waits 366 days (its end is written); liftHolds lifts the name's hold at once"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          // A Retry-After read in the wrong unit: about 3 million years.
          const started = yield* firstHoldsName(1e17)
          const admin = yield* Admin.Admin
          const queue = yield* Queue.Queue
          const sql = (yield* SqlClient.SqlClient).withoutTransforms()
          yield* admin.setLimits(Unrated.name, { rate: { starts: 100, per: "1 hour" } })
          yield* realSleep(1_000)
          const [held] = yield* queue.enqueueMany(Unrated, Array.from({ length: 3 }, (_, i) => ({ i })))
          yield* waitUntil(Effect.sync(() => started.length === 1), 20_000, "the first start")
          const row = Effect.map(
            sql<{ state: string; attempts: number }>`SELECT state, attempts FROM ${sql(prefix + "jobs")} WHERE id = ${held}`,
            (rows) => [rows[0].state, Number(rows[0].attempts)]
          )
          yield* waitUntil(Effect.map(row, ([state]) => state === "pending"), 20_000, "the end of the held attempt written")
          assert.deepStrictEqual(yield* row, ["pending", 0])
          const job = yield* queue.get(held)
          assert.strictEqual(job.runAt.getTime() - started[0], 366 * 24 * 3_600_000)
          // The name is held: nothing else starts.
          yield* realSleep(1_000)
          assert.strictEqual(started.length, 1)
          assert.strictEqual(yield* admin.liftHolds(Unrated.name), 1)
          yield* waitUntil(Effect.sync(() => started.length === 3), 20_000, "the name's other jobs started once the hold was lifted")
          assert.strictEqual(yield* admin.liftHolds(Unrated.name), 0)
          // The job that asked for the hold keeps its own run_at.
          assert.deepStrictEqual(yield* row, ["pending", 0])
        }), queueOptions), 60_000)

    it.live(name("sqlane limit --rate and --rate-per-key: set, listed, shown by status, each cleared on its own; bad forms refused, changing nothing"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const admin = yield* Admin.Admin
          const cli = (...args: Array<string>) => runCli([...args, "--prefix", prefix], { DATABASE_URL: target.url })
          yield* (yield* Queue.Queue).enqueue(Unrated, { i: 1 })
          const set = yield* cli("limit", Unrated.name, "--rate", "100/1m", "--rate-per-key", "10/1s")
          assert.strictEqual(set.code, 0, set.stderr)
          assert.strictEqual(set.stderr, "")
          assert.match(
            set.stdout,
            /^limited unrated: the definition's running limit, the definition's per-key limit, 100\/1m \(starts per period\), 10\/1s per key /m
          )
          const json = yield* cli("limit", Unrated.name, "5", "--json")
          assert.deepStrictEqual(JSON.parse(json.stdout), {
            name: Unrated.name,
            running: 5,
            runningPerKey: null,
            rate: { starts: 100, perMs: 60_000 },
            ratePerKey: { starts: 10, perMs: 1_000 }
          })
          const [table, status] = yield* Effect.all([cli("limit"), cli("status")], { concurrency: 2 })
          assert.match(table.stdout, /^unrated\s+5\s+\(definition\)\s+100\/1m\s+10\/1s\s+0/m)
          assert.match(status.stdout, /0\/100 per 60000 ms 10 per 1000 ms per key \(next window in \S+\) \(run time\)/)
          const row = Effect.map(admin.limits, (ls) => ls.map((l) => [l.running, l.rate, l.ratePerKey]))
          const was = [5, { starts: 100, perMs: 60_000 }, { starts: 10, perMs: 1_000 }]
          for (const [flag, typed] of [["--rate", "100"], ["--rate", "0/1s"], ["--rate", "10/0s"], ["--rate", "x/1s"], ["--rate-per-key", "10/1y"]]) {
            const bad = yield* cli("limit", Unrated.name, "3", flag, typed)
            assert.strictEqual(bad.code, 1, `${flag} ${typed}`)
            assert.include(
              bad.stderr,
              `${flag} must be STARTS/PERIOD, e.g. 100/1m (units ms, s, m, h, d, w, or a word: 100/1 minute), with STARTS from 1 to 1000000 and PERIOD ` +
                `from 1ms to 366d in whole milliseconds; got ${JSON.stringify(typed)}`
            )
            assert.deepStrictEqual(yield* row, [was])
          }
          for (const [args, message] of [
            [["0x10"], "running must be an integer from 1 to 10000, got 0x10"],
            [["1e3"], "running must be an integer from 1 to 10000, got 1e3"],
            [["99999999999999999999"], "running must be an integer from 1 to 10000, got 99999999999999999999"],
            [["--per-key", "2.5"], "--per-key must be an integer from 1 to 10000, got 2.5"],
            [["--lift-holds", "--clear"], "give either --lift-holds or a change of the limits, not both"]
          ] as const) {
            const bad = yield* cli("limit", Unrated.name, ...args)
            assert.strictEqual(bad.code, 1, args.join(" "))
            assert.include(bad.stderr, message)
            assert.deepStrictEqual(yield* row, [was])
          }
          const noHolds = yield* cli("limit", Unrated.name, "--lift-holds")
          assert.strictEqual(noHolds.code, 0, noHolds.stderr)
          assert.strictEqual(noHolds.stdout.trim(), "unrated had no holds")
          const conflict = yield* cli("limit", Unrated.name, "--rate", "1/1s", "--clear-rate")
          assert.strictEqual(conflict.code, 1)
          assert.match(conflict.stderr, /give either --rate or --clear-rate, not both/)
          const clearRate = yield* cli("limit", Unrated.name, "--clear-rate", "--json")
          assert.strictEqual(clearRate.code, 0, clearRate.stderr)
          assert.deepStrictEqual(JSON.parse(clearRate.stdout).rate, null)
          assert.deepStrictEqual(yield* row, [[5, undefined, { starts: 10, perMs: 1_000 }]])
          const clearPerKey = yield* cli("limit", Unrated.name, "--clear-rate-per-key", "--clear-running")
          assert.strictEqual(clearPerKey.code, 0, clearPerKey.stderr)
          assert.match(clearPerKey.stdout, /unrated has no run-time limits now: the definition's apply/)
          assert.deepStrictEqual(yield* admin.limits, [])
          // --clear removes rates too.
          yield* admin.setLimits(Unrated.name, { rate: { starts: 1, per: 1000 } })
          const cleared = yield* cli("limit", Unrated.name, "--clear")
          assert.strictEqual(cleared.code, 0, cleared.stderr)
          assert.deepStrictEqual(yield* admin.limits, [])
        })), 120_000)

    it.effect(name("pruning keeps a name's window rows for its run-time period, the longer one, and deletes them after it"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const { driver } = yield* Database
          const admin = yield* Admin.Admin
          const sql = (yield* SqlClient.SqlClient).withoutTransforms()
          const rows = Effect.map(
            sql<{ n: number }>`SELECT COUNT(*) AS n FROM ${sql(prefix + "rates")} WHERE name = ${Defined.name}`,
            (r) => Number(r[0].n)
          )
          // The definition's period (10 s) is published; a run-time rate of 1 a day is set.
          const prune = Effect.gen(function*() {
            yield* driver.workerRegister("w1", yield* nowMicros, "host", 1, [Defined.name], limitsOf([Defined]))
            return (yield* admin.prune).rateRows
          })
          yield* admin.setLimits(Defined.name, { rate: { starts: 1, per: "1 day" } })
          yield* (yield* Queue.Queue).enqueue(Defined, { i: 0 })
          const limits = new Map([[Defined.name, { running: undefined, runningPerKey: undefined, rate: { starts: 1, perMs: 86_400_000 } }]])
          const claimed = yield* (yield* Claimer.Claimer).claimWithHolds(groupsOf(Defined.name), 1, yield* nowMicros, "w1", new Set([Defined.name]), limits)
          assert.strictEqual(claimed.claimed.length, 1)
          assert.strictEqual(yield* rows, 1)
          // Past the definition's 10 s and an hour: kept (a day's window).
          yield* TestClock.adjust("2 hours")
          assert.strictEqual(yield* prune, 0)
          assert.strictEqual(yield* rows, 1)
          // Past a day and an hour after the window began: deleted.
          yield* TestClock.adjust("23 hours")
          assert.strictEqual(yield* prune, 0)
          yield* TestClock.adjust("1 millis")
          assert.strictEqual(yield* prune, 1)
          assert.strictEqual(yield* rows, 0)
        }), { prune: false }))
  })
}
