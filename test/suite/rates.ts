/**
 * Rate limits, on every database: starts per window per job name and per concurrency key, as
 * claims see them (the windows' rows, concurrent claims on their own connections), as a worker
 * under TestClock sees them (it waits for the next window and starts at its beginning), and a
 * handler's `RateLimited` (back to pending, uncounted, holding back its name or key).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Metric from "effect/Metric"
import * as Schema from "effect/Schema"
import * as TestClock from "effect/TestClock"
import { Admin, Claimer, Errors, Job, Metrics, Pruner, Queue, Worker } from "../../src/index.js"
import { Database } from "../../src/internal/Database.js"
import { limitsOf } from "../../src/internal/limits.js"
import { nowMicros } from "../../src/internal/time.js"
import { countJobs, realSleep, waitUntil, withQueue } from "../support/helpers.js"
import { Rated, ratedRates } from "../support/jobs.js"
import { awaitExit, runCli, spawnWorker } from "../support/processes.js"
import { runsLedger } from "./limits.js"
import type { Target } from "../support/targets.js"

/** 3 starts per 10 s window. */
const Paced = Job.make("paced", {
  payload: Schema.Struct({ i: Schema.Number }),
  limits: { rate: { starts: 3, per: "10 seconds" } }
})
/** 2 starts per tenant per 10 s window. */
const PacedPerTenant = Job.make("paced-per-tenant", {
  payload: Schema.Struct({ tenant: Schema.String, i: Schema.Number }),
  limits: { key: (p) => p.tenant, ratePerKey: { starts: 2, per: "10 seconds" } }
})

/** 3 starts per 10 s window, for the gauge's test alone (the metric registry is the process's). */
const PacedGauged = Job.make("paced-gauged", {
  payload: Schema.Struct({ i: Schema.Number }),
  limits: { rate: { starts: 3, per: "10 seconds" } }
})
/** 3 starts per day (UTC days). */
/** A name with a rate of 3 a day, and a concurrency limit (its status line is longer than a table's usual cell). */
const Daily = Job.make("daily", {
  payload: Schema.Struct({ i: Schema.Number }),
  limits: { running: 5, key: (p) => `k${p.i % 2}`, runningPerKey: 2, rate: { starts: 3, per: "1 day" } }
})
/** Without limits. */
const Free = Job.make("free", { payload: Schema.Struct({}) })

/** Under a generous rate, so that its claims read the holds a `RateLimited` writes. */
const Upstream = Job.make("upstream", {
  payload: Schema.Struct({ tenant: Schema.String, i: Schema.Number }),
  limits: { key: (p) => p.tenant, rate: { starts: 1000, per: "1 hour" } }
})

const groupsOf = (...names: ReadonlyArray<string>) => names.map((name) => ({ name, priority: 0 }))
const hour = 3_600_000_000

