/**
 * Jobs claimed ahead of the running ones (`WorkerOptions.prefetch`), on every database: never more
 * than `concurrency` run and never more than `prefetch` wait; none wait in a worker of long jobs or
 * one with a mutex-keyed job; a waiting job is released — back to pending, the attempt not counted —
 * when it is cancelled, its name paused, the worker stops, or it waited too long; its pickup latency
 * runs to its start; and with several processes on one backlog none hoards.
 *
 * The gated cases use concurrency 1 and prefetch 1: quick "warm" jobs first (better priority), so
 * the worker has measured its attempts and writes, then a job whose handler waits on a gate, then
 * the job under test, which the worker claims ahead and keeps waiting while the gate is closed.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { Admin, Job, Metrics, Queue, Worker } from "../../src/index.js"
import { countJobs, ledgerOf, realSleep, waitUntil, withQueue } from "../support/helpers.js"
import { Hang, Noop } from "../support/jobs.js"
import { awaitExit, spawnWorker } from "../support/processes.js"
import type { Target } from "../support/targets.js"

/** How many jobs of `jobName` are in `state`. */
const stateCount = (prefix: string, jobName: string, state: string) =>
  Effect.flatMap(SqlClient.SqlClient, (client) => {
    const sql = client.withoutTransforms()
    return sql<{ n: number }>`SELECT COUNT(*) AS n FROM ${sql(prefix + "jobs")} WHERE name = ${jobName} AND state = ${state}`
  }).pipe(Effect.map((rows) => Number(rows[0].n)))

const stateOf = (id: string) => Effect.map(Effect.flatMap(Queue.Queue, (q) => q.get(id)), (info) => info.state)
const attemptsOf = (id: string) => Effect.map(Effect.flatMap(Queue.Queue, (q) => q.get(id)), (info) => info.attempts)

/** The jobs of one gated case (job names of its own): warm-ups, the gate, the job under test and one after it. */
const gated = (suffix: string) =>
  Effect.gen(function*() {
    const Warm = Job.make(`prefetch-warm-${suffix}`, { payload: Schema.Struct({ i: Schema.Number }) })
    const Gate = Job.make(`prefetch-gate-${suffix}`, { payload: Schema.Struct({}) })
    const Next = Job.make(`prefetch-next-${suffix}`, { payload: Schema.Struct({ i: Schema.Number }) })
    const gate = yield* Deferred.make<void>()
    /** Job ids of `Next` whose handler started, with when (wall clock, ms). */
    const started = new Map<string, number>()
    const handlers = [
      Job.handler(Warm, () => Effect.void),
      Job.handler(Gate, () => Deferred.await(gate)),
      Job.handler(Next, (_, ctx) => Effect.sync(() => void started.set(ctx.id, Date.now())))
    ]
    const queue = yield* Queue.Queue
    yield* queue.enqueueMany(Warm, Array.from({ length: 40 }, (_, i) => ({ i })), { priority: -10 })
    const gateId = yield* queue.enqueue(Gate, {})
    const waitingId = yield* queue.enqueue(Next, { i: 1 })
    const laterId = yield* queue.enqueue(Next, { i: 2 })
    const open = Deferred.succeed(gate, undefined)
    return { handlers, open, started, gateId, waitingId, laterId, nextName: Next.name }
  })

/** Waits until the worker keeps one job waiting, and checks it is the job under test, claimed and not started. */
const waitingIn = (
  worker: Worker.WorkerHandle,
  g: { readonly waitingId: string; readonly gateId: string; readonly started: ReadonlyMap<string, number> }
) =>
  Effect.gen(function*() {
    yield* waitUntil(Effect.map(worker.waiting, (n) => n === 1), 20_000, "a job waiting in the worker")
    assert.strictEqual(yield* stateOf(g.gateId), "running")
    assert.strictEqual(yield* stateOf(g.waitingId), "running", "the waiting job is claimed")
    assert.isFalse(g.started.has(g.waitingId), "the waiting job has not started")
  })

