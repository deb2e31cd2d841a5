/**
 * Running jobs safely, on every database: crash recovery, lost workers, leases, stale writes,
 * timeouts, cancellation, graceful shutdown, connection faults.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Net from "node:net"
import { assert, describe, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Chunk from "effect/Chunk"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Logger from "effect/Logger"
import * as Metric from "effect/Metric"
import * as MetricState from "effect/MetricState"
import * as Option from "effect/Option"
import * as Queue_ from "effect/Queue"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import * as TestClock from "effect/TestClock"
import { Completer, Errors, Events, Job, Metrics, Queue, Worker } from "../../src/index.js"
import { Database } from "../../src/internal/Database.js"
import { nowMicros } from "../../src/internal/time.js"
import { cutLockConnection, ledgerOf, realSleep, waitUntil, withQueue } from "../support/helpers.js"
import { Hang, Noop, Slow, Suicide } from "../support/jobs.js"
import { awaitExit, spawnWorker } from "../support/processes.js"
import type { Target } from "../support/targets.js"

/**
 * What a worker `workerId` leaves of job `jobId` when its process is gone: the job running under it,
 * claimed when it was created, and the worker's row with its heartbeat at that time (its lock is not
 * taken here). `host` is the row's host name.
 */
const leftRunning = (prefix: string, jobId: string, workerId: string, host = "old-host") =>
  Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    yield* sql`INSERT INTO ${sql(prefix + "workers")} (id, started_at, heartbeat_at, host, pid)
      SELECT ${workerId}, created_at, created_at, ${host}, ${1} FROM ${sql(prefix + "jobs")} WHERE id = ${jobId}`
    yield* sql`UPDATE ${sql(prefix + "jobs")} SET state = 'running', attempts = 1, worker_id = ${workerId},
      claimed_at = created_at WHERE id = ${jobId}`
  })

/** A job whose end a trigger of `refuseEndsOf` refuses when its payload says `poison: true`. */
const Poisonable = Job.make("refused-end", {
  payload: Schema.Struct({ poison: Schema.Boolean, i: Schema.Number }),
  retry: Job.attempts(3, Schedule.spaced("10 millis"))
})

/** What the trigger of `refuseEndsOf` says. */
const refusedMessage = "poison: this end is refused"

/**
 * A trigger on the test's jobs table that refuses the ends of jobs whose payload says
 * `"poison":true` — every end (any write taking the row out of `running`: completion, retry, dead
 * letter, release), or only its completion — with PostgreSQL's `RAISE EXCEPTION` (SQLSTATE P0001)
 * or MySQL/MariaDB's `SIGNAL SQLSTATE '45000'` (errno 1644). The effect returned drops it.
 */
const refuseEndsOf = (target: Target, prefix: string, which: "completion" | "every") =>
  Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    const when = `${which === "every" ? "NEW.state <> 'running'" : "NEW.state = 'completed'"} AND ` +
      `OLD.payload LIKE '%"poison":true%'`
    if (target.dialect === "pg") {
      yield* sql.unsafe(`CREATE FUNCTION ${prefix}refuse() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN IF ${when} THEN RAISE EXCEPTION '${refusedMessage}'; END IF; RETURN NEW; END $$`)
      yield* sql.unsafe(`CREATE TRIGGER ${prefix}refuse BEFORE UPDATE ON ${prefix}jobs FOR EACH ROW
        EXECUTE FUNCTION ${prefix}refuse()`)
      return Effect.orDie(sql.unsafe(`DROP FUNCTION IF EXISTS ${prefix}refuse() CASCADE`))
    }
    yield* sql.unsafe(`CREATE TRIGGER ${prefix}refuse BEFORE UPDATE ON ${prefix}jobs FOR EACH ROW
      BEGIN IF ${when} THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '${refusedMessage}'; END IF; END`).unprepared
    return Effect.orDie(sql.unsafe(`DROP TRIGGER IF EXISTS ${prefix}refuse`).unprepared)
  })