export const rates = (target: Target) => {
  const name = (s: string) => `[${target.id}] ${s}`

  describe(`rates [${target.id}]`, () => {
    it(name("Job.make refuses a bad rate with InvalidJobDefinition"), () => {
      const bad = (rate: unknown, extra: object = {}) => {
        try {
          Job.make("bad-rate", { payload: Schema.Struct({}), limits: { rate: rate as Job.Rate, ...extra } })
          return undefined
        } catch (e) {
          return (e as { _tag?: string; option?: string })._tag + " " + (e as { option?: string }).option
        }
      }
      assert.strictEqual(bad({ starts: 0, per: "1 second" }), "InvalidJobDefinition limits.rate")
      assert.strictEqual(bad({ starts: 1.5, per: "1 second" }), "InvalidJobDefinition limits.rate")
      assert.strictEqual(bad({ starts: 1_000_001, per: "1 second" }), "InvalidJobDefinition limits.rate")
      assert.strictEqual(bad({ starts: 1, per: 0.5 }), "InvalidJobDefinition limits.rate")
      // Longer than 366 days (its window's end would be no date JavaScript can hold).
      assert.strictEqual(bad({ starts: 1, per: 1e16 }), "InvalidJobDefinition limits.rate")
      assert.strictEqual(bad({ starts: 1, per: "367 days" }), "InvalidJobDefinition limits.rate")
      assert.strictEqual(bad({ starts: 1, per: Infinity }), "InvalidJobDefinition limits.rate")
      assert.strictEqual(bad({ starts: 1, per: "soon" }), "InvalidJobDefinition limits.rate")
      assert.strictEqual(bad({ starts: 1_000_000, per: 1 }), undefined)
      // A bigint is refused: Effect reads it as nanoseconds (60n would be a window of 60 ns, and
      // 60_000_000_000n a minute). A number is milliseconds; a string or a Duration says its unit.
      for (const per of [60n, 60_000_000_000n]) {
        assert.strictEqual(bad({ starts: 1, per }), "InvalidJobDefinition limits.rate")
        assert.strictEqual(bad({ starts: 1, per: 1000 }, { key: () => "k", ratePerKey: { starts: 1, per } }), "InvalidJobDefinition limits.ratePerKey")
      }
      try {
        Job.make("bad-rate", { payload: Schema.Struct({}), limits: { rate: { starts: 5, per: 60n as any } } })
        assert.fail("a bigint per was accepted")
      } catch (e) {
        assert.deepStrictEqual([(e as Errors.InvalidJobDefinition).reason, (e as Errors.InvalidJobDefinition).message], [
          "type",
          `limits.rate: per must be a duration such as "1 minute", a number of milliseconds (60000) or a Duration; got the bigint 60n, which Effect would read as nanoseconds`
        ])
      }
      const forms: ReadonlyArray<Job.Rate["per"]> = [60_000, "1 minute", Duration.minutes(1), [60, 0]]
      for (const per of forms) {
        const job = Job.make("rate-forms", { payload: Schema.Struct({}), limits: { rate: { starts: 5, per } } })
        assert.strictEqual(limitsOf([job]).get("rate-forms")?.rate?.perMs, 60_000, String(per))
      }
      try {
        Job.make("bad-rate", { payload: Schema.Struct({}), limits: { ratePerKey: { starts: 1, per: 1000 } } })
        assert.fail("ratePerKey without key was accepted")
      } catch (e) {
        assert.strictEqual((e as { option?: string }).option, "limits.key")
      }
    })

    it.live(name("rate 3 per window: a claim takes 3, the next none until the next window, which admits 3 again"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const queue = yield* Queue.Queue
          const claimer = yield* Claimer.Claimer
          const sql = (yield* SqlClient.SqlClient).withoutTransforms()
          const ids = yield* queue.enqueueMany(Paced, Array.from({ length: 10 }, (_, i) => ({ i })))
          const limits = limitsOf([Paced])
          const keyed = new Set([Paced.name])
          // A window of 10 s starting at a whole hour from now, its jobs due.
          const window = Math.ceil(Date.now() * 1000 / hour) * hour
          const first = yield* claimer.claimWithHolds(groupsOf(Paced.name), 2, window + 5, "w1", keyed, limits)
          assert.deepStrictEqual(first.claimed.map((r) => r.id), ids.slice(0, 2))
          const second = yield* claimer.claimWithHolds(groupsOf(Paced.name), 10, window + 9_000_000, "w2", keyed, limits)
          assert.deepStrictEqual(second.claimed.map((r) => r.id), ids.slice(2, 3))
          assert.strictEqual(second.heldUntilUs.get(Paced.name), window + 10_000_000)
          const third = yield* claimer.claimWithHolds(groupsOf(Paced.name), 10, window + 9_999_999, "w3", keyed, limits)
          assert.deepStrictEqual(third.claimed, [])
          assert.strictEqual(third.heldUntilUs.get(Paced.name), window + 10_000_000)
          // No attempt counted for the jobs held back.
          const pending = yield* sql<{ n: number }>`SELECT COUNT(*) AS n FROM ${sql(prefix + "jobs")}
            WHERE state = 'pending' AND attempts = 0`
          assert.strictEqual(Number(pending[0].n), 7)
          const next = yield* claimer.claimWithHolds(groupsOf(Paced.name), 10, window + 10_000_000, "w4", keyed, limits)
          assert.deepStrictEqual(next.claimed.map((r) => r.id), ids.slice(3, 6))
          const rows = yield* sql<{ name: string; rate_key: string; window_us: string; starts: number }>`
            SELECT name, rate_key, window_us, starts FROM ${sql(prefix + "rates")}`
          assert.deepStrictEqual(rows.map((r) => [r.name, r.rate_key, Number(r.window_us), Number(r.starts)]), [
            [Paced.name, "", window + 10_000_000, 3]
          ])
        })))

    it.live(name("ratePerKey 2: a key at its rate does not hold back the name's other keys"), () =>
      withQueue(target, () =>
        Effect.gen(function*() {
          const queue = yield* Queue.Queue
          const claimer = yield* Claimer.Claimer
          // 6 jobs of tenant a first, then 3 of b.
          const a = yield* queue.enqueueMany(PacedPerTenant, Array.from({ length: 6 }, (_, i) => ({ tenant: "a", i })))
          const b = yield* queue.enqueueMany(PacedPerTenant, Array.from({ length: 3 }, (_, i) => ({ tenant: "b", i })))
          // In run_at order (without fair shares, which would take one of each key first).
          const limits = new Map(Array.from(limitsOf([PacedPerTenant]), ([n, l]) => [n, { ...l, fair: false }]))
          const keyed = new Set([PacedPerTenant.name])
          const window = Math.ceil(Date.now() * 1000 / hour) * hour
          const first = yield* claimer.claimWithHolds(groupsOf(PacedPerTenant.name), 2, window, "w1", keyed, limits)
          assert.deepStrictEqual(first.claimed.map((r) => r.id), a.slice(0, 2))
          assert.strictEqual(first.keyWakeUs, window + 10_000_000)
          // a is used up; b's jobs come after a's 4 others, and are claimed.
          const second = yield* claimer.claimWithHolds(groupsOf(PacedPerTenant.name), 10, window + 1, "w2", keyed, limits)
          assert.deepStrictEqual(second.claimed.map((r) => r.id), b.slice(0, 2))
          assert.strictEqual(second.heldUntilUs.size, 0)
          const third = yield* claimer.claimWithHolds(groupsOf(PacedPerTenant.name), 10, window + 2, "w3", keyed, limits)
          assert.deepStrictEqual(third.claimed, [])
          assert.strictEqual(third.keyWakeUs, window + 10_000_000)
          const next = yield* claimer.claimWithHolds(groupsOf(PacedPerTenant.name), 10, window + 10_000_000, "w4", keyed, limits)
          assert.deepStrictEqual(next.claimed.map((r) => r.id), [a[2], a[3], b[2]])
        })))

    it.live(name("10 concurrent claims on their own connections never start more than the rate in one window"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const queue = yield* Queue.Queue
          const claimer = yield* Claimer.Claimer
          const sql = (yield* SqlClient.SqlClient).withoutTransforms()
          yield* queue.enqueueMany(Paced, Array.from({ length: 40 }, (_, i) => ({ i })))
          const limits = limitsOf([Paced])
          const keyed = new Set([Paced.name])
          const window = Math.ceil(Date.now() * 1000 / hour) * hour
          const round = (at: number) =>
            Effect.all(
              Array.from({ length: 10 }, (_, i) => claimer.claimWithHolds(groupsOf(Paced.name), 2, at + i, `w${i}`, keyed, limits)),
              { concurrency: "unbounded" }
            )
          const claims = yield* round(window)
          assert.strictEqual(claims.reduce((n, c) => n + c.claimed.length, 0), 3)
          const again = yield* round(window + 20_000_000)
          assert.strictEqual(again.reduce((n, c) => n + c.claimed.length, 0), 3)
          const running = yield* sql<{ n: number }>`SELECT COUNT(*) AS n FROM ${sql(prefix + "jobs")} WHERE state = 'running'`
          assert.strictEqual(Number(running[0].n), 6)
          const rows = yield* sql<{ starts: number }>`SELECT starts FROM ${sql(prefix + "rates")}`
          assert.deepStrictEqual(rows.map((r) => Number(r.starts)), [3])
        }), { maxConnections: 12 }))

    it.effect(name("a worker starts 3 per window, waits for the next window and starts at its beginning without a poll"), () =>
      withQueue(target, () =>
        Effect.gen(function*() {
          const started: Array<[number, number]> = []
          yield* Worker.make({
            handlers: [Job.handler(Paced, (p) => Effect.map(Clock.currentTimeMillis, (ms) => void started.push([p.i, ms])))],
            concurrency: 10
          })
          const queue = yield* Queue.Queue
          yield* queue.enqueueMany(Paced, Array.from({ length: 7 }, (_, i) => ({ i })))
          yield* waitUntil(Effect.sync(() => started.length === 3), 20_000, "3 starts")
          yield* realSleep(500)
          assert.deepStrictEqual(started, [[0, 0], [1, 0], [2, 0]])
          yield* TestClock.adjust("9999 millis")
          yield* realSleep(300)
          assert.strictEqual(started.length, 3)
          // The next window begins: the worker's sleep ends at its first instant (the poll is 1 hour).
          yield* TestClock.adjust("1 millis")
          yield* waitUntil(Effect.sync(() => started.length === 6), 20_000, "6 starts")
          yield* realSleep(300)
          assert.deepStrictEqual(started.slice(3), [[3, 10_000], [4, 10_000], [5, 10_000]])
          yield* TestClock.adjust("10 seconds")
          yield* waitUntil(Effect.sync(() => started.length === 7), 20_000, "7 starts")
          assert.deepStrictEqual(started[6], [6, 20_000])
        }), { pollInterval: "1 hour" }))

    it.effect(name("RateLimited with scope name: the attempt is not counted, and no job of the name starts before its delay"), () =>
      withQueue(target, () =>
        Effect.gen(function*() {
          const started: Array<[number, number, number]> = []
          let limited = false
          yield* Worker.make({
            handlers: [Job.handler(Upstream, (p, ctx) =>
              Effect.gen(function*() {
                started.push([p.i, ctx.attempt, yield* Clock.currentTimeMillis])
                if (p.i === 0 && !limited) {
                  limited = true
                  return yield* Effect.fail(new Errors.RateLimited({ delay: 5000, scope: "name" }))
                }
              }))],
            concurrency: 4
          })
          const queue = yield* Queue.Queue
          const first = yield* queue.enqueue(Upstream, { tenant: "a", i: 0 })
          yield* waitUntil(
            Effect.map(queue.get(first), (j) => j.state === "pending" && j.runAt.getTime() === 5000),
            20_000,
            "the rate-limited job back to pending"
          )
          const info = yield* queue.get(first)
          assert.strictEqual(info.attempts, 0)
          assert.deepStrictEqual(info.errors, [])
          // Another job of the name, of another key, due now: held back with the name.
          const second = yield* queue.enqueue(Upstream, { tenant: "b", i: 1 })
          yield* realSleep(500)
          yield* TestClock.adjust("4999 millis")
          yield* realSleep(300)
          assert.deepStrictEqual(started, [[0, 1, 0]])
          assert.strictEqual((yield* queue.get(second)).state, "pending")
          yield* TestClock.adjust("1 millis")
          yield* waitUntil(Effect.sync(() => started.length === 3), 20_000, "both jobs started")
          assert.deepStrictEqual(started.slice(1).sort(), [[0, 1, 5000], [1, 1, 5000]])
        }), { pollInterval: "1 hour" }))

    it.effect(name("RateLimited with scope key holds back that key only; scope job only the job"), () =>
      withQueue(target, () =>
        Effect.gen(function*() {
          const started: Array<[number, number]> = []
          const limitedOnce = new Set<number>()
          yield* Worker.make({
            handlers: [Job.handler(Upstream, (p) =>
              Effect.gen(function*() {
                started.push([p.i, yield* Clock.currentTimeMillis])
                if ((p.i === 0 || p.i === 2) && !limitedOnce.has(p.i)) {
                  limitedOnce.add(p.i)
                  return yield* Effect.fail(new Errors.RateLimited({ delay: 3000, scope: p.i === 0 ? "key" : "job" }))
                }
              }))],
            concurrency: 4
          })
          const queue = yield* Queue.Queue
          yield* queue.enqueueMany(Upstream, [{ tenant: "a", i: 0 }, { tenant: "c", i: 2 }])
          yield* waitUntil(Effect.sync(() => started.length === 2), 20_000, "two first attempts")
          yield* realSleep(300)
          // Key a is held until 3 s; key b and c are not.
          yield* queue.enqueueMany(Upstream, [{ tenant: "a", i: 10 }, { tenant: "b", i: 11 }, { tenant: "c", i: 12 }])
          yield* waitUntil(Effect.sync(() => started.length === 4), 20_000, "b and c started")
          yield* realSleep(500)
          assert.deepStrictEqual(started.slice(2).sort(), [[11, 0], [12, 0]])
          yield* TestClock.adjust("3 seconds")
          yield* waitUntil(Effect.sync(() => started.length === 7), 20_000, "the held ones started")
          assert.deepStrictEqual(started.slice(4).sort(), [[0, 3000], [10, 3000], [2, 3000]])
        }), { pollInterval: "1 hour" }))

    it.effect(name("pruning: a pass deletes the window rows of a rated name an hour past their period, and those whose hold ended as long ago"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const { driver } = yield* Database
          const admin = yield* Admin.Admin
          const queue = yield* Queue.Queue
          const claimer = yield* Claimer.Claimer
          const sql = (yield* SqlClient.SqlClient).withoutTransforms()
          const keysOf = (name: string) =>
            Effect.map(
              sql<{ rate_key: string; window_us: string }>`SELECT rate_key, window_us FROM ${sql(prefix + "rates")}
                WHERE name = ${name} ORDER BY rate_key`,
              (rows) => rows.map((r) => [r.rate_key, Number(r.window_us)])
            )
          const limits = limitsOf([PacedPerTenant])
          const claim = Effect.gen(function*() {
            const nowUs = yield* nowMicros
            return (yield* claimer.claimWithHolds(groupsOf(PacedPerTenant.name), 10, nowUs, "w1", new Set([PacedPerTenant.name]), limits)).claimed
          })
          /** A pass, with a worker row (heartbeat now) publishing the name's rates (2 per key per 10 s). */
          const prune = Effect.gen(function*() {
            yield* driver.workerRegister("w1", yield* nowMicros, "host", 1, [PacedPerTenant.name], limits)
            return (yield* admin.prune).rateRows
          })
          yield* queue.enqueueMany(PacedPerTenant, ["a", "b", "c"].map((tenant, i) => ({ tenant, i })))
          assert.strictEqual((yield* claim).length, 3)
          // Key d held until 30 min; a name no worker publishes, its hold long over.
          yield* driver.rateHold(PacedPerTenant.name, "d", hour / 2)
          yield* driver.rateHold("unpublished", null, 1)
          // The windows began at 0: kept until 10 s + 1 h have passed, then deleted.
          yield* TestClock.adjust(10_000 + Pruner.rateRowGraceMillis)
          assert.strictEqual(yield* prune, 0)
          yield* TestClock.adjust("1 millis")
          // The name's own row and keys a, b, c; d is held, and the unpublished name kept.
          assert.strictEqual(yield* prune, 4)
          assert.deepStrictEqual(yield* keysOf(PacedPerTenant.name), [["d", 0]])
          assert.deepStrictEqual(yield* keysOf("unpublished"), [["", 0]])
          // Its hold ended at 30 min; an hour and 10 s later it goes.
          yield* TestClock.adjust("30 minutes")
          assert.strictEqual(yield* prune, 1)
          assert.deepStrictEqual(yield* keysOf(PacedPerTenant.name), [])
          // A job of a pruned key starts, and counts in the window of now (10 s windows: 5,410 s).
          yield* queue.enqueue(PacedPerTenant, { tenant: "a", i: 9 })
          assert.strictEqual((yield* claim).length, 1)
          assert.deepStrictEqual(yield* keysOf(PacedPerTenant.name), [["", 0], ["a", 5_410_000_000]])
        }), { prune: false }))

    it.effect(name("status: a rated name's window, its starts and when the next begins (or its hold ends, if later)"), () =>
      withQueue(target, () =>
        Effect.gen(function*() {
          const { driver } = yield* Database
          const admin = yield* Admin.Admin
          const queue = yield* Queue.Queue
          const claimer = yield* Claimer.Claimer
          const limits = limitsOf([Paced, PacedPerTenant])
          // The definitions `status` reads are those the worker rows publish.
          yield* driver.workerRegister("w1", 0, "host", 1, [Paced.name, PacedPerTenant.name], limits)
          const windowOf = (name: string) =>
            Effect.map(admin.status, (s) => s.names.find((n) => n.name === name)?.limits?.rateWindow)
          yield* queue.enqueueMany(Paced, Array.from({ length: 5 }, (_, i) => ({ i })))
          yield* queue.enqueue(PacedPerTenant, { tenant: "a", i: 0 })
          yield* queue.enqueue(Free, {})
          // No claim yet: none started in the window 0–10 s.
          assert.deepStrictEqual(yield* windowOf(Paced.name), { starts: 0, nextWindowAt: new Date(10_000), heldUntil: undefined })
          yield* TestClock.adjust("12 seconds")
          const claimed = yield* claimer.claimWithHolds(groupsOf(Paced.name), 10, 12_000_000, "w1", new Set([Paced.name]), limits)
          assert.strictEqual(claimed.claimed.length, 3)
          assert.deepStrictEqual(yield* windowOf(Paced.name), { starts: 3, nextWindowAt: new Date(20_000), heldUntil: undefined })
          // A hold of the name past the window's end: the next window is when it ends.
          yield* driver.rateHold(Paced.name, null, 25_000_000)
          assert.deepStrictEqual(yield* windowOf(Paced.name), { starts: 3, nextWindowAt: new Date(25_000), heldUntil: new Date(25_000) })
          // In the next window: none counted in it yet, and it ends after the hold.
          yield* TestClock.adjust("9 seconds")
          assert.deepStrictEqual(yield* windowOf(Paced.name), { starts: 0, nextWindowAt: new Date(30_000), heldUntil: new Date(25_000) })
          // Only a rate per key: no starts of the name, the end of the keys' window.
          assert.deepStrictEqual(yield* windowOf(PacedPerTenant.name), { starts: undefined, nextWindowAt: new Date(30_000), heldUntil: undefined })
          const free = (yield* admin.status).names.find((n) => n.name === Free.name)
          assert.strictEqual(free?.pending, 1)
          assert.isUndefined(free?.limits)
        })))

    it.live(name("CLI: status shows a rated name's starts in its window and when the next begins, in the table and in JSON"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const { driver } = yield* Database
          const queue = yield* Queue.Queue
          const claimer = yield* Claimer.Claimer
          const limits = limitsOf([Daily])
          yield* driver.workerRegister("w1", yield* nowMicros, "host", 1, [Daily.name], limits)
          yield* queue.enqueueMany(Daily, Array.from({ length: 4 }, (_, i) => ({ i })))
          const nowUs = yield* nowMicros
          assert.strictEqual((yield* claimer.claimWithHolds(groupsOf(Daily.name), 2, nowUs, "w1", new Set([Daily.name]), limits)).claimed.length, 2)
          const holdUs = nowUs + 2 * 24 * hour
          yield* driver.rateHold(Daily.name, null, holdUs)
          const cli = (...args: Array<string>) => runCli([...args, "--prefix", prefix], { DATABASE_URL: target.url })
          const [json, text] = yield* Effect.all([cli("status", "--json"), cli("status")], { concurrency: 2 })
          assert.strictEqual(json.code, 0, json.stderr)
          const limitsOfDaily = JSON.parse(json.stdout).names.find((n: { name: string }) => n.name === Daily.name).limits
          const held = new Date(Math.floor(holdUs / 1000)).toISOString()
          assert.deepStrictEqual(limitsOfDaily.rateWindow, { starts: 2, nextWindowAt: held, heldUntil: held })
          assert.deepStrictEqual(limitsOfDaily.rate, { starts: 3, perMs: 86_400_000 })
          assert.strictEqual(text.code, 0, text.stderr)
          assert.match(text.stdout, new RegExp(`\\n${Daily.name}\\s+2\\s+2\\s+2\\s.*2/3 per 86400000 ms \\(held, next window in (47h\\d*m?|2d)\\)`))
        })))

    it.effect(name("gauge sqlane_jobs_held_back_by_rate: the name's due jobs while its window is used up, 0 while it has starts left"), () =>
      withQueue(target, () =>
        Effect.gen(function*() {
          const gate = yield* Deferred.make<void>()
          const started: Array<number> = []
          yield* Worker.make({
            handlers: [Job.handler(PacedGauged, (p) =>
              Effect.sync(() => void started.push(p.i)).pipe(Effect.zipRight(p.i === 0 ? Deferred.await(gate) : Effect.void)))],
            concurrency: 1
          })
          const value = (gauge: Metric.Metric.Gauge<number>) =>
            Effect.map(Metric.value(gauge.pipe(Metric.tagged(Metrics.jobNameTag, PacedGauged.name))), (s) => s.value)
          /** Moves the clock past a heartbeat and waits for the gauges it sets. */
          const heartbeat = (due: number, heldByRate: number) =>
            Effect.gen(function*() {
              yield* TestClock.adjust("1 second")
              yield* waitUntil(
                Effect.map(Effect.all([value(Metrics.jobsDue), value(Metrics.jobsHeldBackByRate)]), ([d, h]) => d === due && h === heldByRate),
                20_000,
                `${due} due, ${heldByRate} held back by the rate`
              )
            })
          const queue = yield* Queue.Queue
          yield* queue.enqueueMany(PacedGauged, Array.from({ length: 7 }, (_, i) => ({ i })))
          yield* waitUntil(Effect.sync(() => started.length === 1), 20_000, "the first start")
          // 6 due behind the one slot, the window with 2 starts left: held back by the slot, not the rate.
          yield* heartbeat(6, 0)
          yield* Deferred.succeed(gate, undefined)
          yield* waitUntil(Effect.sync(() => started.length === 3), 20_000, "3 starts")
          // The window 0–10 s used up: the 4 others wait for the next.
          yield* heartbeat(4, 4)
          yield* TestClock.adjust("8 seconds")
          yield* waitUntil(Effect.sync(() => started.length === 6), 20_000, "6 starts")
          yield* heartbeat(1, 1)
          yield* TestClock.adjust("9 seconds")
          yield* waitUntil(Effect.sync(() => started.length === 7), 20_000, "7 starts")
          yield* heartbeat(0, 0)
        }), { pollInterval: "1 hour", heartbeatInterval: "200 millis" }))

    it.live(name("3 worker processes, 5 starts a second and 2 per key: no window of the claims saw more, and every job ran once"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const ledger = yield* runsLedger(prefix)
          const queue = yield* Queue.Queue
          const sql = (yield* SqlClient.SqlClient).withoutTransforms()
          const keys = ["t0", "t1", "t2"]
          const total = 36
          yield* queue.enqueueMany(Rated, Array.from({ length: total }, (_, i) => ({ tenant: keys[i % 3], i })))
          const args = (worker: string) => ["rated", target.dialect, target.url, prefix, worker, String(total)]
          const env = { SQLANE_POLL: "1 hour" }
          const workers = [yield* spawnWorker(args("w0"), env), yield* spawnWorker(args("w1"), env), yield* spawnWorker(args("w2"), env)]
          yield* Effect.forEach(workers, awaitExit, { discard: true })
          assert.strictEqual(yield* countJobs(prefix, "completed"), total)
          const runs = yield* ledger.all
          assert.strictEqual(runs.length, total)
          assert.strictEqual(new Set(runs.map((r) => r.id)).size, total)
          // Each attempt's window is its claim's instant (`claimed_at`, the claim's Clock).
          const claimedUs = target.dialect === "pg"
            ? sql.literal("(EXTRACT(EPOCH FROM claimed_at) * 1000000)::bigint")
            : sql.literal("TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', claimed_at)")
          const rows = yield* sql<{ limit_key: string; claimed_us: string; attempts: number }>`
            SELECT limit_key, ${claimedUs} AS claimed_us, attempts FROM ${sql(prefix + "jobs")}`
          assert.isTrue(rows.every((r) => Number(r.attempts) === 1))
          const perWindow = new Map<string, number>()
          const bump = (k: string) => perWindow.set(k, (perWindow.get(k) ?? 0) + 1)
          for (const r of rows) {
            const window = Math.floor(Number(r.claimed_us) / 1_000_000)
            bump(`${window}`)
            bump(`${window}:${r.limit_key}`)
          }
          const most = (filter: (k: string) => boolean) => Math.max(...Array.from(perWindow).filter(([k]) => filter(k)).map(([, n]) => n))
          assert.strictEqual(most((k) => !k.includes(":")), ratedRates.rate.starts, JSON.stringify(Array.from(perWindow)))
          assert.strictEqual(most((k) => k.includes(":")), ratedRates.ratePerKey.starts, JSON.stringify(Array.from(perWindow)))
          // 36 jobs at 5 a second take at least 8 windows.
          assert.isAtLeast(Array.from(perWindow.keys()).filter((k) => !k.includes(":")).length, 8)
        })), 120_000)
  })
}