export const prefetch = (target: Target) => {
  const name = (title: string) => `[${target.id}] ${title}`

  describe(`prefetch [${target.id}]`, () => {
    it.live(name("prefetch: with a backlog jobs wait ahead of the running ones; never more than concurrency run, never more than prefetch wait"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          let inHandler = 0
          let maxInHandler = 0
          const runs = new Map<number, number>()
          const handler = Job.handler(Noop, (p) =>
            Effect.gen(function*() {
              inHandler++
              maxInHandler = Math.max(maxInHandler, inHandler)
              runs.set(p.i, (runs.get(p.i) ?? 0) + 1)
              yield* realSleep(2)
              inHandler--
            }))
          const total = 600
          yield* Effect.flatMap(Queue.Queue, (q) => q.enqueueMany(Noop, Array.from({ length: total }, (_, i) => ({ i }))))
          const worker = yield* Worker.make({ handlers: [handler], concurrency: 4, prefetch: 3 })
          let maxWaiting = 0
          const sampler = yield* Effect.fork(Effect.forever(Effect.zipRight(
            Effect.map(worker.waiting, (n) => void (maxWaiting = Math.max(maxWaiting, n))),
            realSleep(1)
          )))
          yield* waitUntil(Effect.map(countJobs(prefix, "completed"), (n) => n === total), 60_000, "all jobs completed")
          yield* Fiber.interrupt(sampler)
          assert.strictEqual(maxInHandler, 4, "never more than concurrency run, and every slot was used")
          assert.isAtMost(maxWaiting, 3)
          assert.isAbove(maxWaiting, 0, "jobs waited ahead of the running ones")
          assert.strictEqual(runs.size, total)
          assert.deepStrictEqual(Array.from(runs.values()).filter((n) => n !== 1), [], "each job ran once")
          // The backlog is gone: nothing waits, nothing is held.
          yield* waitUntil(Effect.map(worker.running, (n) => n === 0), 5_000, "the worker to hold nothing")
          assert.strictEqual(yield* worker.waiting, 0)
          assert.strictEqual(yield* countJobs(prefix, "running"), 0)
        })), 90_000)

    it.live(name("prefetch: a worker of long jobs, or one with a mutex-keyed job, claims none ahead"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const Long = Job.make("prefetch-long", { payload: Schema.Struct({ i: Schema.Number }) })
          const Keyed = Job.make("prefetch-keyed", { payload: Schema.Struct({ k: Schema.String }), mutexKey: (p) => p.k })
          const queue = yield* Queue.Queue
          yield* queue.enqueueMany(Long, Array.from({ length: 4 }, (_, i) => ({ i })))
          yield* queue.enqueueMany(Keyed, Array.from({ length: 200 }, (_, i) => ({ k: `k${i}` })))
          // 1 s jobs: one would wait only if an end took over 125 ms to be written.
          const long = yield* Worker.make({ handlers: [Job.handler(Long, () => realSleep(1_000))], concurrency: 2, prefetch: 5 })
          const keyed = yield* Worker.make({ handlers: [Job.handler(Keyed, () => realSleep(1))], concurrency: 4, prefetch: 4 })
          let maxWaiting = 0
          const sampler = yield* Effect.fork(Effect.forever(Effect.zipRight(
            Effect.map(Effect.all([long.waiting, keyed.waiting]), ([a, b]) => void (maxWaiting = Math.max(maxWaiting, a, b))),
            realSleep(1)
          )))
          yield* waitUntil(
            Effect.map(
              Effect.all([stateCount(prefix, Long.name, "completed"), stateCount(prefix, Keyed.name, "completed")]),
              ([a, b]) => a === 4 && b === 200
            ),
            60_000,
            "all jobs completed"
          )
          yield* Fiber.interrupt(sampler)
          assert.strictEqual(maxWaiting, 0)
        })), 90_000)

    it.live(name("prefetch: a cancelled job waiting in a worker is released and never starts"), () =>
      withQueue(target, () =>
        Effect.gen(function*() {
          const g = yield* gated("cancel")
          const worker = yield* Worker.make({ handlers: g.handlers, concurrency: 1, prefetch: 1 })
          yield* waitingIn(worker, g)
          assert.isTrue(yield* Effect.flatMap(Queue.Queue, (q) => q.cancel(g.waitingId)))
          // Well within the wait's bound (1 s): a job still waiting would start when the gate opens.
          yield* realSleep(200)
          yield* g.open
          yield* waitUntil(Effect.map(stateOf(g.laterId), (s) => s === "completed"), 20_000, "the next job to complete")
          assert.strictEqual(yield* stateOf(g.waitingId), "cancelled")
          assert.isFalse(g.started.has(g.waitingId), "the cancelled job never started")
        })), 60_000)

    it.live(name("prefetch: pausing its name releases a waiting job (the attempt not counted); it runs after the resume"), () =>
      withQueue(target, () =>
        Effect.gen(function*() {
          const g = yield* gated("pause")
          const worker = yield* Worker.make({ handlers: g.handlers, concurrency: 1, prefetch: 1 })
          yield* waitingIn(worker, g)
          const admin = yield* Admin.Admin
          yield* admin.pause(g.nextName)
          yield* waitUntil(Effect.map(stateOf(g.waitingId), (s) => s === "pending"), 5_000, "the waiting job to be released")
          assert.strictEqual(yield* attemptsOf(g.waitingId), 0)
          assert.strictEqual(yield* worker.waiting, 0)
          yield* g.open
          yield* realSleep(300)
          assert.isFalse(g.started.has(g.waitingId), "no job of a paused name starts")
          yield* admin.resume(g.nextName)
          yield* waitUntil(
            Effect.map(Effect.all([stateOf(g.waitingId), stateOf(g.laterId)]), (s) => s.every((x) => x === "completed")),
            20_000,
            "both jobs to complete after the resume"
          )
          assert.strictEqual(yield* attemptsOf(g.waitingId), 1)
        })), 60_000)

    it.live(name("prefetch: at shutdown a waiting job is released at once, without counting an attempt"), () =>
      withQueue(target, () =>
        Effect.gen(function*() {
          const g = yield* gated("shutdown")
          yield* Effect.scoped(Effect.gen(function*() {
            const worker = yield* Worker.make({
              handlers: g.handlers,
              concurrency: 1,
              prefetch: 1,
              shutdownTimeout: Duration.millis(300)
            })
            yield* waitingIn(worker, g)
          }))
          // The gate's handler was interrupted after shutdownTimeout and released; the waiting job at once.
          for (const id of [g.gateId, g.waitingId, g.laterId]) {
            assert.strictEqual(yield* stateOf(id), "pending", id)
            assert.strictEqual(yield* attemptsOf(id), 0, id)
          }
          assert.strictEqual(g.started.size, 0)
        })), 60_000)

    it.live(name("prefetch: a job that waits longer than its bound is released, and the worker claims none ahead while its slot stays busy"), () =>
      withQueue(target, () =>
        Effect.gen(function*() {
          const g = yield* gated("overdue")
          const worker = yield* Worker.make({ handlers: g.handlers, concurrency: 1, prefetch: 1 })
          yield* waitingIn(worker, g)
          const since = Date.now()
          yield* waitUntil(Effect.map(stateOf(g.waitingId), (s) => s === "pending"), 5_000, "the waiting job to be released")
          assert.isAtLeast(Date.now() - since, 700, "released after about 1 s, not before")
          assert.strictEqual(yield* attemptsOf(g.waitingId), 0)
          // Not claimed ahead again while the gate's job runs.
          yield* realSleep(1_500)
          assert.strictEqual(yield* worker.waiting, 0)
          assert.strictEqual(yield* stateOf(g.waitingId), "pending")
          yield* g.open
          yield* waitUntil(
            Effect.map(Effect.all([stateOf(g.waitingId), stateOf(g.laterId)]), (s) => s.every((x) => x === "completed")),
            20_000,
            "both jobs to complete"
          )
          assert.strictEqual(yield* attemptsOf(g.waitingId), 1)
        })), 60_000)

    it.live(name("prefetch: a waiting job starts as its slot frees, without another claim, and its pickup latency runs to its start"), () =>
      withQueue(target, () =>
        Effect.gen(function*() {
          const g = yield* gated("latency")
          const worker = yield* Worker.make({ handlers: g.handlers, concurrency: 1, prefetch: 1 })
          yield* waitingIn(worker, g)
          const openedAt = Date.now() + 300
          yield* realSleep(300)
          yield* g.open
          yield* waitUntil(Effect.map(stateOf(g.waitingId), (s) => s === "completed"), 20_000, "the waiting job to complete")
          assert.isAtLeast(g.started.get(g.waitingId)!, openedAt - 5)
          const info = yield* Effect.flatMap(Queue.Queue, (q) => q.get(g.waitingId))
          assert.strictEqual(info.attempts, 1)
          assert.isAtMost(Option.getOrThrow(info.claimedAt).getTime(), openedAt - 250, "started from the worker, not claimed again")
          const latency = yield* Metric.value(Metrics.pickupLatency.pipe(Metric.tagged(Metrics.jobNameTag, g.nextName)))
          assert.isAtLeast(latency.max, 300, "its pickup latency counts the wait in the worker")
        })), 60_000)

    it.live(name("prefetch: a worker SIGKILLed with a job waiting in it: the waiting job is rescued with the running one"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const ledger = yield* ledgerOf(prefix)
          const queue = yield* Queue.Queue
          yield* queue.enqueueMany(Noop, Array.from({ length: 40 }, (_, i) => ({ i })), { priority: -10 })
          const runningId = yield* queue.enqueue(Hang, {})
          const waitingId = yield* queue.enqueue(Hang, {})
          const child = yield* spawnWorker(["hang-one", target.dialect, target.url, prefix, "victim", ""])
          yield* waitUntil(
            Effect.map(Effect.all([stateOf(runningId), stateOf(waitingId), ledger.count(runningId)]), ([a, b, n]) =>
              a === "running" && b === "running" && n === 1),
            30_000,
            "the child to run one job and keep the other waiting"
          )
          assert.strictEqual(yield* ledger.count(waitingId), 0, "the waiting job has not started")
          // Killed well within the waiting job's bound (1 s): it is lost with the worker, not released.
          const killedAt = Date.now()
          child.process.kill("SIGKILL")
          const restartedAt = new Map<string, number>()
          yield* Worker.make({
            handlers: [Job.handler(Hang, (_, ctx) => Effect.sync(() => void restartedAt.set(ctx.id, Date.now())))],
            prefetch: 0
          })
          yield* waitUntil(Effect.sync(() => restartedAt.size === 2), 10_000, "both jobs to start again")
          const running = restartedAt.get(runningId)! - killedAt
          const waiting = restartedAt.get(waitingId)! - killedAt
          console.log(`[${target.id}] crash recovery: running job again after ${running} ms, waiting job after ${waiting} ms`)
          assert.isBelow(waiting, 3_000)
          assert.isAtMost(waiting, running + 500, "the waiting job is rescued as fast as the running one")
          for (const id of [runningId, waitingId]) {
            yield* waitUntil(Effect.map(stateOf(id), (s) => s === "completed"), 10_000, `job ${id} to complete`)
            const info = yield* queue.get(id)
            assert.deepStrictEqual(info.errors.map((e) => [e.attempt, e.kind, e.message]), [[1, "lost", "worker lost"]])
          }
        })), 90_000)

    it.live(name("prefetch: four worker processes on one backlog each drain a share, and one started late gets jobs at once"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const sql = (yield* SqlClient.SqlClient).withoutTransforms()
          const ledger = sql(prefix + "ledger")
          yield* sql`CREATE TABLE ${ledger} (job_id VARCHAR(32) NOT NULL, worker VARCHAR(64) NOT NULL)`
          const total = 4000
          const env = { SQLANE_POLL: "100 millis", SQLANE_JOB_MS: "20" }
          const start = (w: string) =>
            Effect.forkScoped(Effect.flatMap(spawnWorker(["work", target.dialect, target.url, prefix, w, String(total)], env), awaitExit))
          const early = yield* Effect.all(["p1", "p2", "p3"].map(start))
          const ready = sql<{ n: number }>`SELECT COUNT(*) AS n FROM ${ledger} WHERE job_id = 'ready'`
          yield* waitUntil(Effect.map(ready, (r) => Number(r[0].n) === 3), 30_000, "three worker processes")
          yield* Effect.flatMap(Queue.Queue, (q) => q.enqueueMany(Noop, Array.from({ length: total }, (_, i) => ({ i }))))
          yield* waitUntil(Effect.map(countJobs(prefix, "completed"), (n) => n >= 300), 30_000, "the first jobs completed")
          const late = yield* start("p4")
          yield* waitUntil(Effect.map(ready, (r) => Number(r[0].n) === 4), 30_000, "the fourth worker process")
          const readyAt = Date.now()
          const lateRuns = sql<{ n: number }>`SELECT COUNT(*) AS n FROM ${ledger} WHERE worker = 'p4' AND job_id <> 'ready'`
          yield* waitUntil(Effect.map(lateRuns, (r) => Number(r[0].n) > 0), 5_000, "the late process to get jobs")
          const lateWaitMs = Date.now() - readyAt
          const pendingThen = yield* countJobs(prefix, "pending")
          yield* waitUntil(Effect.map(countJobs(prefix, "completed"), (n) => n === total), 90_000, "all jobs completed")
          for (const p of [...early, late]) assert.strictEqual(yield* Fiber.join(p), 0)
          const rows = yield* sql<{ job_id: string; n: number }>`SELECT job_id, COUNT(*) AS n FROM ${ledger}
            WHERE job_id <> 'ready' GROUP BY job_id`
          assert.strictEqual(rows.length, total)
          assert.deepStrictEqual(rows.filter((r) => Number(r.n) !== 1), [], "each job ran once")
          const byWorker = yield* sql<{ worker: string; n: number }>`SELECT worker, COUNT(*) AS n FROM ${ledger}
            WHERE job_id <> 'ready' GROUP BY worker`
          assert.strictEqual(byWorker.length, 4, JSON.stringify(byWorker))
          // The early processes shared the backlog; the late one got jobs while most were still pending.
          for (const w of byWorker.filter((r) => r.worker !== "p4")) assert.isAtLeast(Number(w.n), total / 10, JSON.stringify(byWorker))
          assert.isAbove(pendingThen, 0, "the late process got jobs while others were pending")
          assert.isAtMost(lateWaitMs, 2_000, `the late process waited ${lateWaitMs} ms for its first job`)
        })), 150_000)
  })
}
