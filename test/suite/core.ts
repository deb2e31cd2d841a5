/**
 * The core suite: what sqlane does for its users (enqueue, claims, workers, retries, migrations,
 * the notifier), run against every database (see test/*.test.ts). Every test name carries the
 * database id, e.g. `[postgres-15]`.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Statement from "@effect/sql/Statement"
import { assert, describe, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Queue_ from "effect/Queue"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import * as TestClock from "effect/TestClock"
import * as Tracer from "effect/Tracer"
import Pg from "pg"
import * as MysqlMigrations from "../../src/internal/driver/mysql/migrations.js"
import * as PgMigrations from "../../src/internal/driver/pg/migrations.js"
import { Database } from "../../src/internal/Database.js"
import { Facts } from "../../src/internal/facts.js"
import { nowMicros } from "../../src/internal/time.js"
import * as Claimer from "../../src/services/Claimer.js"
import * as Completer from "../../src/services/Completer.js"
import * as MysqlText from "../../src/internal/mysqlText.js"
import { endKey } from "../../src/internal/driver/shared.js"
import { Admin, Errors, Events, Job, Migrations, Notifier, Queue, Worker } from "../../src/index.js"
import { waitFor } from "../../src/testing.js"
import { countingRides, countJobs, dropTables, holdJobRow, realSleep, testLayer, waitUntil, withQueue } from "../support/helpers.js"
import { clientLayer, type Target, uniquePrefix } from "../support/targets.js"

import { Noop } from "../support/jobs.js"
import { awaitExit, spawnWorker } from "../support/processes.js"

class Flaky extends Schema.TaggedError<Flaky>()("Flaky", { reason: Schema.String }) {}

/** Runs test/support/worker-process.ts in a child process; succeeds with its exit code. */
export const runProcess = (args: ReadonlyArray<string>, env: Record<string, string> = {}) =>
  Effect.scoped(Effect.flatMap(spawnWorker(args, env), awaitExit))

/** The end of a claimed attempt, completed at `finishedAtUs` (µs), for statement-level tests. */
const completedEnd = (row: { readonly id: string; readonly attempts: number }, finishedAtUs: number) => ({
  id: row.id,
  attempt: row.attempts,
  state: "completed" as const,
  runAtUs: null,
  finishedAtUs,
  lastError: null,
  errors: null,
  result: null
})

