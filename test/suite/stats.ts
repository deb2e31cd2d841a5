/**
 * The per-minute stats (`<prefix>stats`) and the dashboard's `GET /api/stats`, on every database:
 * the ends and starts of a worker's attempts counted per job name and minute and flushed every
 * `statsInterval`; two processes (two `QueueLive`s) adding to the same minute, one of them at close;
 * pickup percentiles read from the buckets; a flush that fails keeping its counts for the next; the
 * counts kept in memory bounded; nothing counted with `statsInterval` infinite; the Pruner deleting
 * rows older than a day.
 */
import * as HttpLayerRouter from "@effect/platform/HttpLayerRouter"
import * as HttpServer from "@effect/platform/HttpServer"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as SqlClient from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as TestClock from "effect/TestClock"
import { createServer } from "node:http"
import { Dashboard } from "../../src/dashboard.js"
import { Job, Queue, QueueLive, Worker } from "../../src/index.js"
import * as StatsRead from "../../src/internal/dashboard/stats.js"
import { Database } from "../../src/internal/Database.js"
import type { StatsMinuteRow } from "../../src/internal/driver/Driver.js"
import { pickupBoundsMs } from "../../src/internal/driver/shared.js"
import * as Stats from "../../src/internal/stats.js"
import * as Pruner from "../../src/services/Pruner.js"
import { waitUntil, withQueue } from "../support/helpers.js"
import { clientLayer, type Target } from "../support/targets.js"

const minuteMs = 60_000