export const safety = (target: Target) => {
  const name = (title: string) => `[${target.id}] ${title}`
  const args = (mode: string, prefix: string, worker: string, arg = "") =>
    [mode, target.dialect, target.url, prefix, worker, arg]

  describe(`safety [${target.id}]`, () => {
    it.live(name("a worker SIGKILLed mid-job: a fresh worker starts the job again within 3 s"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const ledger = yield* ledgerOf(prefix)
          const queue = yield* Queue.Queue
          const id = yield* queue.enqueue(Hang, {})
          const child = yield* spawnWorker(args("hang", prefix, "victim"))
          yield* waitUntil(Effect.map(ledger.count(id), (n) => n === 1), 30_000, "the child to start the job")
          yield* realSleep(200)
          let restartedAt = 0
          yield* Worker.make({
            handlers: [Job.handler(Hang, () => Effect.sync(() => void (restartedAt ||= Date.now())))]
          })
          const killedAt = Date.now()
          child.process.kill("SIGKILL")
          yield* waitUntil(Effect.sync(() => restartedAt > 0), 10_000, "the job to start again")
          const seconds = (restartedAt - killedAt) / 1000
          console.log(`[${target.id}] crash recovery: job started again ${seconds.toFixed(3)} s after SIGKILL`)
          assert.isBelow(seconds, 3)
          yield* waitUntil(Effect.map(queue.get(id), (j) => j.state === "completed"))
          const info = yield* queue.get(id)
          assert.strictEqual(info.attempts, 2)
          assert.deepStrictEqual(info.errors.map((e) => [e.attempt, e.kind, e.message]), [[1, "lost", "worker lost"]])
        })), 90_000)

    it.live(name("a handler that kills its own process, 3 attempts: dead with 'worker lost' after exactly 3 claims"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const ledger = yield* ledgerOf(prefix)
          const queue = yield* Queue.Queue
          const id = yield* queue.enqueue(Suicide, {})
          // A worker process restarted each time it dies, until the job is dead.
          for (let i = 0; i < 6; i++) {
            const child = yield* spawnWorker(args("suicide", prefix, `w${i}`))
            yield* awaitExit(child)
            if ((yield* queue.get(id)).state === "dead") break
          }
          const info = yield* queue.get(id)
          assert.strictEqual(info.state, "dead")
          assert.strictEqual(info.attempts, 3)
          assert.strictEqual(yield* ledger.count(id), 3)
          assert.deepStrictEqual(info.errors.map((e) => [e.attempt, e.kind, e.message]), [
            [1, "lost", "worker lost"],
            [2, "lost", "worker lost"],
            [3, "lost", "worker lost"]
          ])
        }), { rescueInterval: "100 millis" }), 120_000)

    it.effect(name("lease expiry (TestClock): a worker whose heartbeats stop loses its job; its late write changes nothing"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const sql = (yield* SqlClient.SqlClient).withoutTransforms()
          const queue = yield* Queue.Queue
          const id = yield* queue.enqueue(Noop, { i: 1 })
          // A frozen worker: its session lock is held (by a connection of ours) but it never heartbeats.
          const conn = yield* sql.reserve
          const lockName = (yield* Database).driver.workerLockName("frozen")
          yield* target.dialect === "pg"
            ? conn.executeRaw("SELECT pg_advisory_lock($1, hashtext($2))", [0x5a1a7e, lockName])
            : conn.executeRaw("SELECT GET_LOCK(?, 0)", [lockName])
          yield* leftRunning(prefix, id, "frozen", "frozen-host")
          yield* Worker.make({ handlers: [Job.handler(Noop, () => Effect.succeed(undefined))] })
          yield* realSleep(400)
          assert.strictEqual((yield* queue.get(id)).state, "running") // the lock is held, the lease is fresh
          yield* TestClock.adjust("31 seconds") // past the 30 s lease
          // A rescue pass that read the clock before the jump sleeps past it: give the next pass a tick.
          yield* realSleep(200)
          yield* TestClock.adjust("1 second")
          yield* waitUntil(Effect.map(queue.get(id), (j) => j.state === "completed"))
          // The frozen worker wakes up and reports attempt 1 as completed: 0 rows change.
          const completer = yield* Completer.Completer
          const changed = yield* completer.finish({
            id,
            attempt: 1,
            state: "dead",
            runAtUs: null,
            finishedAtUs: 0,
            lastError: "late",
            errors: null,
            result: null
          })
          assert.isFalse(changed)
          const info = yield* queue.get(id)
          assert.strictEqual(info.state, "completed")
          assert.strictEqual(info.attempts, 2)
          assert.deepStrictEqual(info.lastError._tag, "Some") // "worker lost" from the rescue, not "late"
          assert.strictEqual(info.lastError._tag === "Some" && info.lastError.value, "worker lost")
        }), { pollInterval: "1 hour" }))

    it.effect(name("timeout 2 s, handler sleeps 5 s: interrupted, the attempt fails, the retry never overlaps"), () =>
      withQueue(target, () =>
        Effect.gen(function*() {
          const Timed = Job.make("timed", {
            payload: Schema.Struct({}),
            timeout: "2 seconds",
            retry: Job.attempts(2, Schedule.spaced("1 second"))
          })
          const events: Array<string> = []
          yield* Worker.make({
            handlers: [Job.handler(Timed, (_, ctx) =>
              Effect.sync(() => events.push(`start ${ctx.attempt}`)).pipe(
                Effect.zipRight(Effect.sleep("5 seconds")),
                Effect.zipRight(Effect.sync(() => events.push(`end ${ctx.attempt}`))),
                Effect.onInterrupt(() => Effect.sync(() => events.push(`interrupted ${ctx.attempt}`)))
              ))]
          })
          const queue = yield* Queue.Queue
          const id = yield* queue.enqueue(Timed, {})
          yield* waitUntil(Effect.sync(() => events.length === 1))
          yield* TestClock.adjust("2 seconds")
          yield* waitUntil(Effect.map(queue.get(id), (j) => j.state === "pending" && j.attempts === 1))
          yield* TestClock.adjust("1 second")
          yield* waitUntil(Effect.sync(() => events.length === 3))
          yield* TestClock.adjust("2 seconds")
          yield* waitUntil(Effect.map(queue.get(id), (j) => j.state === "dead"))
          assert.deepStrictEqual(events, ["start 1", "interrupted 1", "start 2", "interrupted 2"])
          const info = yield* queue.get(id)
          assert.deepStrictEqual(info.errors.map((e) => [e.attempt, e.kind, e.message]), [
            [1, "timeout", "the attempt timed out after 2000 ms"],
            [2, "timeout", "the attempt timed out after 2000 ms"]
          ])
        }), { pollInterval: "1 hour" }))

    for (const [timeoutMs, expect] of [[10_000, "completes once"], [1_000, "is released and runs again once"]] as const) {
      it.live(name(`SIGTERM during a 3 s job with a ${timeoutMs / 1000} s shutdown timeout: the job ${expect}`), () =>
        withQueue(target, (prefix) =>
          Effect.gen(function*() {
            const ledger = yield* ledgerOf(prefix)
            const queue = yield* Queue.Queue
            const id = yield* queue.enqueue(Slow, {})
            const child = yield* spawnWorker(args("graceful", prefix, "graceful", String(timeoutMs)))
            yield* waitUntil(Effect.map(ledger.count(`start:${id}`), (n) => n === 1), 30_000, "the job to start")
            child.process.kill("SIGTERM")
            const exit = yield* awaitExit(child)
            assert.strictEqual(exit, 0)
            const info = yield* queue.get(id)
            if (timeoutMs > 3000) {
              assert.strictEqual(info.state, "completed")
              assert.strictEqual(info.attempts, 1)
              assert.strictEqual(yield* ledger.count(`end:${id}`), 1)
            } else {
              assert.strictEqual(info.state, "pending")
              assert.strictEqual(info.attempts, 0) // released: the attempt is not counted
              assert.strictEqual(yield* ledger.count(`end:${id}`), 0)
              yield* Worker.make({
                handlers: [Job.handler(Slow, (_, ctx) => ledger.record(`again:${ctx.id}`, "parent"))]
              })
              yield* waitUntil(Effect.map(queue.get(id), (j) => j.state === "completed"))
              assert.strictEqual((yield* queue.get(id)).attempts, 1)
              assert.strictEqual(yield* ledger.count(`again:${id}`), 1)
            }
          })), 90_000)
    }

    it.live(name("at shutdown, a last batch of ends the database refuses as a whole is written end by end: none is lost"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const sql = (yield* SqlClient.SqlClient).withoutTransforms()
          const { driver } = yield* Database
          const queue = yield* Queue.Queue
          const ids = yield* queue.enqueueMany(Noop, [{ i: 1 }, { i: 2 }])
          const nowUs = (yield* nowMicros)
          assert.strictEqual((yield* driver.jobClaim([{ name: Noop.name, priority: 0 }], 10, nowUs, "w-final")).length, 2)
          // Releasing the second would take its attempt count below 0: the check constraint refuses
          // the statement that holds it.
          yield* sql`UPDATE ${sql(`${prefix}jobs`)} SET attempts = 0 WHERE id = ${ids[1]}`
          let written = 0
          yield* Effect.scoped(Effect.gen(function*() {
            const completer = yield* Completer.make
            const end = { runAtUs: null, finishedAtUs: nowUs, lastError: null, errors: null, result: null }
            completer.submit({ ...end, id: ids[0], attempt: 1, state: "completed" }, () => written++)
            completer.submit({ ...end, id: ids[1], attempt: 0, state: "released" }, () => written++)
          }))
          assert.strictEqual(written, 2)
          assert.strictEqual((yield* queue.get(ids[0])).state, "completed")
          const refused = yield* queue.get(ids[1])
          assert.strictEqual(refused.state, "dead")
          assert.match(refused.lastError._tag === "Some" ? refused.lastError.value : "", /could not record this attempt's end/)
        })))

    it.live(name("an end the database refuses (a trigger) holds up no other end; it is retried, then dead-lettered with the database's message"), () => {
      // The app's log lines, around the layers: the dead letter written in place of the refused end is
      // logged once, at Error, by the Completer (and not again by the worker).
      const logged: Array<string> = []
      const capture = Logger.make(({ logLevel, message }) => {
        const text = (Array.isArray(message) ? message : [message]).map(String).join(" ")
        if (text.startsWith("sqlane: job")) logged.push(`${logLevel.label} ${text}`)
      })
      return withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const queue = yield* Queue.Queue
          const drop = yield* refuseEndsOf(target, prefix, "completion")
          yield* Effect.gen(function*() {
            let runs = 0
            yield* Worker.make({ concurrency: 3, handlers: [Job.handler(Poisonable, () => Effect.sync(() => void runs++))] })
            const poison = yield* queue.enqueue(Poisonable, { poison: true, i: 0 })
            const others = yield* queue.enqueueMany(
              Poisonable,
              Array.from({ length: 20 }, (_, i) => ({ poison: false, i: i + 1 }))
            )
            yield* waitUntil(
              Effect.map(Effect.forEach(others, queue.get), (js) => js.every((j) => j.state === "completed")),
              20_000,
              "the other jobs"
            )
            yield* waitUntil(Effect.map(queue.get(poison), (j) => j.state === "dead"), 20_000, "the dead letter")
            const info = yield* queue.get(poison)
            assert.strictEqual(Option.getOrThrow(info.lastError), `sqlane could not record this attempt's end: ${refusedMessage}`)
            assert.strictEqual(info.attempts, 1)
            assert.strictEqual(runs, 21)
            yield* waitUntil(Effect.sync(() => logged.length > 0), 10_000, "the dead letter's line")
            assert.deepStrictEqual(logged.map((l) => l.split(": the database refused")[0]), [
              `ERROR sqlane: job ${poison} (${Poisonable.name}) is dead after attempt 1`
            ])
            assert.include(logged[0], refusedMessage)
          }).pipe(Effect.ensuring(drop))
        })).pipe(Effect.provide(Logger.replace(Logger.defaultLogger, capture)))
    })

    it.live(name("an end the database refuses with its dead letter: the job stays running, its slot is freed, one warning; another worker takes it back once its worker is gone"), () => {
      const warnings: Array<string> = []
      const appLogger = Logger.replace(
        Logger.defaultLogger,
        Logger.make(({ logLevel, message }) => {
          if (logLevel.label === "WARN") warnings.push((Array.isArray(message) ? message : [message]).map(String).join(" "))
        })
      )
      return withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const sql = (yield* SqlClient.SqlClient).withoutTransforms()
          const queue = yield* Queue.Queue
          const drop = yield* refuseEndsOf(target, prefix, "every")
          yield* Effect.gen(function*() {
            const runs = new Map<number, number>()
            const handler = Job.handler(Poisonable, (p) => Effect.sync(() => void runs.set(p.i, (runs.get(p.i) ?? 0) + 1)))
            const poison = yield* queue.enqueue(Poisonable, { poison: true, i: 0 })
            yield* Effect.scoped(Effect.gen(function*() {
              // One slot: the other jobs run only once the poison job's slot is free.
              yield* Worker.make({ id: "refused-1", concurrency: 1, handlers: [handler] })
              yield* waitUntil(Effect.sync(() => runs.get(0) === 1), 20_000, "the poison job to run")
              const others = yield* queue.enqueueMany(
                Poisonable,
                Array.from({ length: 20 }, (_, i) => ({ poison: false, i: i + 1 }))
              )
              yield* waitUntil(
                Effect.map(Effect.forEach(others, queue.get), (js) => js.every((j) => j.state === "completed")),
                30_000,
                "the other jobs"
              )
              // The end and its dead letter are tried for about 1.5 s before the warning (the other jobs
              // did not wait for that: the slot started them as soon as the poison job's end was handed over).
              const refusedWarnings = () => warnings.filter((w) => w.includes("refused this attempt's end"))
              yield* waitUntil(Effect.sync(() => refusedWarnings().length > 0), 10_000, "the warning")
              // Its live worker's rescuer (every 100 ms) leaves it alone: it is not a claim whose answer was lost.
              yield* realSleep(1_000)
              const [row] = yield* sql<{ state: string; worker_id: string | null }>`SELECT state, worker_id
                FROM ${sql(prefix + "jobs")} WHERE id = ${poison}`
              assert.deepStrictEqual([row.state, row.worker_id], ["running", "refused-1"])
              assert.strictEqual(runs.get(0), 1)
              const refused = refusedWarnings()
              assert.strictEqual(refused.length, 1, refused.join("\n"))
              assert.include(refused[0], refusedMessage)
            }))
            yield* drop
            // The worker is gone (its lock free): another worker takes the job back as a lost worker's.
            yield* Worker.make({ id: "refused-2", handlers: [handler] })
            yield* waitUntil(Effect.map(queue.get(poison), (j) => j.state === "completed"), 20_000, "the rescue")
            const info = yield* queue.get(poison)
            assert.strictEqual(info.attempts, 2)
            assert.strictEqual(info.errors[0]?.message, "worker lost")
            assert.strictEqual(runs.get(0), 2)
          }).pipe(Effect.ensuring(drop))
        }), { rescueInterval: "100 millis" }).pipe(Effect.provide(appLogger))
    })

    it.live(name("at shutdown, an end the database refuses is dead-lettered at once, within the completer's 5 s bound"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const { driver } = yield* Database
          const queue = yield* Queue.Queue
          const drop = yield* refuseEndsOf(target, prefix, "completion")
          yield* Effect.gen(function*() {
            const [id] = yield* queue.enqueueMany(Poisonable, [{ poison: true, i: 0 }])
            const nowUs = (yield* nowMicros)
            assert.strictEqual((yield* driver.jobClaim([{ name: Poisonable.name, priority: 0 }], 1, nowUs, "w-final")).length, 1)
            const calls: Array<[boolean | undefined, boolean | undefined]> = []
            const started = Date.now()
            yield* Effect.scoped(Effect.gen(function*() {
              const completer = yield* Completer.make
              completer.submit({
                id,
                attempt: 1,
                state: "completed",
                runAtUs: null,
                finishedAtUs: nowUs,
                lastError: null,
                errors: null,
                result: null
              }, (changed, unwritten) => void calls.push([changed, unwritten]))
            }))
            assert.isBelow(Date.now() - started, 4_000)
            assert.deepStrictEqual(calls, [[true, undefined]])
            const info = yield* queue.get(id)
            assert.strictEqual(info.state, "dead")
            assert.strictEqual(Option.getOrThrow(info.lastError), `sqlane could not record this attempt's end: ${refusedMessage}`)
          }).pipe(Effect.ensuring(drop))
        })))

    it.effect(name("a refused end's retries wait on Effect's Clock (TestClock): written once the clock passes them"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const { driver } = yield* Database
          const queue = yield* Queue.Queue
          const drop = yield* refuseEndsOf(target, prefix, "completion")
          yield* Effect.gen(function*() {
            const [id] = yield* queue.enqueueMany(Poisonable, [{ poison: true, i: 0 }])
            const nowUs = (yield* nowMicros)
            assert.strictEqual((yield* driver.jobClaim([{ name: Poisonable.name, priority: 0 }], 1, nowUs, "w-clock")).length, 1)
            const calls: Array<boolean | undefined> = []
            yield* Effect.scoped(Effect.gen(function*() {
              const completer = yield* Completer.make
              completer.submit({
                id,
                attempt: 1,
                state: "completed",
                runAtUs: null,
                finishedAtUs: nowUs,
                lastError: null,
                errors: null,
                result: null
              }, (changed) => void calls.push(changed))
              // Refused once, then waiting for the clock: nothing more happens in real time.
              yield* realSleep(1_000)
              assert.deepStrictEqual(calls, [])
              assert.strictEqual((yield* queue.get(id)).state, "running")
              yield* waitUntil(Effect.zipRight(TestClock.adjust("1 second"), Effect.sync(() => calls.length > 0)), 20_000, "the dead letter")
            }))
            assert.deepStrictEqual(calls, [true])
            assert.strictEqual((yield* queue.get(id)).state, "dead")
          }).pipe(Effect.ensuring(drop))
        })))

    it.live(name("cancel a pending job (it never runs) and a running one, from this process and another"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const queue = yield* Queue.Queue
          const started: Array<string> = []
          const interrupted: Array<string> = []
          const pending = yield* queue.enqueue(Hang, {}, { delay: "1 hour" })
          assert.isTrue(yield* queue.cancel(pending))
          assert.strictEqual((yield* queue.get(pending)).state, "cancelled")
          assert.isFalse(yield* queue.cancel(pending)) // already ended
          yield* Worker.make({
            concurrency: 2,
            shutdownTimeout: "100 millis",
            handlers: [Job.handler(Hang, (_, ctx) =>
              Effect.sync(() => started.push(ctx.id)).pipe(
                Effect.zipRight(Effect.never),
                Effect.onInterrupt(() => Effect.sync(() => interrupted.push(ctx.id)))
              ))]
          })
          const local = yield* queue.enqueue(Hang, {})
          const remote = yield* queue.enqueue(Hang, {})
          yield* waitUntil(Effect.sync(() => started.length === 2))
          // From this process: the handler is interrupted at once.
          assert.isTrue(yield* queue.cancel(local))
          yield* waitUntil(Effect.sync(() => interrupted.includes(local)), 5_000, "the local cancel")
          // From another process: NOTIFY on PostgreSQL; the worker's periodic check on MySQL/MariaDB.
          const child = yield* spawnWorker(args("cancel", prefix, "canceller", remote))
          assert.strictEqual(yield* awaitExit(child), 0)
          yield* waitUntil(Effect.sync(() => interrupted.includes(remote)), 10_000, "the remote cancel")
          assert.strictEqual((yield* queue.get(local)).state, "cancelled")
          assert.strictEqual((yield* queue.get(remote)).state, "cancelled")
          assert.deepStrictEqual(started.includes(pending), false)
          // retry puts a cancelled job back; it runs again
          assert.isTrue(yield* queue.retry(local))
          yield* waitUntil(Effect.sync(() => started.filter((s) => s === local).length === 2))
        }), target.dialect === "pg" ? { rescueInterval: "1 hour" } : {}), 60_000)

    it.live(name("a job cancelled as its handler ends: no Completed event, not counted as completed"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          // The cancel commits while the handler runs, and the worker hears of it only after the
          // handler succeeded (here: never; no NOTIFY, no check of the table). The attempt's end is
          // stale and changes nothing: the worker must not report the job completed.
          const sql = (yield* SqlClient.SqlClient).withoutTransforms()
          const queue = yield* Queue.Queue
          const events = yield* Events.Events
          const seen = yield* events.subscribe
          const Late = Job.make(`${prefix}late`, { payload: Schema.Struct({ i: Schema.Number }) })
          const started = yield* Deferred.make<void>()
          const gate = yield* Deferred.make<void>()
          yield* Worker.make({
            concurrency: 1,
            handlers: [Job.handler(Late, ({ i }) =>
              i === 1 ? Effect.zipRight(Deferred.succeed(started, undefined), Deferred.await(gate)) : Effect.void)]
          })
          const first = yield* queue.enqueue(Late, { i: 1 })
          yield* Deferred.await(started)
          yield* sql`UPDATE ${sql(prefix + "jobs")} SET state = 'cancelled', worker_id = NULL WHERE id = ${first}`
          yield* Deferred.succeed(gate, undefined)
          const second = yield* queue.enqueue(Late, { i: 2 })
          const all: Array<Events.WorkerEvent> = []
          yield* waitUntil(
            Effect.map(Queue_.takeAll(seen), (chunk) => {
              all.push(...Chunk.toReadonlyArray(chunk))
              return all.some((e) => e._tag === "Completed" && e.id === second)
            }),
            20_000,
            "the second job's Completed event"
          )
          assert.deepStrictEqual(all.map((e) => [e._tag, e.id]), [
            ["Claimed", first],
            ["Claimed", second],
            ["Completed", second]
          ])
          assert.strictEqual((yield* queue.get(first)).state, "cancelled")
          const completed = yield* Effect.map(Metric.snapshot, (pairs) =>
            pairs.filter((p) =>
              p.metricKey.name === "sqlane_jobs_completed" &&
              p.metricKey.tags.some((t) => t.key === Metrics.jobNameTag && t.value === Late.name)
            ).map((p) => MetricState.isCounterState(p.metricState) ? Number(p.metricState.count) : -1))
          assert.deepStrictEqual(completed, [1])
        }), { rescueInterval: "1 hour", pollInterval: "1 hour" }))

    it.live(name("a job cancelled and retried by another process: its first attempt is interrupted, not run beside the retry"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          // No NOTIFY and no local cancel: the statements alone, as another process's `sqlane cancel`
          // then `sqlane retry` on MySQL/MariaDB. The row is pending again (not cancelled) by the time
          // the worker looks; the attempt running here is stale all the same.
          const { driver } = yield* Database
          const queue = yield* Queue.Queue
          const Twice = Job.make(`${prefix}twice`, { payload: Schema.Struct({}) })
          const started: Array<number> = []
          const interrupted: Array<number> = []
          const handlers = [Job.handler(Twice, (_, ctx) =>
            Effect.sync(() => started.push(ctx.attempt)).pipe(
              Effect.zipRight(ctx.attempt === 1 ? Effect.never : Effect.void),
              Effect.onInterrupt(() => Effect.sync(() => interrupted.push(ctx.attempt)))
            ))]
          // Worker A runs attempt 1 in its only slot; the retry can only go to worker B.
          yield* Worker.make({ concurrency: 1, handlers })
          const id = yield* queue.enqueue(Twice, {})
          yield* waitUntil(Effect.sync(() => started.length === 1), 10_000, "attempt 1")
          yield* Worker.make({ concurrency: 1, handlers })
          const nowUs = (yield* nowMicros)
          assert.isTrue(yield* driver.jobCancel(id, nowUs))
          assert.isTrue(yield* driver.jobRetry(id, nowUs))
          yield* waitUntil(Effect.map(queue.get(id), (j) => j.state === "completed"), 20_000, "the retry to complete")
          yield* waitUntil(Effect.sync(() => interrupted.includes(1)), 5_000, "attempt 1 interrupted")
          assert.deepStrictEqual(started, [1, 2])
          assert.strictEqual((yield* queue.get(id)).attempts, 2)
        }), { rescueInterval: "100 millis", pollInterval: "200 millis" }), 60_000)

    if (target.dialect === "pg") {
      it.live(name("a rescued job's Failed event carries its name even when its row is gone by then"), () =>
        withQueue(target, (prefix) =>
          Effect.gen(function*() {
            // With retention.completed 0 another worker may retry, complete and delete the job between
            // the rescue's write and its event; here a trigger deletes the row in the rescue's write.
            const sql = (yield* SqlClient.SqlClient).withoutTransforms()
            const queue = yield* Queue.Queue
            const events = yield* Events.Events
            const seen = yield* events.subscribe
            const id = yield* queue.enqueue(Noop, { i: 1 })
            yield* leftRunning(prefix, id, "gone-worker")
            yield* sql.unsafe(`CREATE FUNCTION ${prefix}gone() RETURNS trigger LANGUAGE plpgsql AS $$
              BEGIN DELETE FROM ${prefix}jobs WHERE id = NEW.id; RETURN NULL; END $$`)
            yield* sql.unsafe(`CREATE TRIGGER ${prefix}gone AFTER UPDATE ON ${prefix}jobs FOR EACH ROW
              WHEN (OLD.state = 'running' AND NEW.state = 'pending') EXECUTE FUNCTION ${prefix}gone()`)
            yield* Worker.make({ handlers: [Job.handler(Noop, () => Effect.void)] })
            const all: Array<Events.WorkerEvent> = []
            yield* waitUntil(
              Effect.map(Queue_.takeAll(seen), (chunk) => {
                all.push(...Chunk.toReadonlyArray(chunk))
                return all.some((e) => e._tag === "Failed")
              }),
              20_000,
              "the Failed event of the rescue"
            )
            yield* sql.unsafe(`DROP FUNCTION ${prefix}gone() CASCADE`)
            assert.deepStrictEqual(all.map((e) => [e._tag, e.id, e.name]), [["Failed", id, Noop.name]])
          }), { rescueInterval: "100 millis" }))
    }

    it.effect(name("retry a dead job: it runs again with a fresh set of attempts"), () =>
      withQueue(target, () =>
        Effect.gen(function*() {
          const Once = Job.make("once", { payload: Schema.Struct({}), retry: Job.attempts(1) })
          let fail = true
          yield* Worker.make({
            handlers: [Job.handler(Once, () => (fail ? Effect.die("boom") : Effect.void))]
          })
          const queue = yield* Queue.Queue
          const id = yield* queue.enqueue(Once, {})
          yield* waitUntil(Effect.map(queue.get(id), (j) => j.state === "dead"))
          fail = false
          assert.isTrue(yield* queue.retry(id))
          yield* waitUntil(Effect.map(queue.get(id), (j) => j.state === "completed"))
          const info = yield* queue.get(id)
          assert.strictEqual(info.attempts, 2)
          assert.strictEqual(info.errors.length, 1)
          assert.isFalse(yield* queue.retry(id)) // completed jobs are not retried
        }), { pollInterval: "1 hour" }))

    it.live(name("a worker restarted with the same id takes back the jobs its earlier life left running"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const queue = yield* Queue.Queue
          const id = yield* queue.enqueue(Noop, { i: 1 })
          // What a SIGKILLed "web-1" leaves: its job running, its lock gone, its row still there.
          yield* leftRunning(prefix, id, "web-1")
          yield* Worker.make({ id: "web-1", handlers: [Job.handler(Noop, () => Effect.void)] })
          yield* waitUntil(Effect.map(queue.get(id), (j) => j.state === "completed"), 10_000, "the rescue")
          assert.strictEqual((yield* queue.get(id)).attempts, 2)
        })))

    // Worker lock names were `sqlane:w:<id>` for every queue: GET_LOCK names are server-wide on MySQL,
    // so a worker of another queue (another table prefix or database) with the same id made a lost
    // worker look alive (its jobs waited for the lease), or kept a worker of that id from starting.
    it.live(name("two queues (table prefixes) in one database, workers of the same ids in both: all start, and the other queue's live worker hides no lost job"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const queue = yield* Queue.Queue
          const id = yield* queue.enqueue(Noop, { i: 1 })
          // What a SIGKILLed "shared-1" of this queue leaves: its job running, its row fresh, its lock gone.
          yield* leftRunning(prefix, id, "shared-1")
          // The other queue: live workers "shared-1" and "twin", which run its job.
          const ready = yield* Deferred.make<void>()
          const ranInOther: Array<number> = []
          yield* withQueue(target, () => Effect.gen(function*() {
            const handler = Job.handler(Noop, (p) => Effect.sync(() => ranInOther.push(p.i)))
            yield* Worker.make({ id: "shared-1", handlers: [handler] })
            yield* Worker.make({ id: "twin", handlers: [handler] })
            yield* (yield* Queue.Queue).enqueue(Noop, { i: 7 })
            yield* waitUntil(Effect.sync(() => ranInOther.length === 1), 10_000, "the other queue's job")
            yield* Deferred.succeed(ready, undefined)
            yield* Effect.never
          })).pipe(Effect.forkScoped)
          yield* Deferred.await(ready)
          // This queue's worker "twin" starts beside the other queue's, and rescues the job of its lost
          // "shared-1" on its lock alone (the lease of 30 s is far off).
          const ran: Array<number> = []
          yield* Worker.make({ id: "twin", handlers: [Job.handler(Noop, (p) => Effect.sync(() => ran.push(p.i)))] })
          yield* waitUntil(Effect.map(queue.get(id), (j) => j.state === "completed"), 10_000, "the rescue")
          const info = yield* queue.get(id)
          assert.strictEqual(info.attempts, 2)
          assert.strictEqual(info.errors[0].message, "worker lost")
          assert.deepStrictEqual(ran, [1])
          assert.deepStrictEqual(ranInOther, [7])
        })))

    it.live(name("at shutdown, a handler that ignores its interruption: one warning naming its job, no word of an unreachable database, the worker's row left saying it is lost"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const sql = (yield* SqlClient.SqlClient).withoutTransforms()
          const queue = yield* Queue.Queue
          const logs: Array<string> = []
          const capture = Logger.make(({ message }) =>
            void logs.push(Array.isArray(message) ? message.map(String).join(" ") : String(message)))
          let started = 0
          const scope = yield* Scope.make()
          yield* Worker.make({
            concurrency: 2,
            shutdownTimeout: "100 millis",
            handlers: [
              Job.handler(Hang, () => Effect.zipRight(Effect.sync(() => void started++), Effect.uninterruptible(Effect.never)))
            ]
          }).pipe(Scope.extend(scope), Effect.provide(Logger.replace(Logger.defaultLogger, capture)))
          const id = yield* queue.enqueue(Hang, {})
          yield* waitUntil(Effect.sync(() => started === 1), 10_000, "the job to start")
          const closing = Date.now()
          yield* Scope.close(scope, Exit.void)
          assert.isBelow(Date.now() - closing, 2_000)
          assert.isTrue(logs.some((l) => l.includes("1 handler(s) did not stop") && l.endsWith(`: ${id}`)), logs.join("\n"))
          assert.isFalse(logs.some((l) => l.includes("unreachable")), logs.join("\n"))
          // The row stays while its job runs, its heartbeat at the epoch: rescuers take the job at once.
          const rows = yield* sql<{ year: number | string }>`SELECT ${
            sql.literal(target.dialect === "pg" ? "EXTRACT(YEAR FROM heartbeat_at)" : "YEAR(heartbeat_at)")
          } AS year FROM ${sql(prefix + "workers")}`
          assert.deepStrictEqual(rows.map((r) => Number(r.year)), [1970])
          assert.strictEqual((yield* queue.get(id)).state, "running")
        })), 30_000)

    // The rescue listing was LIMIT 1000 and lists the worker's own running jobs too: at concurrency
    // 1,000 those filled it, and a lost worker's job was never listed (it waited for nobody).
    it.live(name("a worker at concurrency 1,000 with every slot busy still rescues a lost worker's job"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const sql = (yield* SqlClient.SqlClient).withoutTransforms()
          const queue = yield* Queue.Queue
          let started = 0
          yield* Worker.make({
            concurrency: 1000,
            shutdownTimeout: "100 millis",
            handlers: [
              Job.handler(Hang, () => Effect.zipRight(Effect.sync(() => void started++), Effect.never)),
              Job.handler(Noop, () => Effect.void)
            ]
          })
          yield* queue.enqueueMany(Hang, Array.from({ length: 1000 }, () => ({})))
          yield* waitUntil(Effect.sync(() => started === 1000), 30_000, "1,000 jobs to start")
          // A lost worker's job, listed last (highest id; its worker id sorts after a UUID): the
          // worker row's heartbeat is long past the lease.
          const id = yield* queue.enqueue(Noop, { i: 1 }, { delay: "1 hour" })
          yield* leftRunning(prefix, id, "zzz-lost")
          yield* sql`UPDATE ${sql(prefix + "workers")} SET heartbeat_at = started_at - INTERVAL '1' HOUR WHERE id = ${"zzz-lost"}`
          yield* waitUntil(
            Effect.map(queue.get(id), (j) => j.state !== "running"),
            10_000,
            "the lost worker's job to be rescued"
          )
          const info = yield* queue.get(id)
          assert.strictEqual(info.errors[0]?.message, "worker lost")
        })), 60_000)

    // A lock connection cut on the client's side only (a network failure without a FIN): the server
    // still runs the old session, which holds the worker's lock. The worker ends that session (it
    // knows its connection id) and takes its lock again, instead of taking itself for a duplicate.
    it.live(name("a lock connection cut on the client's side while the server keeps its session: the worker ends that session, retakes its lock and goes on"), () =>
      Effect.gen(function*() {
        // A TCP proxy between the worker and the database whose client sides the test can cut while
        // the server sides stay open.
        const upstream = new URL(target.url)
        const pairs: Array<{ client: Net.Socket; server: Net.Socket }> = []
        const proxy = Net.createServer((client) => {
          const server = Net.connect(Number(upstream.port), upstream.hostname)
          client.pipe(server, { end: false })
          server.pipe(client, { end: false })
          client.on("error", () => {})
          server.on("error", () => client.destroy())
          pairs.push({ client, server })
        })
        yield* Effect.async<void>((resume) => void proxy.listen(0, "127.0.0.1", () => resume(Effect.void)))
        yield* Effect.addFinalizer(() =>
          Effect.sync(() => {
            for (const p of pairs) p.server.destroy()
            proxy.close()
          })
        )
        const proxied = new URL(target.url)
        proxied.port = String((proxy.address() as Net.AddressInfo).port)
        yield* withQueue({ ...target, url: proxied.toString() }, () =>
          Effect.gen(function*() {
            const queue = yield* Queue.Queue
            const ran: Array<number> = []
            yield* Worker.make({ id: "cut", handlers: [Job.handler(Noop, (p) => Effect.sync(() => ran.push(p.i)))] })
            yield* queue.enqueue(Noop, { i: 1 })
            yield* waitUntil(Effect.sync(() => ran.length === 1), 10_000, "the first job")
            yield* realSleep(300)
            // Cut every connection made so far on the client's side; the server keeps the sessions.
            for (const p of pairs.splice(0)) {
              p.client.unpipe(p.server)
              p.server.unpipe(p.client)
              p.client.destroy()
              pairs.push({ client: p.client, server: p.server })
            }
            yield* realSleep(2000)
            yield* queue.enqueue(Noop, { i: 2 })
            yield* waitUntil(Effect.sync(() => ran.length === 2), 10_000, "a job after the cut")
            const holder = yield* (yield* Database).driver.workerLockHolder("cut")
            assert.isNotNull(holder)
          }))
      }).pipe(Effect.scoped), 60_000)

    // A worker whose lock connection was cut took its lock again; if another process with the same
    // id took it first, the first worker's liveness ended quietly and it went on claiming, while the
    // other's rescuer saw those jobs as lost claims of its own.
    it.live(name("a worker whose id another live worker takes while it retakes its lock stops claiming"), () =>
      withQueue(target, () =>
        Effect.gen(function*() {
          const sql = (yield* SqlClient.SqlClient).withoutTransforms()
          const queue = yield* Queue.Queue
          const ran: Array<number> = []
          yield* Worker.make({ id: "dup", handlers: [Job.handler(Noop, (p) => Effect.sync(() => ran.push(p.i)))] })
          yield* queue.enqueue(Noop, { i: 1 })
          yield* waitUntil(Effect.sync(() => ran.length === 1), 10_000, "the first job")
          // Cut the worker's lock connection, and take its lock at once from another connection.
          const lockName = (yield* Database).driver.workerLockName("dup")
          const conn = yield* sql.reserve
          if (target.dialect === "pg") {
            const [holder] = yield* sql<{ pid: number }>`SELECT pid FROM pg_locks
              WHERE locktype = 'advisory' AND granted AND objsubid = 2 AND classid::bigint = ${0x5a1a7e}
                AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
                AND objid::bigint = (hashtext(${lockName})::bigint & 4294967295)`
            yield* sql`SELECT pg_terminate_backend(${holder.pid})`
            yield* conn.executeRaw("SELECT pg_advisory_lock($1, hashtext($2))", [0x5a1a7e, lockName])
          } else {
            const [holder] = yield* sql<{ conn: number }>`SELECT IS_USED_LOCK(${lockName}) AS conn`
            yield* sql.unsafe(`KILL CONNECTION ${Number(holder.conn)}`)
            yield* conn.executeRaw("SELECT GET_LOCK(?, 10)", [lockName])
          }
          yield* realSleep(1500)
          yield* queue.enqueue(Noop, { i: 2 })
          yield* realSleep(1500)
          assert.deepStrictEqual(ran, [1])
        })), 60_000)

    // `inflight` was keyed by job id alone: when this worker claimed the retry of a job whose earlier
    // attempt still ran here (another worker had rescued it as lost), the earlier attempt's end removed
    // the retry's entry, so neither a cancel nor shutdown interrupted the retry.
    it.live(name("an earlier attempt still running here when this worker claims the retry is stopped; the retry stays cancellable"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const sql = (yield* SqlClient.SqlClient).withoutTransforms()
          const queue = yield* Queue.Queue
          const starts: Array<number> = []
          const interrupted: Array<number> = []
          const worker = yield* Worker.make({
            handlers: [Job.handler(Hang, (_, job) =>
              Effect.sync(() => starts.push(job.attempt)).pipe(
                Effect.zipRight(Effect.never),
                Effect.onInterrupt(() => Effect.sync(() => interrupted.push(job.attempt)))
              ))]
          })
          const id = yield* queue.enqueue(Hang, {})
          yield* waitUntil(Effect.sync(() => starts.length === 1), 10_000, "attempt 1")
          // What another worker's rescue of attempt 1 leaves (as if this worker's lock had lapsed).
          yield* sql`UPDATE ${sql(prefix + "jobs")} SET state = 'pending', worker_id = NULL WHERE id = ${id}`
          yield* waitUntil(Effect.sync(() => starts.length === 2), 10_000, "attempt 2")
          yield* waitUntil(Effect.sync(() => interrupted.includes(1)), 5_000, "attempt 1 to be stopped")
          assert.isTrue(yield* queue.cancel(id))
          yield* waitUntil(Effect.sync(() => interrupted.includes(2)), 5_000, "the cancel to interrupt attempt 2")
          yield* waitUntil(Effect.map(worker.running, (n) => n === 0), 5_000, "the worker's slots to free")
          assert.deepStrictEqual(starts, [1, 2])
          assert.strictEqual((yield* queue.get(id)).state, "cancelled")
        }), { pollInterval: "100 millis" }), 60_000)

    it.live(name("a job running under this live worker's id, unknown to it (a claim whose answer was lost), is rescued by a sweep"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const sql = (yield* SqlClient.SqlClient).withoutTransforms()
          const queue = yield* Queue.Queue
          yield* Worker.make({ id: "web-2", handlers: [Job.handler(Noop, () => Effect.void)] })
          // Past the first two passes, which read every running job as a sweep does.
          yield* realSleep(500)
          const id = yield* queue.enqueue(Noop, { i: 1 }, { delay: "1 hour" })
          // What a claim leaves when its COMMIT was applied but the answer never reached the worker
          // (a connection cut during the COMMIT): the job running under the live worker's id,
          // claimed after the worker started, and no fiber running it.
          yield* sql`UPDATE ${sql(prefix + "jobs")} SET state = 'running', attempts = 1, worker_id = ${"web-2"},
            claimed_at = created_at, run_at = created_at WHERE id = ${id}`
          // No claim of the worker failed: the rescuer reads its own jobs in the sweep, every
          // `leaseTimeout` (2 s here).
          yield* waitUntil(Effect.map(queue.get(id), (j) => j.state === "completed"), 10_000, "the rescue")
          const info = yield* queue.get(id)
          // Its handler never ran: the claim is released, not counted as a failed attempt.
          assert.strictEqual(info.attempts, 1)
          assert.deepStrictEqual(info.errors, [])
        }), { rescueInterval: "100 millis", heartbeatInterval: "500 millis", leaseTimeout: "2 seconds" }))

    it.live(name("a lost claim is rescued while the worker drains a backlog (claims in flight at every pass)"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const sql = (yield* SqlClient.SqlClient).withoutTransforms()
          const queue = yield* Queue.Queue
          let done = 0
          yield* Worker.make({
            id: "web-3",
            concurrency: 4,
            handlers: [Job.handler(Noop, () => Effect.zipRight(realSleep(3), Effect.sync(() => done++)))]
          })
          const lost = yield* queue.enqueue(Noop, { i: -1 }, { delay: "1 hour" })
          yield* queue.enqueueMany(Noop, Array.from({ length: 12_000 }, (_, i) => ({ i })))
          yield* waitUntil(Effect.sync(() => done > 100), 10_000, "the backlog to start")
          yield* sql`UPDATE ${sql(prefix + "jobs")} SET state = 'running', attempts = 1, worker_id = ${"web-3"},
            claimed_at = created_at, run_at = created_at WHERE id = ${lost}`
          yield* waitUntil(Effect.map(queue.get(lost), (j) => j.state !== "running"), 10_000, "the rescue")
          // Rescued by a sweep (every `leaseTimeout`, 2 s here) before the backlog (12,000 jobs, 4 at a
          // time, at least 9 s) ran out.
          assert.isBelow(done, 12_000)
        }), { rescueInterval: "100 millis", heartbeatInterval: "500 millis", leaseTimeout: "2 seconds", pollInterval: "1 hour" }))

    it.live(name("two live workers cannot share an id; the one refused leaves the live one's row alone"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const sql = (yield* SqlClient.SqlClient).withoutTransforms()
          yield* Worker.make({ id: "twin", handlers: [Job.handler(Noop, () => Effect.void)] })
          const second = yield* Effect.exit(
            Effect.scoped(Worker.make({ id: "twin", handlers: [Job.handler(Noop, () => Effect.void)] }))
          )
          assert.isTrue(second._tag === "Failure")
          const error = second._tag === "Failure" ? Cause.failureOption(second.cause) : Option.none()
          assert.isTrue(Option.isSome(error) && error.value instanceof Errors.InvalidWorkerOptions, String(second))
          assert.deepStrictEqual(
            Option.map(error, (e) => [e.option, e.reason, e.message]),
            Option.some(["id", "inUse", "worker id \"twin\" is in use by another live worker; give each worker its own id"])
          )
          // The live worker's row, its heartbeat not moved to the epoch (which would make its jobs lost).
          const rows = yield* sql<{ id: string; year: number | string }>`SELECT id, ${
            sql.literal(target.dialect === "pg" ? "EXTRACT(YEAR FROM heartbeat_at)" : "YEAR(heartbeat_at)")
          } AS year FROM ${sql(prefix + "workers")}`
          assert.deepStrictEqual(rows.map((r) => r.id), ["twin"])
          assert.isAbove(Number(rows[0].year), 2000)
        })))

    it.live(name("an error message with U+0000 is recorded, and it stalls no other job"), () =>
      withQueue(target, () =>
        Effect.gen(function*() {
          const Nul = Job.make("nul", { payload: Schema.Struct({ bad: Schema.Boolean }), retry: Job.attempts(1) })
          yield* Worker.make({
            handlers: [Job.handler(Nul, (p) => (p.bad ? Effect.die(new Error("bad\u0000byte")) : Effect.void))]
          })
          const queue = yield* Queue.Queue
          const bad = yield* queue.enqueue(Nul, { bad: true })
          const good = yield* Effect.forEach([1, 2, 3], () => queue.enqueue(Nul, { bad: false }))
          yield* waitUntil(Effect.map(Effect.forEach([bad, ...good], queue.get), (js) =>
            js.every((j) => j.state === "dead" || j.state === "completed")))
          const info = yield* queue.get(bad)
          assert.strictEqual(info.state, "dead")
          assert.include(info.errors[0].message, "bad")
        })))

    it.live(name("claims work when every session runs at REPEATABLE READ"), () => {
      // PostgreSQL: every transaction of the pool defaults to REPEATABLE READ (serialization failures
      // in sqlane's statements are retried). MySQL/MariaDB: REPEATABLE READ is already the default.
      let rrTarget = target
      if (target.dialect === "pg") {
        const url = new URL(target.url)
        url.searchParams.set("options", "-c default_transaction_isolation=repeatable\\ read")
        rrTarget = { ...target, url: url.toString() }
      }
      return withQueue(rrTarget, () =>
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          const [row] = target.dialect === "pg"
            ? yield* sql<{ level: string }>`SELECT current_setting('transaction_isolation') AS level`
            : yield* sql<{ level: string }>`SELECT @@transaction_isolation AS level`.pipe(
              // MariaDB before 11.1 names it tx_isolation
              Effect.orElse(() => sql<{ level: string }>`SELECT @@tx_isolation AS level`)
            )
          assert.match(row.level.toLowerCase(), /repeatable.read/)
          const queue = yield* Queue.Queue
          const runs = new Map<number, number>()
          const handler = Job.handler(Noop, (p) => Effect.sync(() => runs.set(p.i, (runs.get(p.i) ?? 0) + 1)))
          yield* Worker.make({ handlers: [handler], concurrency: 8 })
          yield* Worker.make({ handlers: [handler], concurrency: 8 })
          yield* Effect.forEach(Array.from({ length: 10 }, (_, b) => b), (b) =>
            queue.enqueueMany(Noop, Array.from({ length: 30 }, (_, i) => ({ i: b * 30 + i }))), { concurrency: 4 })
          yield* waitUntil(Effect.sync(() => runs.size === 300), 30_000, "300 jobs")
          yield* realSleep(200)
          assert.deepStrictEqual(Array.from(runs.values()).filter((n) => n !== 1), [])
        }))
    }, 60_000)

    it.live(name("timeout: an attempt that cannot be interrupted and then succeeds (a COMMIT in flight) is completed, not run again"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          // The soak found it: a handler's transaction committed while its timeout fired (withTransaction
          // runs COMMIT uninterruptibly), the attempt was recorded as timed out, and the job ran twice.
          const sql = (yield* SqlClient.SqlClient).withoutTransforms()
          const ledger = yield* ledgerOf(prefix)
          const Committing = Job.make("committing", {
            payload: Schema.Struct({}),
            timeout: "200 millis",
            retry: Job.attempts(3, Schedule.spaced("10 millis"))
          })
          yield* Worker.make({
            handlers: [Job.handler(Committing, (_, ctx) =>
              // The timeout fires while the transaction cannot be interrupted (as while its COMMIT is in
              // flight: withTransaction runs it uninterruptibly); the transaction then commits.
              Effect.uninterruptible(sql.withTransaction(ledger.record(ctx.id, `attempt ${ctx.attempt}`).pipe(
                Effect.zipRight(realSleep(600))
              ))).pipe(Effect.orDie))]
          })
          const queue = yield* Queue.Queue
          const id = yield* queue.enqueue(Committing, {})
          yield* waitUntil(Effect.map(queue.get(id), (j) => j.state !== "pending" && j.state !== "running"), 20_000)
          const info = yield* queue.get(id)
          assert.strictEqual(info.state, "completed")
          assert.strictEqual(info.attempts, 1)
          assert.deepStrictEqual(info.errors, [])
          assert.strictEqual(yield* ledger.count(id), 1)
        })), 60_000)

    it.live(name("a worker's lock connection is terminated mid-job: it takes its lock again, and no other worker takes the job"), () =>
      withQueue(target, () =>
        Effect.gen(function*() {
          // The soak found it: a cut lock connection frees the worker's session lock, and another
          // worker's next rescue pass (within 500 ms) put the job back while its handler still ran.
          const sql = (yield* SqlClient.SqlClient).withoutTransforms()
          const queue = yield* Queue.Queue
          const runs: Array<string> = []
          const handler = (worker: string) =>
            Job.handler(Slow, () => Effect.sync(() => runs.push(worker)).pipe(Effect.zipRight(realSleep(3000))))
          yield* Worker.make({ id: "holder", handlers: [handler("holder")] })
          const id = yield* queue.enqueue(Slow, {})
          yield* waitUntil(Effect.sync(() => runs.length === 1), 10_000, "the job to start")
          yield* Worker.make({ id: "rescuer", handlers: [handler("rescuer")] })
          yield* realSleep(300)
          // Terminate the connection that holds the holder's session lock.
          const lockName = (yield* Database).driver.workerLockName("holder")
          const killed = target.dialect === "pg"
            ? yield* sql<{ ok: boolean }>`SELECT pg_terminate_backend(pid) AS ok FROM pg_locks
                WHERE locktype = 'advisory' AND granted AND objsubid = 2 AND classid::bigint = ${0x5a1a7e}
                  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
                  AND objid::bigint = (hashtext(${lockName})::bigint & 4294967295)`
            : yield* Effect.flatMap(sql<{ conn: number | null }>`SELECT IS_USED_LOCK(${lockName}) AS conn`, ([row]) =>
              row.conn === null ? Effect.succeed([]) : Effect.as(sql.unsafe(`KILL CONNECTION ${Number(row.conn)}`), [row]))
          assert.strictEqual(killed.length, 1)
          yield* waitUntil(Effect.map(queue.get(id), (j) => j.state === "completed"), 20_000, "the job to complete")
          const info = yield* queue.get(id)
          assert.strictEqual(info.attempts, 1)
          assert.deepStrictEqual(info.errors, [])
          assert.deepStrictEqual(runs, ["holder"])
        })), 60_000)

    it.live(name("a worker's lock connection is terminated again and again during a 2.5 s job: it keeps the job, which runs once"), () =>
      withQueue(target, () =>
        Effect.gen(function*() {
          // Each cut frees the lock until the worker notices and takes it again (on a new connection):
          // a rescuer that took a free lock seen twice, or seen over a grace that spans two cuts, for a
          // dead worker's would take the job from the live one.
          const queue = yield* Queue.Queue
          const runs: Array<string> = []
          const handler = (worker: string) =>
            Job.handler(Slow, () => Effect.sync(() => runs.push(worker)).pipe(Effect.zipRight(realSleep(2500))))
          yield* Worker.make({ id: "holder", handlers: [handler("holder")] })
          const id = yield* queue.enqueue(Slow, {})
          yield* waitUntil(Effect.sync(() => runs.length === 1), 10_000, "the job to start")
          yield* Worker.make({ id: "rescuer", handlers: [handler("rescuer")] })
          let cuts = 0
          while ((yield* queue.get(id)).state === "running") {
            if (yield* cutLockConnection(target, "holder")) cuts++
            // 100–400 ms apart: some cuts come while the worker still takes its lock again.
            yield* realSleep(100 + Math.floor(Math.random() * 300))
          }
          assert.isAtLeast(cuts, 4)
          yield* waitUntil(Effect.map(queue.get(id), (j) => j.state === "completed"), 20_000, "the job to complete")
          const info = yield* queue.get(id)
          assert.strictEqual(info.attempts, 1)
          assert.deepStrictEqual(info.errors, [])
          assert.deepStrictEqual(runs, ["holder"])
        })), 60_000)

    it.live(name("a free lock whose worker's row says it is taking its lock again waits for the passes; a changing relocks count holds off both rules"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          // Three workers gone (their locks free, their rows fresh): "plain", "marked" (its row says
          // `relocking`), and "bumped" (its row's `relocks` changes all the time, as when it keeps taking
          // its lock again). Passes every 2 s: the quick rule (1 s after the first sight) takes only
          // "plain"; the pass rule (the third pass in a row, 4 s) takes "marked".
          const sql = (yield* SqlClient.SqlClient).withoutTransforms()
          const workers = sql(prefix + "workers")
          const queue = yield* Queue.Queue
          const [plain, marked, bumped] = yield* queue.enqueueMany(Noop, [{ i: 1 }, { i: 2 }, { i: 3 }], { delay: "1 hour" })
          yield* leftRunning(prefix, plain, "plain")
          yield* leftRunning(prefix, marked, "marked")
          yield* leftRunning(prefix, bumped, "bumped")
          yield* sql`UPDATE ${workers} SET relocking = TRUE WHERE id = ${"marked"}`
          let bumping = true
          yield* Effect.forkScoped(Effect.gen(function*() {
            while (bumping) {
              yield* sql`UPDATE ${workers} SET relocks = relocks + 1 WHERE id = ${"bumped"}`
              yield* realSleep(50)
            }
          }))
          const state = (id: string) => Effect.map(queue.get(id), (j) => j.state)
          yield* Worker.make({ handlers: [Job.handler(Noop, () => Effect.void)] })
          yield* realSleep(1800)
          // "plain" rescued (and run since), the other two not yet.
          assert.deepStrictEqual(
            [(yield* state(plain)) !== "running", yield* state(marked), yield* state(bumped)],
            [true, "running", "running"]
          )
          bumping = false
          yield* waitUntil(
            Effect.map(Effect.all([state(marked), state(bumped)]), (s) => s.every((x) => x !== "running")),
            20_000,
            "the rescue of the other two"
          )
          for (const id of [plain, marked, bumped]) {
            const info = yield* queue.get(id)
            assert.deepStrictEqual(info.errors.map((e) => [e.attempt, e.kind, e.message]), [[1, "lost", "worker lost"]])
          }
        }), { rescueInterval: "2 seconds", pollInterval: "1 hour" }), 60_000)

    it.live(name("a worker process that took its lock again after a cut and is then SIGKILLed: its job is rescued"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const sql = (yield* SqlClient.SqlClient).withoutTransforms()
          const ledger = yield* ledgerOf(prefix)
          const queue = yield* Queue.Queue
          const id = yield* queue.enqueue(Hang, {})
          const child = yield* spawnWorker(args("hang", prefix, "victim"))
          yield* waitUntil(Effect.map(ledger.count(id), (n) => n === 1), 30_000, "the child to start the job")
          const [{ worker_id: victim }] = yield* sql<{ worker_id: string }>`SELECT worker_id FROM ${sql(prefix + "jobs")}
            WHERE id = ${id}`
          let restarted = 0
          yield* Worker.make({ handlers: [Job.handler(Hang, () => Effect.sync(() => void restarted++))] })
          // Cut the child's lock connection; it takes its lock again and keeps its job.
          assert.isTrue(yield* cutLockConnection(target, victim))
          const relocks = sql<{ relocks: number; relocking: unknown }>`SELECT relocks, relocking FROM ${sql(prefix + "workers")}
            WHERE id = ${victim}`
          yield* waitUntil(Effect.map(relocks, ([w]) => Number(w.relocks) === 1), 10_000, "the child to take its lock again")
          assert.strictEqual(Number((yield* relocks)[0].relocking), 0)
          yield* realSleep(1500)
          assert.strictEqual((yield* queue.get(id)).state, "running")
          assert.strictEqual(restarted, 0)
          child.process.kill("SIGKILL")
          yield* waitUntil(Effect.sync(() => restarted > 0), 20_000, "the job to start again")
          yield* waitUntil(Effect.map(queue.get(id), (j) => j.state === "completed"))
          const info = yield* queue.get(id)
          assert.strictEqual(info.attempts, 2)
          assert.deepStrictEqual(info.errors.map((e) => [e.attempt, e.kind, e.message]), [[1, "lost", "worker lost"]])
        })), 90_000)

    if (target.dialect === "pg") {
      it.live(name("the LISTEN connection is terminated: jobs still start, NOTIFY works again after the reconnect, which the app's logger hears of"), () => {
        // The app's logger, around the layers: sqlane's log lines reach it, also the one written
        // from the LISTEN client's callback.
        const logged: Array<string> = []
        const appLogger = Logger.replace(
          Logger.defaultLogger,
          Logger.make(({ message }) => void logged.push((Array.isArray(message) ? message : [message]).map(String).join(" ")))
        )
        return withQueue(target, (prefix) =>
          Effect.gen(function*() {
            const sql = (yield* SqlClient.SqlClient).withoutTransforms()
            const started: Array<number> = []
            yield* Worker.make({ handlers: [Job.handler(Noop, (p) => Effect.sync(() => started.push(p.i)))] })
            yield* realSleep(500)
            const terminated = yield* sql<{ ok: boolean }>`SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity
              WHERE application_name = ${`sqlane-listen:${prefix}jobs`.slice(0, 63)}`
            assert.strictEqual(terminated.length, 1)
            // another process enqueues (no in-process hint): the reconnect's re-probe or the poll finds it
            const first = yield* spawnWorker(args("enqueue", prefix, "producer", "1"))
            assert.strictEqual(yield* awaitExit(first), 0)
            yield* waitUntil(Effect.sync(() => started.length === 1), 15_000, "the first job")
            yield* realSleep(500)
            const before = Date.now()
            const second = yield* spawnWorker(args("enqueue", prefix, "producer", "1"))
            assert.strictEqual(yield* awaitExit(second), 0)
            yield* waitUntil(Effect.sync(() => started.length === 2), 15_000, "the second job")
            // The poll is 1 hour: only a NOTIFY on the new LISTEN connection starts the second job.
            assert.isBelow(Date.now() - before, 15_000)
            yield* waitUntil(Effect.sync(() => logged.includes("sqlane: LISTEN re-established")), 5_000, "the log line")
          }), { pollInterval: "1 hour" }).pipe(Effect.provide(appLogger))
      }, 60_000)
    }
  })
}