export const core = (target: Target) => {
  const name = (title: string) => `[${target.id}] ${title}`

  describe(`core [${target.id}]`, () => {
    it.live(name("migrations run from several connections at once, once"), () =>
      Effect.gen(function*() {
        const prefix = uniquePrefix("mig")
        const runs = yield* Effect.all(
          Array.from({ length: 4 }, () => Migrations.run(prefix).pipe(Effect.provide(clientLayer(target)))),
          { concurrency: "unbounded" }
        )
        // Exactly one of the four runs applied the migrations; the others found nothing to do.
        const applied = runs.filter((r) => r.length > 0)
        assert.strictEqual(applied.length, 1)
        // Every migration of this dialect, in order (1_create_jobs, 2_workers, …).
        const known = Object.keys((target.dialect === "pg" ? PgMigrations : MysqlMigrations).migrations(prefix))
          .map((key) => Number(key.split("_")[0])).sort((a, b) => a - b)
        assert.deepStrictEqual(applied[0].map(([id]) => id), known)
        assert.deepStrictEqual(known.slice(0, 2), [1, 2])
        const sql = (yield* SqlClient.SqlClient).withoutTransforms()
        const rows = yield* sql<{ n: number }>`SELECT COUNT(*) AS n FROM ${sql(prefix + "migrations")}`
        assert.strictEqual(Number(rows[0].n), known.length)
        yield* dropTables(prefix)
      }).pipe(Effect.provide(clientLayer(target))))

    it.live(name("an invalid table prefix is refused with a typed error"), () =>
      Effect.gen(function*() {
        // Uppercase letters too: PostgreSQL's migrator looked the table up folded to lowercase, and
        // the migration's transaction failed.
        for (const bad of ["bad-prefix; DROP", "Q_upper_"]) {
          const exit = yield* Effect.exit(Migrations.run(bad))
          assert.isTrue(Exit.isFailure(exit))
          if (Exit.isFailure(exit)) {
            const error = exit.cause._tag === "Fail" ? exit.cause.error : undefined
            assert.strictEqual((error as any)?._tag, "SetupError")
            assert.include((error as any)?.message, "lowercase letters")
          }
        }
      }).pipe(Effect.provide(clientLayer(target))))

    it.live(name("enqueue in a transaction that rolls back leaves no job; one that commits leaves one"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          const queue = yield* Queue.Queue
          const rolledBack = yield* queue.enqueue(Noop, { i: 1 }).pipe(
            Effect.zipRight(Effect.fail("payment declined" as const)),
            sql.withTransaction,
            Effect.flip
          )
          assert.strictEqual(rolledBack, "payment declined")
          assert.strictEqual(yield* countJobs(prefix), 0)
          const id = yield* sql.withTransaction(queue.enqueue(Noop, { i: 2 }))
          assert.strictEqual(yield* countJobs(prefix), 1)
          const info = yield* queue.get(id)
          assert.strictEqual(info.state, "pending")
          assert.deepStrictEqual(info.payload, { i: 2 })
        })))

    it.live(name("a worker started inside the caller's transaction claims outside it: a job that transaction enqueued runs once it commits, not before"), () =>
      withQueue(target, () =>
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          const queue = yield* Queue.Queue
          let ran = 0
          const scope = yield* Effect.scope
          yield* sql.withTransaction(Effect.gen(function*() {
            yield* queue.enqueue(Noop, { i: 1 })
            // The worker outlives the transaction (it runs in the test's scope).
            yield* Worker.make({ handlers: [Job.handler(Noop, () => Effect.sync(() => void ran++))], concurrency: 2 }).pipe(
              Scope.extend(scope)
            )
            yield* realSleep(500)
            // On the transaction's connection its claim would see the uncommitted job and run it.
            assert.strictEqual(ran, 0, "a job of an uncommitted transaction ran")
          }))
          yield* waitUntil(Effect.sync(() => ran === 1), 10_000, "the job to run once its transaction committed")
        })))

    // The hot statements may run directly on their connection (`runner`, internal/driver/run.ts): it must be
    // the caller's transaction's, and a statement transformer or a tracer must still see them.
    it.live(name("enqueueMany and a unique-key enqueue roll back with the caller's transaction; transformers and tracers see the statements"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          const queue = yield* Queue.Queue
          const rolledBack = yield* Effect.gen(function*() {
            yield* queue.enqueueMany(Noop, [{ i: 1 }, { i: 2 }, { i: 3 }])
            yield* queue.enqueue(Noop, { i: 4 }, { unique: "only-one" })
            assert.strictEqual(yield* countJobs(prefix), 4) // seen inside the transaction
            return yield* Effect.fail("rolled back" as const)
          }).pipe(sql.withTransaction, Effect.flip)
          assert.strictEqual(rolledBack, "rolled back")
          assert.strictEqual(yield* countJobs(prefix), 0)
          // The key was never held: a new job takes it.
          const first = yield* queue.enqueue(Noop, { i: 5 }, { unique: "only-one" })
          assert.strictEqual(yield* countJobs(prefix), 1)

          // A transformer set by the app is applied to sqlane's statements too.
          const seen: Array<string> = []
          const transformed = yield* queue.enqueue(Noop, { i: 6 }).pipe(
            Statement.withTransformer((statement) =>
              Effect.sync(() => {
                seen.push(statement.compile()[0])
                return statement
              })
            )
          )
          assert.isTrue(seen.some((text) => text.includes(`${prefix}jobs`)), JSON.stringify(seen))
          // A tracer other than Effect's built-in one gets a `sql.execute` span per statement.
          const spans: Array<string> = []
          const base = yield* Effect.tracer
          const tracer = Tracer.make({
            span: (name, ...rest) => {
              spans.push(name)
              return base.span(name, ...rest)
            },
            context: base.context
          })
          yield* Effect.withTracer(queue.enqueueMany(Noop, [{ i: 7 }, { i: 8 }]), tracer)
          assert.include(spans, "sql.execute")
          assert.strictEqual(yield* countJobs(prefix), 4)
          assert.notStrictEqual(first, transformed)
        })))

    it.live(name("enqueueMany of 1,000 jobs returns their ids in order"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const queue = yield* Queue.Queue
          const ids = yield* queue.enqueueMany(Noop, Array.from({ length: 1000 }, (_, i) => ({ i })))
          assert.strictEqual(ids.length, 1000)
          assert.strictEqual(new Set(ids).size, 1000)
          assert.strictEqual(yield* countJobs(prefix, "pending"), 1000)
          for (const i of [0, 1, 255, 256, 511, 999]) {
            assert.deepStrictEqual((yield* queue.get(ids[i])).payload, { i })
          }
        })))

    it.live(name("enqueueMany keeps every payload as written: quotes, backslashes, braces, control characters"), () =>
      withQueue(target, () =>
        Effect.gen(function*() {
          const Text = Job.make("text", { payload: Schema.Struct({ s: Schema.String }) })
          const texts = [
            "",
            "plain",
            "\"quoted\" and 'single'",
            "back\\slash \\\" and \\u0041",
            "{braces}, [brackets], commas",
            "line\nbreak\ttab\r",
            "control \u0001 \u001e \u001f characters",
            "unicode: ünïcødé 漢字 🎉",
            "NULL"
          ]
          const queue = yield* Queue.Queue
          const ids = yield* queue.enqueueMany(Text, texts.map((s) => ({ s })))
          for (const [i, s] of texts.entries()) {
            assert.deepStrictEqual((yield* queue.get(ids[i])).payload, { s })
          }
        })))

    if (target.dialect === "mysql") {
      it.live(name("under sql_mode NO_BACKSLASH_ESCAPES (and ANSI_QUOTES), statements sent as text keep quotes and backslashes: enqueueMany, claim, completion, due count, orphans, Admin.list"), () =>
        withQueue(target, () =>
          Effect.gen(function*() {
            const sql = (yield* SqlClient.SqlClient).withoutTransforms()
            const nasty = ["back\\slash", "quote ' and \\' and \\\\'", "\\%_ and %", "nul \u0000 byte", "'; DROP TABLE x; --", "? ?? \"\\n\"",
              // Over 1,024 backslashes: the literal is cut into pieces joined by CONCAT.
              "\\".repeat(1500) + "x'\\%" + "é😀\\".repeat(1100)]
            // Both connections of the pool (held at once by the SLEEP) get the modes.
            const modes = "NO_BACKSLASH_ESCAPES,ANSI_QUOTES"
            const onBoth = (text: string) =>
              Effect.all([0, 1].map(() => sql.unsafe<any>(`${text}, SLEEP(0.3)`).unprepared), { concurrency: 2 })
            yield* onBoth(`SET SESSION sql_mode = CONCAT(@@GLOBAL.sql_mode, ',${modes}'); SELECT 1`)
            for (const s of nasty) {
              const [{ v }] = yield* sql.unsafe<{ v: string }>(`SELECT ${MysqlText.literal(s)} AS v`).unprepared
              assert.strictEqual(v, s)
              assert.strictEqual(MysqlText.literalBytes(s), Buffer.byteLength(MysqlText.literal(s)))
            }
            const { driver } = yield* Database
            const queue = yield* Queue.Queue
            const Odd = Job.make("odd\\name'", { payload: Schema.Struct({ s: Schema.String }) })
            const ids = yield* queue.enqueueMany(Odd, nasty.map((s) => ({ s })))
            for (const [i, s] of nasty.entries()) assert.deepStrictEqual((yield* queue.get(ids[i])).payload, { s })
            const listed = yield* (yield* Admin.Admin).list({ name: Odd.name })
            assert.deepStrictEqual(listed.map((j) => j.id).sort(), [...ids].sort())
            const laterUs = (yield* nowMicros) + 1_000_000
            assert.deepStrictEqual(yield* driver.jobCountDue([Odd.name], laterUs, 100), [{ name: Odd.name, due: nasty.length }])
            const worker = "w\\'1"
            const claimed = yield* driver.jobClaim([{ name: Odd.name, priority: 0 }], 100, laterUs, worker)
            assert.strictEqual(claimed.length, nasty.length)
            const orphans = yield* driver.jobListOrphaned([Odd.name], 0, worker, 100)
            assert.strictEqual(orphans.length, nasty.length)
            yield* driver.jobFinishMany(ids.map((id, i) => ({
              id,
              attempt: 1,
              state: "completed" as const,
              runAtUs: null,
              finishedAtUs: laterUs,
              lastError: nasty[i],
              errors: JSON.stringify([nasty[i]]),
              result: nasty[i]
            })))
            for (const [i, id] of ids.entries()) {
              const row = yield* driver.jobGet(id)
              assert.strictEqual(row?.state, "completed")
              assert.strictEqual(row?.result, nasty[i])
              assert.strictEqual(row?.lastError, nasty[i])
            }
            // The modes were in force on both connections throughout.
            for (const [r] of yield* onBoth("SELECT @@SESSION.sql_mode AS m")) {
              assert.include(r.m, "NO_BACKSLASH_ESCAPES")
              assert.include(r.m, "ANSI_QUOTES")
            }
          }), { maxConnections: 2 }))
    }

    it.live(name("one completion write and one due count take values with and without backslashes and quotes together"), () =>
      withQueue(target, () =>
        Effect.gen(function*() {
          const { driver } = yield* Database
          const Mixed = Job.make("mixed", { payload: Schema.Struct({ n: Schema.Number }) })
          const queue = yield* Queue.Queue
          const ids = yield* queue.enqueueMany(Mixed, [{ n: 1 }, { n: 2 }, { n: 3 }])
          const nowUs = (yield* nowMicros)
          const claimed = yield* driver.jobClaim([{ name: Mixed.name, priority: 0 }], 10, nowUs, "w-mixed")
          assert.strictEqual(claimed.length, 3)
          // JSON of a string with a quote or a line break holds a backslash; the others do not.
          const results = [JSON.stringify({ s: "a \"quoted\" word" }), JSON.stringify({ s: "plain" }), "{\"s\":\"it's\"}"]
          yield* driver.jobFinishMany(ids.map((id, i) => ({
            id,
            attempt: 1,
            state: "completed" as const,
            runAtUs: null,
            finishedAtUs: nowUs,
            lastError: null,
            errors: null,
            result: results[i]
          })))
          for (const [i, id] of ids.entries()) {
            const row = yield* driver.jobGet(id)
            assert.strictEqual(row?.state, "completed")
            assert.strictEqual(row?.result, results[i])
          }
          const Odd = Job.make("odd\\due'", { payload: Schema.Struct({}) })
          yield* queue.enqueue(Odd, {})
          const due = yield* driver.jobCountDue(["plain-due", Odd.name], (yield* nowMicros) + 1_000_000, 100)
          assert.deepStrictEqual([...due].sort((a, b) => a.name.localeCompare(b.name)), [
            { name: Odd.name, due: 1 },
            { name: "plain-due", due: 0 }
          ].sort((a, b) => a.name.localeCompare(b.name)))
        })))

    it.live(name("a ride's claim leaves the jobs its own ends put back to pending (released) for a later claim"), () =>
      withQueue(target, () =>
        Effect.gen(function*() {
          // On MySQL/MariaDB the claim's locking reads run after the ends in one transaction and see
          // them; PostgreSQL's one statement reads one snapshot. Both must leave such a job alone.
          const { driver } = yield* Database
          assert.isDefined(driver.jobFinishManyAndClaim)
          const queue = yield* Queue.Queue
          const [first, second] = yield* queue.enqueueMany(Noop, [{ i: 1 }, { i: 2 }])
          const group = [{ name: Noop.name, priority: 0 }]
          const nowUs = (yield* nowMicros) + 1_000_000
          const claimed = yield* driver.jobClaim(group, 1, nowUs, "w-ride")
          assert.deepStrictEqual(claimed.map((r) => r.id), [first])
          // The release puts the first job back, due and first in claim order, at its attempt 0.
          const rode = yield* driver.jobFinishManyAndClaim!([{
            id: first,
            attempt: 1,
            state: "released",
            runAtUs: null,
            finishedAtUs: null,
            lastError: null,
            errors: null,
            result: null
          }], group, 2, nowUs, "w-ride")
          assert.deepStrictEqual(rode.claimed.map((r) => [r.id, r.attempts]), [[second, 1]])
          assert.strictEqual(rode.stale.size, 0)
          const row = yield* driver.jobGet(first)
          assert.strictEqual(row?.state, "pending")
          assert.strictEqual(row?.attempts, 0)
          const later = yield* driver.jobClaim(group, 2, nowUs, "w-ride")
          assert.deepStrictEqual(later.map((r) => [r.id, r.attempts]), [[first, 1]])
        })))

    for (const deleted of [false, true]) {
      it.live(
        name(`a write of ends reports the ends of stale attempts and writes the others${
          deleted ? " (retention.completed 0)" : ""
        }`),
        () =>
          withQueue(target, () =>
            Effect.gen(function*() {
              // A job cancelled (or rescued) while its attempt ran: the attempt's end changes nothing,
              // and the worker must know it (no Completed event, no count). Alone, on a ride that
              // claims nothing, and on a ride that claims.
              const { driver } = yield* Database
              const queue = yield* Queue.Queue
              yield* queue.enqueueMany(Noop, [1, 2, 3, 4, 5, 6].map((i) => ({ i })))
              const group = [{ name: Noop.name, priority: 0 }]
              const nowUs = (yield* nowMicros) + 1_000_000
              const [a, b, c, d, e, f] = yield* driver.jobClaim(group, 6, nowUs, "w-stale")
              assert.isTrue(yield* queue.cancel(a.id))
              assert.isTrue(yield* queue.cancel(d.id))
              type Row = typeof a
              const end = (row: Row, state: "completed" | "pending" | "dead" | "released" = "completed", attempt = row.attempts) => ({
                id: row.id,
                attempt,
                state,
                runAtUs: state === "pending" ? nowUs + 60_000_000 : null,
                finishedAtUs: state === "completed" || state === "dead" ? nowUs : null,
                lastError: state === "completed" ? null : "failed",
                errors: null,
                result: null
              })
              const keys = (set: ReadonlySet<string>) => Array.from(set).sort()
              // Two ends of c in one batch: the one of a wrong attempt is stale.
              const alone = yield* driver.jobFinishMany([end(a), end(b), end(c, "dead", 2), end(c), end(e, "pending")])
              assert.deepStrictEqual(keys(alone), [endKey(a.id, 1), endKey(c.id, 2)].sort())
              // Read back by value (for a batch that may have committed unseen): the same answer.
              assert.deepStrictEqual(
                keys(yield* driver.jobEndsNotHeld([end(a), end(b), end(c, "dead", 2), end(c), end(e, "pending")])),
                [endKey(a.id, 1), endKey(c.id, 2)].sort()
              )
              // Every end stale, and every end written.
              assert.deepStrictEqual(keys(yield* driver.jobFinishMany([end(a)])), [endKey(a.id, 1)])
              const [j] = yield* queue.enqueueMany(Noop, [{ i: 10 }], { priority: 2 })
              const [claimedJ] = yield* driver.jobClaim([{ name: Noop.name, priority: 2 }], 1, nowUs, "w-stale")
              assert.strictEqual(claimedJ.id, j)
              assert.deepStrictEqual(keys(yield* driver.jobFinishMany([end(claimedJ)])), [])
              // A ride with nothing due to claim (e is due in a minute).
              const idle = yield* driver.jobFinishManyAndClaim!([end(d), end(f, "dead")], group, 2, nowUs, "w-stale")
              assert.deepStrictEqual(idle.claimed, [])
              assert.deepStrictEqual(keys(idle.stale), [endKey(d.id, 1)])
              // A ride with a stale end (g's, a wrong attempt) and a job to claim (h): PostgreSQL claims
              // it; MySQL/MariaDB write the ends alone then (their rows locked first) and claim nothing.
              const [g, h] = yield* queue.enqueueMany(Noop, [{ i: 7 }, { i: 8 }])
              const [claimedG] = yield* driver.jobClaim(group, 1, nowUs, "w-stale")
              assert.strictEqual(claimedG.id, g)
              const rode = yield* driver.jobFinishManyAndClaim!([end(claimedG, "completed", 5)], group, 1, nowUs, "w-stale")
              assert.deepStrictEqual(rode.claimed.map((r) => r.id), target.dialect === "pg" ? [h] : [])
              assert.deepStrictEqual(keys(rode.stale), [endKey(g, 5)])
              const [claimedH] = target.dialect === "pg" ? rode.claimed : yield* driver.jobClaim(group, 1, nowUs, "w-stale")
              assert.strictEqual(claimedH.id, h)
              const rodeWritten = yield* driver.jobFinishManyAndClaim!([end(claimedG), end(claimedH, "released")], group, 1, nowUs, "w-stale")
              assert.deepStrictEqual(keys(rodeWritten.stale), [])
              assert.deepStrictEqual(rodeWritten.claimed, [])
              // A release beside a stale end.
              const [i] = yield* queue.enqueueMany(Noop, [{ i: 9 }], { priority: 1 })
              const [claimedI] = yield* driver.jobClaim([{ name: Noop.name, priority: 1 }], 1, nowUs, "w-stale")
              assert.strictEqual(claimedI.id, i)
              assert.deepStrictEqual(keys(yield* driver.jobFinishMany([end(claimedI, "released"), end(a)])), [endKey(a.id, 1)])
              const state = (id: string) => Effect.map(driver.jobGet(id), (r) => r?.state ?? "gone")
              assert.deepStrictEqual(
                yield* Effect.forEach([a, b, c, d, e, f].map((r) => r.id), state),
                ["cancelled", deleted ? "gone" : "completed", deleted ? "gone" : "completed", "cancelled", "pending", "dead"]
              )
              assert.deepStrictEqual(yield* Effect.forEach([g, h, i], state), [deleted ? "gone" : "completed", "pending", "pending"])
              assert.strictEqual((yield* driver.jobGet(i))?.attempts, 0)
              // Another attempt ended the job first (with retention.completed 0 its end deleted the row).
              const [k] = yield* queue.enqueueMany(Noop, [{ i: 11 }], { priority: 3 })
              const groupK = [{ name: Noop.name, priority: 3 }]
              const [k1] = yield* driver.jobClaim(groupK, 1, nowUs, "w-stale")
              assert.isTrue(yield* queue.cancel(k))
              assert.isTrue(yield* queue.retry(k))
              const [k2] = yield* driver.jobClaim(groupK, 1, nowUs, "w-stale")
              assert.deepStrictEqual([k1.id, k1.attempts, k2.id, k2.attempts], [k, 1, k, 2])
              assert.deepStrictEqual(keys(yield* driver.jobFinishMany([end(k2)])), [])
              assert.deepStrictEqual(keys(yield* driver.jobFinishMany([end(k1)])), [endKey(k, 1)])
              const late = yield* driver.jobFinishManyAndClaim!([end(k1)], groupK, 1, nowUs, "w-stale")
              assert.deepStrictEqual(keys(late.stale), [endKey(k, 1)])
              assert.strictEqual(yield* state(k), deleted ? "gone" : "completed")
            }), deleted ? { retention: { completed: 0 } } : {})
      )
    }

    it.live(name("two ends of one attempt queued at once (two workers rescued one job): one changes the job, one is stale"), () =>
      withQueue(target, () =>
        Effect.gen(function*() {
          // A write tells its stale ends by attempt: the completer must not put both in one write.
          const { driver } = yield* Database
          const completer = yield* Completer.Completer
          const queue = yield* Queue.Queue
          const [id] = yield* queue.enqueueMany(Noop, [{ i: 1 }])
          const [row] = yield* driver.jobClaim([{ name: Noop.name, priority: 0 }], 1, (yield* nowMicros) + 1_000_000, "w-dup")
          assert.strictEqual(row.id, id)
          const changed: Array<boolean> = []
          const done = yield* Deferred.make<void>()
          yield* Effect.sync(() => {
            for (const delayUs of [60_000_000, 120_000_000]) {
              completer.submit({
                id,
                attempt: 1,
                state: "pending",
                runAtUs: Date.now() * 1000 + delayUs,
                finishedAtUs: null,
                lastError: "worker lost",
                errors: null,
                result: null
              }, (c) => {
                changed.push(c !== false)
                if (changed.length === 2) Deferred.unsafeDone(done, Exit.void)
              })
            }
          })
          yield* Deferred.await(done).pipe(Effect.timeout("10 seconds"))
          assert.deepStrictEqual(changed, [true, false])
          const info = yield* queue.get(id)
          assert.deepStrictEqual([info.state, info.attempts], ["pending", 1])
        })))

    it.live(name("pruning stale workers waits for no transaction that holds job rows"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          // On MySQL/MariaDB a DELETE whose subquery reads the jobs table locked every row it read:
          // the prune waited for any claim, ride or enqueue in flight (and blocked them).
          const { driver } = yield* Database
          const sql = (yield* SqlClient.SqlClient).withoutTransforms()
          const queue = yield* Queue.Queue
          const [first] = yield* queue.enqueueMany(Noop, [{ i: 1 }, { i: 2 }])
          yield* driver.workerRegister("w-stale", 0, "host", 1)
          yield* driver.workerRegister("w-busy", 0, "host", 2)
          const nowUs = (yield* nowMicros) + 1_000_000
          assert.strictEqual((yield* driver.jobClaim([{ name: Noop.name, priority: 0 }], 1, nowUs, "w-busy")).length, 1)
          const release = yield* holdJobRow(prefix, first)
          const pruned = yield* driver.workerPrune(nowUs).pipe(Effect.timeout("3 seconds"), Effect.exit)
          yield* release
          assert.isTrue(Exit.isSuccess(pruned), "the prune finished while another transaction held a job row")
          const left = yield* sql<{ id: string }>`SELECT id FROM ${sql(prefix + "workers")} ORDER BY id`
          // The stale worker without running jobs is gone; the one with a running job stays.
          assert.deepStrictEqual(left.map((r) => r.id), ["w-busy"])
        }), { maxConnections: 4 }))

    it.live(name("with retention.completed 0, one job's end waits for no lock on another running job's row"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          // On MariaDB a lone `(id, attempts) IN ((?, ?))` reads no key: the delete scanned (and
          // locked) every running row, so it waited for any transaction holding one of them.
          const { driver } = yield* Database
          const sql = (yield* SqlClient.SqlClient).withoutTransforms()
          const jobs = sql(prefix + "jobs")
          const queue = yield* Queue.Queue
          yield* queue.enqueueMany(Noop, [{ i: 1 }, { i: 2 }, { i: 3 }])
          // Many pending jobs beside three running ones: the plan MariaDB prefers for `state = 'running'`.
          yield* queue.enqueueMany(Noop, Array.from({ length: 500 }, (_, i) => ({ i })), { delay: "1 hour" })
          if (target.dialect === "mysql") yield* sql`ANALYZE TABLE ${jobs}`.unprepared
          const nowUs = (yield* nowMicros) + 1_000_000
          const claimed = yield* driver.jobClaim([{ name: Noop.name, priority: 0 }], 3, nowUs, "w")
          assert.strictEqual(claimed.length, 3)
          const [held, ended, ridden] = claimed
          const release = yield* holdJobRow(prefix, held.id)
          const end = (row: typeof ended) => completedEnd(row, nowUs)
          const alone = yield* driver.jobFinishMany([end(ended)]).pipe(Effect.timeout("3 seconds"), Effect.exit)
          const ride = yield* driver.jobFinishManyAndClaim!([end(ridden)], [{ name: Noop.name, priority: 0 }], 1, nowUs, "w")
            .pipe(Effect.timeout("3 seconds"), Effect.exit)
          yield* release
          assert.isTrue(Exit.isSuccess(alone), "an end alone finished while another transaction held a running row")
          assert.isTrue(Exit.isSuccess(ride), "a ride's end finished while another transaction held a running row")
          const left = yield* sql<{ id: string }>`SELECT id FROM ${jobs} WHERE state <> 'pending' ORDER BY id`
          assert.deepStrictEqual(left.map((r) => String(r.id)), [held.id])
        }), { maxConnections: 4, retention: { completed: 0 } }))

    it.live(name("the ends of many of the running jobs wait for no lock on another running job's row"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          // On MariaDB an update of 8 ends among 20 running jobs read every running row first and
          // locked each: it waited for any transaction holding one of them (an app's cancel).
          const { driver } = yield* Database
          const queue = yield* Queue.Queue
          yield* queue.enqueueMany(Noop, Array.from({ length: 20 }, (_, i) => ({ i })))
          const nowUs = (yield* nowMicros) + 1_000_000
          const claimed = yield* driver.jobClaim([{ name: Noop.name, priority: 0 }], 20, nowUs, "w")
          assert.strictEqual(claimed.length, 20)
          const release = yield* holdJobRow(prefix, claimed[0].id)
          const end = (row: typeof claimed[number]) => completedEnd(row, nowUs)
          const alone = yield* driver.jobFinishMany(claimed.slice(2, 10).map(end)).pipe(Effect.timeout("3 seconds"), Effect.exit)
          const ride = yield* driver.jobFinishManyAndClaim!(claimed.slice(10, 18).map(end), [{ name: Noop.name, priority: 0 }], 1, nowUs, "w")
            .pipe(Effect.timeout("3 seconds"), Effect.exit)
          yield* release
          assert.isTrue(Exit.isSuccess(alone), "the ends alone finished while another transaction held a running row")
          assert.isTrue(Exit.isSuccess(ride), "the ends of a ride finished while another transaction held a running row")
          assert.strictEqual(yield* countJobs(prefix, "completed"), 16)
        }), { maxConnections: 4 }))

    it.live(name("a payload round-trips bigint and Date through its schema"), () =>
      withQueue(target, () =>
        Effect.gen(function*() {
          const Exact = Job.make("exact", {
            payload: Schema.Struct({ n: Schema.BigInt, at: Schema.Date }),
            success: Schema.Struct({ doubled: Schema.BigInt })
          })
          const at = new Date("2031-02-03T04:05:06.789Z")
          const seen: Array<unknown> = []
          yield* Worker.make({
            handlers: [Job.handler(Exact, (p) => Effect.sync(() => seen.push(p)).pipe(Effect.as({ doubled: p.n * 2n })))]
          })
          const queue = yield* Queue.Queue
          const id = yield* queue.enqueue(Exact, { n: 2n ** 70n, at })
          yield* waitFor(id, "completed", { timeout: "20 seconds" })
          assert.deepStrictEqual(seen, [{ n: 2n ** 70n, at }])
          const info = yield* queue.get(id)
          assert.deepStrictEqual(info.result._tag === "Some" ? info.result.value : undefined, {
            doubled: (2n ** 71n).toString()
          })
        })))

    it.live(name("a payload that fails its schema is refused with a typed error and nothing is written"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const Typed = Job.make("typed", { payload: Schema.Struct({ email: Schema.String.pipe(Schema.pattern(/@/)) }) })
          const queue = yield* Queue.Queue
          const error = yield* Effect.flip(queue.enqueue(Typed, { email: "not-an-email" }))
          assert.strictEqual(error._tag, "InvalidPayload")
          assert.instanceOf(error, Errors.InvalidPayload)
          assert.include(error.message, "@")
          // The schema's first issue gives the path, as a JSON path into the payload.
          assert.deepStrictEqual(
            error._tag === "InvalidPayload" ? [error.reason, error.path, error.job] : [],
            ["schema", "$.email", "typed"]
          )
          const many = yield* Effect.flip(queue.enqueueMany(Typed, [{ email: "a@b" }, { email: "nope" }]))
          assert.strictEqual(many._tag, "InvalidPayload")
          const Order = Job.make("order", {
            payload: Schema.Struct({ items: Schema.Array(Schema.Struct({ qty: Schema.Int, "gift note": Schema.String })) })
          })
          const items = [{ qty: 1, "gift note": "" }, { qty: 2, "gift note": "" }]
          const qty = yield* Effect.flip(queue.enqueue(Order, { items: [...items, { qty: 1.5, "gift note": "" }] }))
          assert.deepStrictEqual(qty._tag === "InvalidPayload" ? [qty.reason, qty.path] : [], ["schema", "$.items[2].qty"])
          const note = yield* Effect.flip(queue.enqueue(Order, { items: [...items, { qty: 3, "gift note": 7 as any }] }))
          assert.deepStrictEqual(note._tag === "InvalidPayload" ? note.path : "", "$.items[2][\"gift note\"]")
          const whole = yield* Effect.flip(queue.enqueue(Order, "not an order" as any))
          assert.deepStrictEqual(whole._tag === "InvalidPayload" ? [whole.reason, whole.path] : [], ["schema", "$"])
          const cyclic: any = { email: "a@b" }
          cyclic.self = cyclic
          const Loose = Job.make("loose", { payload: Schema.Any })
          const notJson = yield* Effect.flip(queue.enqueue(Loose, cyclic))
          assert.strictEqual(notJson._tag, "InvalidPayload")
          // NaN passes Schema.Number but JSON would store it as null: refused too
          const nan = yield* Effect.flip(queue.enqueue(Noop, { i: NaN }))
          assert.strictEqual(nan._tag, "InvalidPayload")
          const priority = yield* Effect.flip(queue.enqueue(Noop, { i: 1 }, { priority: 2 ** 40 }))
          assert.instanceOf(priority, Errors.InvalidEnqueueOption)
          assert.deepStrictEqual(
            priority._tag === "InvalidEnqueueOption" ? [priority.path, priority.reason] : [],
            ["priority", "range"]
          )
          assert.include(priority.message, "32-bit")
          const unknownId = yield* Effect.flip(queue.get("99999999999999999999"))
          assert.strictEqual(unknownId._tag, "JobNotFound")
          assert.strictEqual(yield* countJobs(prefix), 0)
        })))

    it.live(name("two queue instances and two OS processes never run a job twice"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const sql = (yield* SqlClient.SqlClient).withoutTransforms()
          const ledger = sql(prefix + "ledger")
          yield* sql`CREATE TABLE ${ledger} (job_id VARCHAR(32) NOT NULL, worker VARCHAR(64) NOT NULL)`
          const total = 600
          const queue = yield* Queue.Queue
          const processes = yield* Effect.all(
            ["process-1", "process-2"].map((w) =>
              runProcess(["work", target.dialect, target.url, prefix, w, String(total)], { SQLANE_POLL: "100 millis" }).pipe(
                Effect.fork
              )
            )
          )
          const ready = sql<{ n: number }>`SELECT COUNT(*) AS n FROM ${ledger} WHERE job_id = 'ready'`
          yield* waitUntil(Effect.map(ready, (r) => Number(r[0].n) === 2), 30_000, "worker processes")
          const record = (worker: string) =>
            Job.handler(Noop, (_, ctx) =>
              Effect.orDie(sql`INSERT INTO ${ledger} (job_id, worker) VALUES (${ctx.id}, ${worker})`).pipe(
                Effect.zipRight(Effect.sleep("2 millis"))
              ))
          // A second, independent QueueLive (its own pool) in this process.
          const other = testLayer(target, { prefix, migrate: false })
          yield* Layer.launch(Worker.layer({ handlers: [record("instance-b")], concurrency: 5 }).pipe(
            Layer.provide(other.layer)
          )).pipe(Effect.forkScoped)
          yield* Worker.make({ handlers: [record("instance-a")], concurrency: 5 })
          yield* queue.enqueueMany(Noop, Array.from({ length: total }, (_, i) => ({ i })))
          yield* waitUntil(Effect.map(countJobs(prefix, "completed"), (n) => n === total), 60_000, "all jobs completed")
          for (const p of processes) assert.strictEqual(yield* p.await.pipe(Effect.flatMap((e) => e)), 0)
          const rows = yield* sql<{ job_id: string; n: number }>`SELECT job_id, COUNT(*) AS n FROM ${ledger}
            WHERE job_id <> 'ready' GROUP BY job_id`
          assert.strictEqual(rows.length, total)
          assert.deepStrictEqual(rows.filter((r) => Number(r.n) !== 1), [])
          const byWorker = yield* sql<{ worker: string; n: number }>`SELECT worker, COUNT(*) AS n FROM ${ledger}
            WHERE job_id <> 'ready' GROUP BY worker`
          // Every claimer took part (each got jobs), so the test exercised concurrent claims.
          assert.strictEqual(byWorker.length, 4, JSON.stringify(byWorker))
        })), 120_000)

    it.live(name("concurrency 4, prefetch 0: never more than 4 jobs claimed-and-running per worker"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const sql = (yield* SqlClient.SqlClient).withoutTransforms()
          let inHandler = 0
          let maxInHandler = 0
          const handler = Job.handler(Noop, () =>
            Effect.gen(function*() {
              inHandler++
              maxInHandler = Math.max(maxInHandler, inHandler)
              yield* Effect.sleep("50 millis")
              inHandler--
            }))
          const queue = yield* Queue.Queue
          yield* queue.enqueueMany(Noop, Array.from({ length: 300 }, (_, i) => ({ i })))
          const worker = yield* Worker.make({ handlers: [handler], concurrency: 4, prefetch: 0 })
          let maxClaimed = 0
          let maxRunning = 0
          while ((yield* countJobs(prefix, "completed")) < 300) {
            const rows = yield* sql<{ n: number }>`SELECT COUNT(*) AS n FROM ${sql(prefix + "jobs")}
              WHERE state = 'running' AND worker_id = ${worker.id}`
            maxClaimed = Math.max(maxClaimed, Number(rows[0].n))
            maxRunning = Math.max(maxRunning, yield* worker.running)
            yield* realSleep(5)
          }
          assert.isAtMost(maxInHandler, 4)
          assert.isAtMost(maxClaimed, 4)
          assert.isAtMost(maxRunning, 4)
          // and the worker did use its slots
          assert.strictEqual(maxInHandler, 4)
        })), 60_000)

    if (target.dialect === "pg") {
      it.live(name("with a backlog, a worker's claims ride on the writes of its ends: one commit frees and fills its slots"), () =>
        withQueue(target, (prefix) =>
          Effect.gen(function*() {
            const sql = (yield* SqlClient.SqlClient).withoutTransforms()
            const jobs = sql(prefix + "jobs")
            const events = yield* Events.Events
            const seen = yield* events.subscribe
            const total = 200
            /** The transaction (xmin) that claimed each job, read by its handler. */
            const claimedBy: Array<string> = []
            let inHandler = 0
            let maxInHandler = 0
            const handler = Job.handler(Noop, (_, ctx) =>
              Effect.gen(function*() {
                inHandler++
                maxInHandler = Math.max(maxInHandler, inHandler)
                const rows = yield* sql<{ x: string }>`SELECT xmin::text AS x FROM ${jobs} WHERE id = ${ctx.id}::bigint`
                claimedBy.push(rows[0].x)
                inHandler--
              }).pipe(Effect.orDie))
            const queue = yield* Queue.Queue
            yield* queue.enqueueMany(Noop, Array.from({ length: total / 2 }, (_, i) => ({ i })))
            // Nothing claimed ahead (prefetch 0): a job holds its slot until its end is written.
            const worker = yield* Worker.make({ handlers: [handler], concurrency: 4, prefetch: 0 })
            let maxClaimed = 0
            let more = true
            while ((yield* countJobs(prefix, "completed")) < total) {
              if (more && claimedBy.length >= total / 4) {
                // More jobs while the worker drains: their hints must not end the ride for good.
                more = false
                yield* queue.enqueueMany(Noop, Array.from({ length: total / 2 }, (_, i) => ({ i })))
              }
              const rows = yield* sql<{ n: number }>`SELECT COUNT(*) AS n FROM ${jobs}
                WHERE state = 'running' AND worker_id = ${worker.id}`
              maxClaimed = Math.max(maxClaimed, Number(rows[0].n))
              yield* realSleep(2)
            }
            assert.strictEqual(claimedBy.length, total)
            // A completed row keeps the transaction of the write that ended it: a job claimed in
            // that same transaction was claimed by the claim riding on the write.
            const ends = yield* sql<{ x: string }>`SELECT DISTINCT xmin::text AS x FROM ${jobs} WHERE state = 'completed'`
            const endedBy = new Set(ends.map((r) => r.x))
            const riding = claimedBy.filter((x) => endedBy.has(x)).length
            // The first claim (4 jobs) is the loop's own; nearly every later one rides.
            assert.isAtLeast(riding, total * 0.8, `${riding} of ${total} jobs were claimed with an end write`)
            // A worker never claims more jobs than it has free slots: never more than 4 claimed-and-running.
            assert.isAtMost(maxClaimed, 4)
            assert.isAtMost(maxInHandler, 4)
            // Every claim is reported, those riding on end writes too.
            const all: Array<Events.WorkerEvent> = []
            yield* waitUntil(
              Effect.map(Queue_.takeAll(seen), (chunk) => {
                all.push(...Chunk.toReadonlyArray(chunk))
                return all.filter((e) => e._tag === "Completed").length === total
              }),
              20_000,
              "every Completed event"
            )
            assert.strictEqual(all.filter((e) => e._tag === "Claimed").length, total)
          })), 60_000)

    }

    it.live(name("with a backlog, most claims ride on end writes, and the slots are never over-filled"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          // On both dialects: count the jobs claimed with the writes of ends (on MySQL/MariaDB the
          // ride is the ends written in the claim's transaction).
          const sql = (yield* SqlClient.SqlClient).withoutTransforms()
          const jobs = sql(prefix + "jobs")
          const { rode, services } = yield* countingRides
          const total = 200
          let ran = 0
          let inHandler = 0
          let maxInHandler = 0
          const queue = yield* Queue.Queue
          yield* queue.enqueueMany(Noop, Array.from({ length: total }, (_, i) => ({ i })))
          const worker = yield* Worker.make({
            handlers: [Job.handler(Noop, () =>
              Effect.gen(function*() {
                inHandler++
                maxInHandler = Math.max(maxInHandler, inHandler)
                yield* Effect.yieldNow()
                inHandler--
                ran++
              }))],
            concurrency: 4,
            // Nothing claimed ahead: a job holds its slot until its end is written.
            prefetch: 0
          }).pipe(Effect.provide(services))
          let maxClaimed = 0
          while ((yield* countJobs(prefix, "completed")) < total) {
            const rows = yield* sql<{ n: number }>`SELECT COUNT(*) AS n FROM ${jobs}
              WHERE state = 'running' AND worker_id = ${worker.id}`
            maxClaimed = Math.max(maxClaimed, Number(rows[0].n))
            yield* realSleep(2)
          }
          assert.strictEqual(ran, total)
          // The first claim (4 jobs) is the loop's own; nearly every later one rides.
          assert.isAtLeast(rode(), total * 0.8, `${rode()} of ${total} jobs were claimed with an end write`)
          assert.isAtMost(maxClaimed, 4)
          assert.isAtMost(maxInHandler, 4)
        })), 60_000)

    it.live(name("a Completer wrapper that does not pass the claimant on: the worker still drains its backlog"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          // A wrapper written against the two-argument `submit`: the worker must not arm a
          // ride that no write will take and wait for it for ever.
          const dropping = Layer.scoped(
            Completer.Completer,
            Effect.map(Completer.make, (completer) => ({
              ...completer,
              submit: (outcome: Completer.Outcome, onWritten: () => void) => completer.submit(outcome, onWritten)
            }))
          )
          const services = yield* Layer.build(
            dropping.pipe(
              Layer.provideMerge(Claimer.layer),
              Layer.provide(Layer.succeedContext(yield* Effect.context<Database | Facts>()))
            )
          )
          const queue = yield* Queue.Queue
          yield* queue.enqueueMany(Noop, Array.from({ length: 40 }, (_, i) => ({ i })))
          yield* Worker.make({ handlers: [Job.handler(Noop, () => Effect.void)], concurrency: 4 }).pipe(
            Effect.provide(services)
          )
          yield* waitUntil(Effect.map(countJobs(prefix, "completed"), (n) => n === 40), 20_000, "40 jobs completed")
        })), 60_000)

    it.effect(name("a job delayed 1 hour runs only after TestClock passes it"), () =>
      withQueue(target, () =>
        Effect.gen(function*() {
          const ran: Array<number> = []
          yield* Worker.make({ handlers: [Job.handler(Noop, (p) => Effect.sync(() => ran.push(p.i)))] })
          const queue = yield* Queue.Queue
          const id = yield* queue.enqueue(Noop, { i: 7 }, { delay: "1 hour" })
          assert.strictEqual((yield* queue.get(id)).runAt.getTime(), Duration.toMillis("1 hour"))
          yield* realSleep(200)
          yield* TestClock.adjust("59 minutes")
          yield* realSleep(300)
          assert.deepStrictEqual(ran, [])
          assert.strictEqual((yield* queue.get(id)).state, "pending")
          yield* TestClock.adjust("61 seconds")
          // The worker reads the clock, then sleeps until the job's run_at; on a loaded machine the
          // adjust above can land between the two, and its sleep then ends a minute of TestClock later:
          // keep the clock moving while waiting.
          yield* waitUntil(Effect.zipRight(TestClock.adjust("1 second"), Effect.map(queue.get(id), (j) => j.state === "completed")))
          assert.deepStrictEqual(ran, [7])
        }), { pollInterval: "1 hour" }))

    it.effect(name("retries follow the schedule's delays; after the last attempt the job is dead with every error"), () =>
      withQueue(target, () =>
        Effect.gen(function*() {
          const Retried = Job.make("retried", {
            payload: Schema.Struct({}),
            failure: Flaky,
            retry: Job.attempts(3, Schedule.exponential("10 seconds"))
          })
          yield* Worker.make({
            handlers: [Job.handler(Retried, (_, ctx) => Effect.fail(new Flaky({ reason: `attempt ${ctx.attempt}` })))]
          })
          const queue = yield* Queue.Queue
          const id = yield* queue.enqueue(Retried, {})
          const attemptDone = (n: number) =>
            waitUntil(Effect.map(queue.get(id), (j) => j.attempts === n && j.state !== "running"), 20_000, `attempt ${n}`)
          yield* attemptDone(1)
          let info = yield* queue.get(id)
          assert.strictEqual(info.state, "pending")
          assert.strictEqual(info.runAt.getTime(), 10_000) // now (0) + 10 s
          yield* TestClock.adjust("9 seconds")
          yield* realSleep(200)
          assert.strictEqual((yield* queue.get(id)).attempts, 1)
          yield* TestClock.adjust("1 second")
          yield* attemptDone(2)
          info = yield* queue.get(id)
          assert.strictEqual(info.state, "pending")
          assert.strictEqual(info.runAt.getTime(), 10_000 + 20_000) // exponential: 10 s, then 20 s
          yield* TestClock.adjust("20 seconds")
          yield* attemptDone(3)
          info = yield* queue.get(id)
          assert.strictEqual(info.state, "dead")
          assert.deepStrictEqual(info.errors.map((e) => [e.attempt, e.kind, e.tag, e.message]), [
            [1, "failure", "Flaky", `Flaky: { "reason": "attempt 1" }`],
            [2, "failure", "Flaky", `Flaky: { "reason": "attempt 2" }`],
            [3, "failure", "Flaky", `Flaky: { "reason": "attempt 3" }`]
          ])
          assert.deepStrictEqual(info.errors[0].error, { _tag: "Flaky", reason: "attempt 1" })
          assert.strictEqual(info.lastError._tag === "Some" && info.lastError.value, info.errors[2].message)
        }), { pollInterval: "1 hour" }))

    it.effect(name("a permanent failure dead-letters at once"), () =>
      withQueue(target, () =>
        Effect.gen(function*() {
          const Charge = Job.make("charge", {
            payload: Schema.Struct({}),
            failure: Flaky,
            isPermanent: (e) => e.reason === "card invalid"
          })
          yield* Worker.make({ handlers: [Job.handler(Charge, () => Effect.fail(new Flaky({ reason: "card invalid" })))] })
          const queue = yield* Queue.Queue
          const id = yield* queue.enqueue(Charge, {})
          yield* waitFor(id, "dead", { timeout: "20 seconds" })
          const info = yield* queue.get(id)
          assert.strictEqual(info.attempts, 1)
          assert.strictEqual(info.errors.length, 1)
        }), { pollInterval: "1 hour" }))

    it.effect(name("failures with undefined, a string, a plain object, or a throw are recorded"), () =>
      withQueue(target, () =>
        Effect.gen(function*() {
          const Odd = Job.make("odd", { payload: Schema.Struct({ kind: Schema.String }), retry: Job.attempts(1) })
          yield* Worker.make({
            handlers: [Job.handler(Odd, (p): Effect.Effect<void> => {
              switch (p.kind) {
                case "undefined":
                  return Effect.fail(undefined) as any
                case "string":
                  return Effect.fail("just a string") as any
                case "object":
                  return Effect.fail({ code: 42 }) as any
                case "die":
                  return Effect.die({ weird: true })
                default:
                  throw new TypeError("thrown synchronously")
              }
            })]
          })
          const queue = yield* Queue.Queue
          const kinds = ["undefined", "string", "object", "die", "throw"]
          const ids = yield* Effect.forEach(kinds, (kind) => queue.enqueue(Odd, { kind }))
          yield* waitUntil(
            Effect.map(Effect.forEach(ids, queue.get), (js) => js.every((j) => j.state === "dead"))
          )
          const messages = yield* Effect.forEach(ids, (id) => Effect.map(queue.get(id), (j) => [j.errors[0].kind, j.errors[0].message]))
          assert.deepStrictEqual(messages, [
            ["failure", "undefined"],
            ["failure", "just a string"],
            ["failure", "{\"code\":42}"],
            ["defect", "{\"weird\":true}"],
            ["defect", "TypeError: thrown synchronously"]
          ])
        }), { pollInterval: "1 hour" }))

    it.effect(name("a stored row that fails to decode is dead-lettered with the reason; the worker goes on"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const Strict = Job.make("strict", { payload: Schema.Struct({ n: Schema.Number }) })
          const ran: Array<number> = []
          yield* Worker.make({ handlers: [Job.handler(Strict, (p) => Effect.sync(() => ran.push(p.n)))] })
          const sql = (yield* SqlClient.SqlClient).withoutTransforms()
          const queue = yield* Queue.Queue
          const bad = yield* queue.enqueue(Strict, { n: 1 }, { delay: "1 minute" })
          const garbled = yield* queue.enqueue(Strict, { n: 2 }, { delay: "1 minute" })
          yield* sql`UPDATE ${sql(prefix + "jobs")} SET payload = ${"{\"n\":\"one\"}"} WHERE id = ${bad}`
          yield* sql`UPDATE ${sql(prefix + "jobs")} SET payload = ${"{not json"} WHERE id = ${garbled}`
          const good = yield* queue.enqueue(Strict, { n: 3 }, { delay: "1 minute" })
          yield* TestClock.adjust("1 minute")
          yield* waitFor(good, "completed", { timeout: "20 seconds" })
          const badInfo = yield* queue.get(bad)
          assert.strictEqual(badInfo.state, "dead")
          assert.strictEqual(badInfo.errors[0].kind, "decode")
          assert.include(badInfo.errors[0].message, "Expected number")
          const garbledInfo = yield* queue.get(garbled)
          assert.strictEqual(garbledInfo.state, "dead")
          assert.include(garbledInfo.errors[0].message, "not valid JSON")
          assert.deepStrictEqual(ran, [3])
        }), { pollInterval: "1 hour" }))

    it.effect(name("process TZ America/New_York, session TZ Europe/Berlin: a 60 s delay is not due before 60 s"), () =>
      Effect.gen(function*() {
        const previous = process.env.TZ
        process.env.TZ = "America/New_York"
        yield* Effect.addFinalizer(() => Effect.sync(() => {
          if (previous === undefined) delete process.env.TZ
          else process.env.TZ = previous
        }))
        // Every connection's session runs in Europe/Berlin (+01:00 in January): PostgreSQL by the
        // connection's `options`, MariaDB by the server default for new connections (restored after).
        let tzTarget = target
        if (target.dialect === "pg") {
          const url = new URL(target.url)
          url.searchParams.set("options", "-c TimeZone=Europe/Berlin")
          tzTarget = { ...target, url: url.toString() }
        } else {
          const setGlobal = (tz: string) =>
            Effect.flatMap(SqlClient.SqlClient, (sql) =>
              Effect.flatMap(sql<{ tz: string }>`SELECT @@GLOBAL.time_zone AS tz`, ([row]) =>
                Effect.as(sql`SET GLOBAL time_zone = ${tz}`, row.tz))).pipe(Effect.provide(clientLayer(target)))
          const previous = yield* setGlobal("+01:00")
          yield* Effect.addFinalizer(() => Effect.ignore(setGlobal(previous)))
        }
        yield* withQueue(tzTarget, () =>
          Effect.gen(function*() {
            const sql = yield* SqlClient.SqlClient
            const [session] = target.dialect === "pg"
              ? yield* sql<{ tz: string }>`SELECT current_setting('TimeZone') AS tz`
              : yield* sql<{ tz: string }>`SELECT @@SESSION.time_zone AS tz`
            assert.include(["Europe/Berlin", "+01:00"], session.tz)
            const offset = new Date(2026, 0, 15).getTimezoneOffset()
            assert.strictEqual(offset, 300) // the process really is in New York
            yield* TestClock.setTime(Date.UTC(2026, 0, 15, 12, 0, 0))
            const ran: Array<number> = []
            yield* Worker.make({ handlers: [Job.handler(Noop, (p) => Effect.sync(() => ran.push(p.i)))] })
            const queue = yield* Queue.Queue
            const id = yield* queue.enqueue(Noop, { i: 60 }, { delay: "60 seconds" })
            assert.strictEqual((yield* queue.get(id)).runAt.toISOString(), "2026-01-15T12:01:00.000Z")
            yield* realSleep(200)
            yield* TestClock.adjust("59 seconds")
            yield* realSleep(300)
            assert.deepStrictEqual(ran, [])
            yield* TestClock.adjust("1 second")
            yield* waitUntil(Effect.map(queue.get(id), (j) => j.state === "completed"))
            assert.deepStrictEqual(ran, [60])
          }), { pollInterval: "1 hour" })
      }).pipe(Effect.scoped))

    it.live(name("priorities: lower runs first, then run_at, then id"), () =>
      withQueue(target, () =>
        Effect.gen(function*() {
          const queue = yield* Queue.Queue
          yield* queue.enqueueMany(Noop, Array.from({ length: 20 }, (_, i) => ({ i })), { priority: 5 })
          yield* queue.enqueue(Noop, { i: 100 }, { priority: -1 })
          const order: Array<number> = []
          yield* Worker.make({ handlers: [Job.handler(Noop, (p) => Effect.sync(() => order.push(p.i)))], concurrency: 1 })
          yield* waitUntil(Effect.sync(() => order.length === 21))
          assert.deepStrictEqual(order, [100, ...Array.from({ length: 20 }, (_, i) => i)])
        })))

    if (target.dialect === "mysql") {
      it.live(name("the insert check starts a job enqueued by another process without waiting for the poll"), () =>
        withQueue(target, (prefix) =>
          Effect.gen(function*() {
            const started: Array<number> = []
            yield* Worker.make({ handlers: [Job.handler(Noop, () => Effect.sync(() => started.push(Date.now())))] })
            yield* realSleep(500) // the worker has probed once and is now asleep for an hour
            const code = yield* runProcess(["enqueue", target.dialect, target.url, prefix, "x", "1"])
            const exited = Date.now()
            assert.strictEqual(code, 0)
            yield* waitUntil(Effect.sync(() => started.length === 1), 10_000, "the job to start")
            // The poll is 1 hour and the other process's hint cannot reach here: only the check (every
            // 100 ms) can; 2 s leaves room for a loaded machine.
            assert.isBelow(started[0] - exited, 2_000)
          }), { pollInterval: "1 hour" }))

      it.live(name("with the insert check off, a job enqueued by another process waits for the poll"), () =>
        withQueue(target, (prefix) =>
          Effect.gen(function*() {
            const started: Array<number> = []
            yield* Worker.make({ handlers: [Job.handler(Noop, () => Effect.sync(() => started.push(Date.now())))] })
            yield* realSleep(500)
            const code = yield* runProcess(["enqueue", target.dialect, target.url, prefix, "x", "1"])
            assert.strictEqual(code, 0)
            yield* realSleep(2000)
            assert.strictEqual(started.length, 0)
          }), { pollInterval: "1 hour", insertCheckInterval: Duration.infinity }))
    }

    if (target.dialect === "pg") {
      it.live(name("a LISTEN/NOTIFY wake-up starts a job enqueued by another process without waiting for the poll"), () =>
        withQueue(target, (prefix) =>
          Effect.gen(function*() {
            const started: Array<number> = []
            yield* Worker.make({ handlers: [Job.handler(Noop, (p) => Effect.sync(() => started.push(Date.now() + 0 * p.i)))] })
            yield* realSleep(500) // the worker has probed once and is now asleep for an hour
            const t0 = Date.now()
            const code = yield* runProcess(["enqueue", target.dialect, target.url, prefix, "x", "1"])
            assert.strictEqual(code, 0)
            yield* waitUntil(Effect.sync(() => started.length === 1), 10_000, "the job to start")
            // The poll is 1 hour: only NOTIFY (the other process has no in-process hint) can explain this.
            assert.isBelow(started[0] - t0, 10_000)
          }), { pollInterval: "1 hour" }))

      it.live(name("a claim's asynchronous commit stays in its own transaction: the connection's setting is unchanged"), () =>
        withQueue(target, () =>
          Effect.gen(function*() {
            const sql = yield* SqlClient.SqlClient
            const [before] = yield* sql<{ synchronous_commit: string }>`SHOW synchronous_commit`
            const done: Array<number> = []
            yield* Worker.make({ handlers: [Job.handler(Noop, (p) => Effect.sync(() => done.push(p.i)))] })
            const queue = yield* Queue.Queue
            yield* queue.enqueueMany(Noop, [1, 2, 3].map((i) => ({ i })))
            yield* waitUntil(Effect.sync(() => done.length === 3))
            // A pool of 2, one held by the worker's lock: the claims ran on the connection this reads.
            const [after] = yield* sql<{ synchronous_commit: string }>`SHOW synchronous_commit`
            assert.strictEqual(after.synchronous_commit, before.synchronous_commit)
            assert.notStrictEqual(after.synchronous_commit, "off")
          }), { pollInterval: "1 hour", maxConnections: 2 }))

      it.live(name("a burst of enqueues in another process: the limiter's trailing NOTIFY wakes the worker for the rest"), () =>
        withQueue(target, (prefix) =>
          Effect.gen(function*() {
            const started: Array<number> = []
            yield* Worker.make({ concurrency: 20, handlers: [Job.handler(Noop, (p) => Effect.sync(() => started.push(p.i)))] })
            yield* realSleep(500) // the worker has probed once and is now asleep for an hour
            const code = yield* runProcess(["burst", target.dialect, target.url, prefix, "x", "12"])
            assert.strictEqual(code, 0)
            // The poll is 1 hour: only NOTIFY (leading and trailing) can explain all 12 starting.
            yield* waitUntil(Effect.sync(() => started.length === 12), 10_000, "all 12 jobs to start")
          }), { pollInterval: "1 hour" }))

      it.live(name("a producer closed within the NOTIFY window still sends its trailing NOTIFY"), () =>
        Effect.gen(function*() {
          // Five enqueues in one transaction: three NOTIFY at its commit, the other two trail by
          // `hintDelay` (20 ms). A process that closes sooner (a script) used to drop the trailing one.
          // The five must fall within one limiter window (wall-clock): a run the machine stalled past
          // it is not a verdict, and is tried again.
          let payloads: Array<string> = []
          for (let tries = 0; tries < 10; tries++) {
            const t = testLayer(target, { pollInterval: "1 hour" })
            const listener = new Pg.Client({ connectionString: target.url })
            const heard: Array<string> = []
            listener.on("notification", (n) => heard.push(n.payload ?? ""))
            yield* Effect.promise(() => listener.connect())
            yield* Effect.promise(() => listener.query(`LISTEN "${t.prefix}jobs"`))
            let took = 0
            yield* Effect.scoped(Effect.gen(function*() {
              const sql = yield* SqlClient.SqlClient
              const queue = yield* Queue.Queue
              yield* sql.withTransaction(Effect.gen(function*() {
                const t0 = Date.now()
                yield* Effect.forEach([1, 2, 3, 4, 5], (i) => queue.enqueue(Noop, { i }), { discard: true })
                took = Date.now() - t0
              }))
            }).pipe(Effect.provide(t.layer)))
            yield* realSleep(500)
            yield* Effect.promise(() => listener.end())
            yield* dropTables(t.prefix).pipe(Effect.provide(t.client))
            payloads = heard
            if (took < Notifier.notifyWindowMillis) break
          }
          // PostgreSQL sends one NOTIFY for the three alike in the transaction; the trailing one follows.
          assert.strictEqual(payloads.length, 2, JSON.stringify(payloads))
        }))

      it.live(name("the NOTIFY limiter: a few enqueues per window notify on their own commit, the rest trail"), () =>
        withQueue(target, () =>
          Effect.gen(function*() {
            const notifier = yield* Notifier.Notifier
            yield* Worker.make({ handlers: [Job.handler(Noop, () => Effect.void)] }) // starts LISTEN
            // Back to back within one window (wall-clock); a run the machine stalled past the window
            // is not a verdict, and is tried again.
            let payloads: ReadonlyArray<string | undefined> = []
            for (let tries = 0; tries < 20; tries++) {
              yield* realSleep(2 * Notifier.notifyWindowMillis)
              const t0 = Date.now()
              payloads = yield* Effect.forEach(
                Array.from({ length: Notifier.notifyBurst + 2 }, (_, i) => i),
                () => Effect.sync(() => notifier.takeNotifyPayload([["x", 0]]))
              )
              if (Date.now() - t0 < Notifier.notifyWindowMillis) break
            }
            assert.deepStrictEqual(
              payloads.map((p) => p !== undefined),
              [...Array.from({ length: Notifier.notifyBurst }, () => true), false, false]
            )
            // A window later, the next enqueue notifies again.
            yield* realSleep(2 * Notifier.notifyWindowMillis)
            assert.isDefined(notifier.takeNotifyPayload([["x", 0]]))
          }), { pollInterval: "1 hour" }))
    }
  })
}