/** The dashboard at /sqlane of a server on an ephemeral port of 127.0.0.1: GET `path` below it, as JSON. */
const dashboardGet = Effect.gen(function*() {
  const context = yield* Layer.build(
    HttpLayerRouter.serve(Dashboard.layer({ basePath: "/sqlane" }), { disableLogger: true, disableListenLog: true })
      .pipe(Layer.provideMerge(NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" })))
  )
  const address = Context.get(context, HttpServer.HttpServer).address
  assert(address._tag === "TcpAddress")
  return (path: string) =>
    Effect.promise(async () => {
      const response = await fetch(`http://127.0.0.1:${address.port}/sqlane${path}`)
      return { status: response.status, body: (await response.json()) as any }
    })
})

/** Sums of a name's points in a `/api/stats` answer: [completed, failed]. */
const totals = (entry: any) =>
  entry.points.reduce((t: [number, number], p: any) => [t[0] + p.completed, t[1] + p.failed], [0, 0])

/** The table's rows, oldest first (`statsRead` reads newest first). */
const oldestFirst = (driver: Pick<Database["Type"]["driver"], "statsRead">, limit: number) =>
  Effect.map(driver.statsRead(0, limit), (rows) => [...rows].reverse())

/** The table's rows as [name, minute (ms), completed, failed], oldest first. */
const rowsOf = (driver: Pick<Database["Type"]["driver"], "statsRead">) =>
  Effect.map(oldestFirst(driver, 10_000), (rows) => rows.map((r) => [r.name, r.minuteUs / 1000, r.completed, r.failed] as const))

export const stats = (target: Target) => {
  const name = (title: string) => `[${target.id}] stats: ${title}`

  describe(`stats [${target.id}]`, () => {
    it.live(name("a worker's completed and failed attempts reach GET /api/stats through the periodic flush"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const Mail = Job.make(`${prefix}mail`, { payload: Schema.Struct({ i: Schema.Number }) })
          const Flaky = Job.make(`${prefix}flaky`, {
            payload: Schema.Struct({ i: Schema.Number }),
            retry: Job.attempts(2, Schedule.spaced("10 millis"))
          })
          yield* Worker.make({
            handlers: [Job.handler(Mail, () => Effect.void), Job.handler(Flaky, () => Effect.die("no"))]
          })
          const queue = yield* Queue.Queue
          yield* queue.enqueueMany(Mail, [1, 2, 3].map((i) => ({ i })))
          yield* queue.enqueueMany(Flaky, [1, 2].map((i) => ({ i })))
          const get = yield* dashboardGet
          const startedMs = Date.now()
          // 3 completed; 2 jobs of 2 attempts each, all failed (2 retried, 2 dead-lettered).
          let body: any
          yield* waitUntil(Effect.gen(function*() {
            const reply = yield* get("/api/stats")
            assert.strictEqual(reply.status, 200)
            body = reply.body
            const mail = body.names.find((n: any) => n.name === Mail.name)
            const flaky = body.names.find((n: any) => n.name === Flaky.name)
            return mail !== undefined && flaky !== undefined && totals(mail)[0] === 3 && totals(flaky)[1] === 4 &&
              mail.pickupMs.count === 3 && flaky.pickupMs.count === 4
          }), 20_000, "the stats of both names")
          const endedMs = Date.now()
          assert.deepStrictEqual(body.names.map((n: any) => n.name), [Flaky.name, Mail.name])
          const [flaky, mail] = body.names
          assert.deepStrictEqual(totals(mail), [3, 0])
          assert.deepStrictEqual(totals(flaky), [0, 4])
          // 60 minutes, oldest first, the last the current minute.
          assert.strictEqual(mail.points.length, 60)
          const minutes = mail.points.map((p: any) => Date.parse(p.minute))
          assert.deepStrictEqual(minutes, Array.from({ length: 60 }, (_, i) => minutes[0] + i * minuteMs))
          assert.strictEqual(Date.parse(body.since), minutes[0])
          const last = minutes[59]
          assert.isTrue(last <= endedMs && endedMs - last < 2 * minuteMs && last % minuteMs === 0, body.since)
          // Every count lies in a minute of the run.
          for (const entry of [mail, flaky]) {
            for (const p of entry.points) {
              const m = Date.parse(p.minute)
              if (p.completed + p.failed > 0) assert.isTrue(m + minuteMs > startedMs && m <= endedMs, p.minute)
            }
          }
          // The endpoint is in the OpenAPI document.
          const spec = yield* get("/api/openapi.json")
          assert.property(spec.body.paths, "/api/stats")
          // Picked up within seconds: every percentile is a bucket bound, at most 10 s.
          for (const p of [mail.pickupMs.p50, mail.pickupMs.p95, mail.pickupMs.p99]) {
            assert.include(pickupBoundsMs, p)
            assert.isAtMost(p, 10_000)
          }
        }), { pollInterval: "1 hour", statsInterval: "200 millis" }))

    it.effect(name("counts land in the minute of Effect's Clock: each minute of a worker's run, per name"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const Mail = Job.make(`${prefix}mail`, { payload: Schema.Struct({ i: Schema.Number }) })
          const Bad = Job.make(`${prefix}bad`, { payload: Schema.Struct({ i: Schema.Number }), retry: Job.attempts(1) })
          const t = Date.UTC(2026, 0, 15, 12, 0, 30)
          yield* TestClock.setTime(t)
          yield* Worker.make({ handlers: [Job.handler(Mail, () => Effect.void), Job.handler(Bad, () => Effect.die("no"))] })
          const queue = yield* Queue.Queue
          const { driver } = yield* Database
          const stats = yield* Stats.Stats
          const states = (ids: ReadonlyArray<string>, state: string) =>
            Effect.map(Effect.forEach(ids, queue.get), (jobs) => jobs.every((j) => j.state === state))
          const first = yield* queue.enqueueMany(Mail, [1, 2].map((i) => ({ i })))
          const bad = yield* queue.enqueue(Bad, { i: 0 })
          yield* waitUntil(Effect.zipWith(states(first, "completed"), states([bad], "dead"), (a, b) => a && b))
          yield* TestClock.adjust("1 minute")
          const second = yield* queue.enqueueMany(Mail, [3, 4, 5].map((i) => ({ i })))
          yield* waitUntil(states(second, "completed"))
          yield* stats.flush
          const at = (minutes: number) => t - 30_000 + minutes * minuteMs
          assert.deepStrictEqual(yield* rowsOf(driver), [
            [Bad.name, at(0), 0, 1],
            [Mail.name, at(0), 2, 0],
            [Mail.name, at(1), 3, 0]
          ])
          // The read of the hour as of the second minute: the last two points.
          const hour = yield* StatsRead.lastHour(driver, (at(1) + 5_000) * 1000)
          assert.strictEqual(hour.since, new Date(at(-58)).toISOString())
          const mail = hour.names.find((n) => n.name === Mail.name)!
          assert.deepStrictEqual(mail.points.slice(-3).map((p) => [p.minute, p.completed, p.failed]), [
            [new Date(at(-1)).toISOString(), 0, 0],
            [new Date(at(0)).toISOString(), 2, 0],
            [new Date(at(1)).toISOString(), 3, 0]
          ])
          // Picked up at once under a clock that stood still: 0 ms, the first bucket.
          assert.deepStrictEqual({ ...mail.pickupMs }, { p50: 1, p95: 1, p99: 1, count: 5 })
          // An hour later the minutes are out of the window: no names.
          assert.deepStrictEqual((yield* StatsRead.lastHour(driver, (at(61) + 1) * 1000)).names, [])
        }), { pollInterval: "1 hour", statsInterval: "1 hour" }))

    it.live(name("two processes add to the same minute (one at close); percentiles are bucket bounds over both"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const { driver } = yield* Database
          const a = yield* Stats.Stats
          const now = Math.floor(Date.now() / minuteMs) * minuteMs + 1_000
          // Process A: 90 attempts picked up within 1 ms, one within exactly 250 ms; 3 completed.
          for (let i = 0; i < 90; i++) a.started("p.mail", i % 2 === 0 ? 0 : 0.7, now)
          a.started("p.report", 250, now)
          for (let i = 0; i < 3; i++) a.ended("p.mail", "completed", now)
          yield* a.flush
          // Process B, on its own QueueLive: 5 within 50 ms, 3 within 1000 ms, 2 above the last bound;
          // 4 completed, 1 retried, 1 dead; flushed when its layer closes.
          yield* Effect.gen(function*() {
            const b = yield* Stats.Stats
            for (let i = 0; i < 5; i++) b.started("p.mail", 40, now)
            for (let i = 0; i < 3; i++) b.started("p.mail", 800, now)
            for (let i = 0; i < 2; i++) b.started("p.mail", 2 * 3_600_000, now)
            b.started("p.report", 251, now)
            for (let i = 0; i < 4; i++) b.ended("p.mail", "completed", now)
            b.ended("p.mail", "pending", now)
            b.ended("p.mail", "dead", now)
          }).pipe(
            Effect.provide(QueueLive({ prefix, prune: false, statsInterval: "1 hour" }).pipe(Layer.provide(clientLayer(target))))
          )
          const minute = now - 1_000
          assert.deepStrictEqual(yield* rowsOf(driver), [["p.mail", minute, 7, 2], ["p.report", minute, 0, 0]])
          const get = yield* dashboardGet
          const reply = yield* get("/api/stats")
          assert.strictEqual(reply.status, 200)
          const [mail, report] = reply.body.names
          // 100 pickups of p.mail: the 50th in ≤ 1 ms, the 95th in ≤ 50 ms, the 99th above the last bound.
          assert.deepStrictEqual(mail.pickupMs, { p50: 1, p95: 50, p99: 3_600_000, count: 100 })
          assert.deepStrictEqual(report.pickupMs, { p50: 250, p95: 500, p99: 500, count: 2 })
          const point = mail.points.find((p: any) => Date.parse(p.minute) === minute)
          assert.deepStrictEqual([point.completed, point.failed], [7, 2])
        }), { pollInterval: "1 hour", statsInterval: "1 hour" }))

    it.live(name("a flush that fails keeps its counts: the next one adds them with those counted since"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const { driver } = yield* Database
          const stats = yield* Stats.Stats
          const sql = (yield* SqlClient.SqlClient).withoutTransforms()
          const now = Date.UTC(2026, 0, 15, 12, 0, 0)
          stats.ended("f.mail", "completed", now)
          stats.ended("f.mail", "dead", now)
          stats.started("f.mail", 3, now)
          // The table is away: the flush fails.
          yield* sql`ALTER TABLE ${sql(prefix + "stats")} RENAME TO ${sql(prefix + "stats_away")}`
          const failed = yield* Effect.either(stats.flush)
          assert.strictEqual(failed._tag, "Left")
          stats.ended("f.mail", "completed", now)
          stats.ended("f.mail", "completed", now + minuteMs)
          yield* sql`ALTER TABLE ${sql(prefix + "stats_away")} RENAME TO ${sql(prefix + "stats")}`
          yield* stats.flush
          const rows = yield* oldestFirst(driver, 100)
          /** One pickup in `bucket` (none: undefined). */
          const pickup = (bucket?: number) => Array.from({ length: pickupBoundsMs.length + 1 }, (_, i) => (i === bucket ? 1 : 0))
          assert.deepStrictEqual(rows, [
            { name: "f.mail", minuteUs: now * 1000, completed: 2, failed: 1, pickup: pickup(2) },
            { name: "f.mail", minuteUs: (now + minuteMs) * 1000, completed: 1, failed: 0, pickup: pickup() }
          ] satisfies ReadonlyArray<StatsMinuteRow>)
          // Nothing left: a flush adds nothing more.
          yield* stats.flush
          assert.deepStrictEqual(yield* oldestFirst(driver, 100), rows)
        }), { pollInterval: "1 hour", statsInterval: "1 hour" }))

    it.live(name("the counts kept in memory are bounded: the oldest minutes are dropped first, also of a failed flush"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const { driver } = yield* Database
          const sql = (yield* SqlClient.SqlClient).withoutTransforms()
          const dropped: Array<number> = []
          const counts = Stats.makeCounts(driver, (n) => dropped.push(n))
          const t = Date.UTC(2026, 0, 15, 12, 0, 0)
          const count = (minute: number, names: number) => {
            for (let i = 0; i < names; i++) counts.ended(`n${i}`, "completed", t + minute * minuteMs)
          }
          // 2 minutes of 6,000 names: the first minute is dropped when the second passes the bound.
          count(0, 6_000)
          count(1, 6_000)
          assert.deepStrictEqual(dropped, [6_000])
          assert.strictEqual(counts.size(), 6_000)
          // A flush fails: its minute comes back, and is the oldest dropped when a third passes the bound.
          yield* sql`ALTER TABLE ${sql(prefix + "stats")} RENAME TO ${sql(prefix + "stats_away")}`
          assert.strictEqual((yield* Effect.either(counts.flush))._tag, "Left")
          assert.strictEqual(counts.size(), 6_000)
          count(2, 5_000)
          assert.deepStrictEqual(dropped, [6_000, 6_000])
          assert.strictEqual(counts.size(), 5_000)
          yield* sql`ALTER TABLE ${sql(prefix + "stats_away")} RENAME TO ${sql(prefix + "stats")}`
          yield* counts.flush
          const rows = yield* driver.statsRead(0, 20_000)
          assert.strictEqual(rows.length, 5_000)
          assert.isTrue(rows.every((r) => r.minuteUs === (t + 2 * minuteMs) * 1000 && r.completed === 1))
        }), { pollInterval: "1 hour", statsInterval: "1 hour" }))

    it.live(name("statsInterval infinite: nothing is counted, nothing written"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const Mail = Job.make(`${prefix}mail`, { payload: Schema.Struct({ i: Schema.Number }) })
          yield* Worker.make({ handlers: [Job.handler(Mail, () => Effect.void)] })
          const queue = yield* Queue.Queue
          const id = yield* queue.enqueue(Mail, { i: 1 })
          yield* waitUntil(Effect.map(queue.get(id), (j) => j.state === "completed"))
          const stats = yield* Stats.Stats
          stats.ended(Mail.name, "completed", Date.now())
          yield* stats.flush
          const { driver } = yield* Database
          assert.deepStrictEqual(yield* driver.statsRead(0, 100), [])
        }), { pollInterval: "1 hour", statsInterval: Duration.infinity }))

    it.live(name("the Pruner deletes stats rows older than a day, and keeps the others"), () =>
      withQueue(target, () =>
        Effect.gen(function*() {
          const { driver } = yield* Database
          const minute = Math.floor(Date.now() / minuteMs) * minuteMs
          const row = (minutesAgo: number): StatsMinuteRow => ({
            name: "old.mail",
            minuteUs: (minute - minutesAgo * minuteMs) * 1000,
            completed: 1,
            failed: 0,
            pickup: new Array(pickupBoundsMs.length + 1).fill(0)
          })
          yield* driver.statsAdd([row(25 * 60), row(24 * 60 + 2), row(24 * 60 - 2), row(60)])
          const result = yield* Pruner.run
          assert.strictEqual(result.statsRows, 2)
          assert.deepStrictEqual(
            (yield* oldestFirst(driver, 100)).map((r) => r.minuteUs),
            [row(24 * 60 - 2).minuteUs, row(60).minuteUs]
          )
        }), { pollInterval: "1 hour", prune: false }))
  })
}
