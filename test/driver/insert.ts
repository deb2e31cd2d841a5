/**
 * Inserting jobs: `jobInsertMany`, `jobInsertUnique`, `jobNewestId`.
 */
import { assert, describe, it } from "@effect/vitest"
import * as MysqlClient from "@effect/sql-mysql2/MysqlClient"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import Pg from "pg"
import { QueueLive } from "../../src/layers/QueueLive.js"
import { Database } from "../../src/internal/Database.js"
import * as Worker from "../../src/services/Worker.js"
import type { UniqueInsertRow } from "../../src/internal/driver/Driver.js"
import { stateBits } from "../../src/internal/driver/shared.js"
import { countJobs, realSleep, waitUntil } from "../support/helpers.js"
import { clientLayer, type Target } from "../support/targets.js"
import { claim, end, insert, row, s, stateOf, t0, withDriver } from "./fixtures.js"

/**
 * A client of its own whose connections send one statement per query: on MySQL/MariaDB without the
 * client flag `MULTI_STATEMENTS` (which @effect/sql-mysql2 sets and mysql2's `flags` option in the
 * URL takes away), as a client other than @effect/sql-mysql2's, or a proxy that refuses
 * multi-statements, connects. The server then refuses two statements in one query.
 */
const singleStatementClient = (target: Target) => {
  if (target.dialect === "pg") return clientLayer(target, { maxConnections: 2 })
  const url = new URL(target.url)
  url.searchParams.set("flags", "-MULTI_STATEMENTS")
  return MysqlClient.layer({ url: Redacted.make(url.toString()), maxConnections: 2 })
}

/** A unique row of job `name` holding `key` while pending or running. */
const unique = (name: string, key: string, fields: Partial<UniqueInsertRow> = {}): UniqueInsertRow => ({
  ...row(name),
  uniqueKey: key,
  uniqueStates: stateBits.pending | stateBits.running,
  ...fields
})

export const insertOps = (target: Target) => {
  const name = (title: string) => `[${target.id}] ${title}`

  describe("jobInsertMany", () => {
    it.live(name("one row: its id, and the row as given, pending, created now"), () =>
      withDriver(target, ({ driver }) =>
        Effect.gen(function*() {
          const ids = yield* driver.jobInsertMany(
            [row("a", { payload: `{"x":1}`, priority: -7, runAtUs: t0 + s(5), traceContext: "t:s:1" })],
            t0,
            undefined
          )
          assert.strictEqual(ids.length, 1)
          assert.deepStrictEqual(yield* driver.jobGet(ids[0]), {
            id: ids[0],
            name: "a",
            payload: `{"x":1}`,
            attempts: 0,
            attemptBase: 0,
            priority: -7,
            runAtUs: t0 + s(5),
            createdAtUs: t0,
            errors: null,
            traceContext: "t:s:1",
            keepsKey: false,
            state: "pending",
            claimedAtUs: null,
            finishedAtUs: null,
            lastError: null,
            result: null
          })
        })))

    it.live(name("many rows of one name: ascending ids in input order"), () =>
      withDriver(target, ({ driver }) =>
        Effect.gen(function*() {
          const payloads = Array.from({ length: 25 }, (_, i) => JSON.stringify({ i }))
          const ids = yield* insert(driver, ...payloads.map((payload) => row("a", { payload })))
          assert.strictEqual(ids.length, 25)
          assert.deepStrictEqual([...ids].sort((x, y) => Number(x) - Number(y)), ids)
          const read = yield* Effect.forEach(ids, (id) => driver.jobGet(id))
          assert.deepStrictEqual(read.map((j) => j?.payload), payloads)
          assert.deepStrictEqual(read.map((j) => j?.createdAtUs), payloads.map(() => t0))
        })))

    it.live(name("rows that differ in every field: each row as given, ids in input order"), () =>
      withDriver(target, ({ driver }) =>
        Effect.gen(function*() {
          const rows = [
            row("a", { payload: `{"sep":"\u001e"}`, priority: 3, runAtUs: t0 - s(1), mutexKey: "k1" }),
            row("b", { payload: "{}", priority: -3, runAtUs: t0 + s(9), traceContext: "t:s:0" }),
            row("a", { payload: `{"q":"it's"}`, mutexKey: "k2" })
          ]
          const ids = yield* insert(driver, ...rows)
          assert.deepStrictEqual([...ids].sort((x, y) => Number(x) - Number(y)), ids)
          const read = yield* Effect.forEach(ids, (id) => driver.jobGet(id))
          assert.deepStrictEqual(
            read.map((j) => [j?.name, j?.payload, j?.priority, j?.runAtUs, j?.traceContext]),
            rows.map((r) => [r.name, r.payload, r.priority, r.runAtUs, r.traceContext])
          )
        })))

    it.live(name("many rows on a client that sends one statement per query, in the caller's transaction and outside one; a worker there refuses to start"), () =>
      withDriver(target, ({ prefix }) =>
        Effect.gen(function*() {
          // The same tables, reached through a QueueLive on that client.
          const context = yield* Layer.build(
            QueueLive({ prefix, migrate: false, prune: false }).pipe(Layer.provideMerge(singleStatementClient(target)))
          )
          const { driver } = Context.get(context, Database)
          const sql = Context.get(context, SqlClient.SqlClient)
          if (target.dialect === "mysql") {
            const refused = yield* Effect.flip(sql.unsafe("SELECT 1; SELECT 2").unprepared)
            assert.include(String((refused.cause as { code?: string }).code), "PARSE_ERROR")
          }
          // Claims and ends on MySQL/MariaDB need several statements in one query: a worker says so.
          assert.strictEqual(driver.capabilities.multiStatements, target.dialect === "pg")
          if (target.dialect === "mysql") {
            const worker = yield* Effect.exit(Worker.make({ handlers: [] }).pipe(Effect.scoped, Effect.provide(context)))
            assert.isTrue(worker._tag === "Failure" && Cause.isDie(worker.cause))
            assert.include(
              worker._tag === "Failure" ? String(Cause.squash(worker.cause)) : "",
              "a worker on MySQL/MariaDB needs connections that take several statements in one query"
            )
          }
          const inside = [row("a", { payload: `{"n":1}` }), row("b", { payload: `{"n":2}` }), row("a", { payload: `{"n":3}` })]
          const [insideIds, count] = yield* sql.withTransaction(Effect.gen(function*() {
            const ids = yield* insert(driver, ...inside)
            // Read in the same transaction, before its COMMIT.
            const rows = yield* sql<{ n: number }>`SELECT COUNT(*) AS n FROM ${sql(prefix + "jobs")}`
            return [ids, Number(rows[0].n)] as const
          }))
          assert.strictEqual(count, 3)
          const outside = [row("c", { payload: `{"n":4}` }), row("c", { payload: `{"n":5}` })]
          const outsideIds = yield* insert(driver, ...outside)
          const ids = [...insideIds, ...outsideIds]
          assert.deepStrictEqual([...ids].sort((x, y) => Number(x) - Number(y)), ids)
          const read = yield* Effect.forEach(ids, (id) => driver.jobGet(id))
          assert.deepStrictEqual(
            read.map((j) => [j?.name, j?.payload]),
            [...inside, ...outside].map((r) => [r.name, r.payload])
          )
        })))

    // More bytes than one MySQL/MariaDB statement carries (`maxStatementBytes`): cut into statements.
    it.live(name("rows larger than one statement together: every row, ids in input order"), () =>
      withDriver(target, ({ driver }) =>
        Effect.gen(function*() {
          // Six rows of an eighth of the limit each: at least two multi-row statements.
          const size = Math.min(driver.capabilities.maxStatementBytes ?? 16_777_216, 16_777_216) / 8
          const payloads = Array.from({ length: 6 }, (_, i) => JSON.stringify({ i, pad: "x".repeat(size) }))
          const ids = yield* insert(driver, ...payloads.map((payload) => row("big", { payload })))
          assert.strictEqual(ids.length, 6)
          assert.deepStrictEqual([...ids].sort((x, y) => Number(x) - Number(y)), ids)
          const read = yield* Effect.forEach(ids, (id) => driver.jobGet(id))
          assert.deepStrictEqual(read.map((j) => j?.payload.length), payloads.map((p) => p.length))
          assert.deepStrictEqual(read.map((j) => JSON.parse(j!.payload).i), [0, 1, 2, 3, 4, 5])
        })))

    // With LISTEN/NOTIFY, the insert itself notifies `<prefix>jobs` with the payload given.
    it.live(name("notifies <prefix>jobs with the payload given, where the database delivers notifications"), () =>
      withDriver(target, ({ driver, prefix }) =>
        Effect.gen(function*() {
          if (!driver.capabilities.listenNotify) {
            // Nothing to deliver to: the insert goes through all the same.
            assert.strictEqual((yield* driver.jobInsertMany([row("a"), row("a")], t0, "a")).length, 2)
            return
          }
          const heard: Array<[string, string | undefined]> = []
          const listener = yield* Effect.acquireRelease(
            Effect.promise(async () => {
              const client = new Pg.Client({ connectionString: target.url })
              await client.connect()
              client.on("notification", (n) => heard.push([n.channel, n.payload]))
              await client.query(`LISTEN "${prefix}jobs"`)
              return client
            }),
            (client) => Effect.promise(() => client.end())
          )
          assert.isDefined(listener)
          yield* driver.jobInsertMany([row("a")], t0, "one")
          yield* driver.jobInsertMany([row("b"), row("b")], t0, "many")
          yield* driver.jobInsertUnique(unique("c", "k"), t0, "unique")
          yield* waitUntil(Effect.sync(() => heard.length >= 3), 5_000, "three notifications")
          assert.deepStrictEqual(heard, [[`${prefix}jobs`, "one"], [`${prefix}jobs`, "many"], [`${prefix}jobs`, "unique"]])
        })))
  })

  describe("jobInsertUnique", () => {
    it.live(name("inserts once; while the job holds its key, returns its id and writes nothing"), () =>
      withDriver(target, ({ driver, prefix }) =>
        Effect.gen(function*() {
          const first = yield* driver.jobInsertUnique(unique("a", "k", { payload: `{"n":1}` }), t0, undefined)
          assert.isTrue(first.inserted)
          const again = yield* driver.jobInsertUnique(unique("a", "k", { payload: `{"n":2}` }), t0, undefined)
          assert.deepStrictEqual(again, { id: first.id, inserted: false, replaced: false })
          // Running holds it too; another key is another job.
          yield* claim(driver, "a")
          assert.deepStrictEqual(yield* driver.jobInsertUnique(unique("b", "k"), t0, undefined), { id: first.id, inserted: false, replaced: false })
          assert.isTrue((yield* driver.jobInsertUnique(unique("a", "k2"), t0, undefined)).inserted)
          assert.strictEqual(yield* countJobs(prefix), 2)
          assert.strictEqual((yield* driver.jobGet(first.id))?.payload, `{"n":1}`)
        })))

    it.live(name("a key is free once its job leaves the states of its mask"), () =>
      withDriver(target, ({ driver }) =>
        Effect.gen(function*() {
          const free = yield* driver.jobInsertUnique(unique("a", "free"), t0, undefined)
          const kept = yield* driver.jobInsertUnique(
            unique("a", "kept", { uniqueStates: stateBits.pending | stateBits.running | stateBits.completed }),
            t0,
            undefined
          )
          assert.isTrue((yield* driver.jobGet(kept.id))?.keepsKey)
          const claimed = yield* claim(driver, "a")
          yield* driver.jobFinishMany(claimed.map((job) => end(job, "completed")))
          const afterFree = yield* driver.jobInsertUnique(unique("a", "free"), t0, undefined)
          assert.isTrue(afterFree.inserted)
          assert.notStrictEqual(afterFree.id, free.id)
          assert.deepStrictEqual(yield* driver.jobInsertUnique(unique("a", "kept"), t0, undefined), { id: kept.id, inserted: false, replaced: false })
          // Cancelled is outside the default mask.
          assert.isTrue(yield* driver.jobCancel(afterFree.id, t0))
          assert.isTrue((yield* driver.jobInsertUnique(unique("a", "free"), t0, undefined)).inserted)
        })))

    it.live(name("replace and throttle: a pending holder of the same name takes the row (throttle: the earlier run_at); others are left"), () =>
      withDriver(target, ({ driver, prefix }) =>
        Effect.gen(function*() {
          const first = yield* driver.jobInsertUnique(unique("a", "k", { payload: `{"n":1}`, runAtUs: t0 + s(30) }), t0, undefined)
          const replaced = yield* driver.jobInsertUnique(
            unique("a", "k", { mode: "replace", payload: `{"n":2}`, priority: 3, runAtUs: t0 + s(60), mutexKey: "m", traceContext: "t:s:1" }),
            t0,
            undefined
          )
          assert.deepStrictEqual(replaced, { id: first.id, inserted: false, replaced: true })
          const afterReplace = yield* driver.jobGet(first.id)
          assert.deepStrictEqual(
            [afterReplace?.payload, afterReplace?.priority, afterReplace?.runAtUs, afterReplace?.traceContext],
            [`{"n":2}`, 3, t0 + s(60), "t:s:1"]
          )
          // throttle: a later run_at is not taken, an earlier one is
          yield* driver.jobInsertUnique(unique("a", "k", { mode: "throttle", payload: `{"n":3}`, runAtUs: t0 + s(90) }), t0, undefined)
          assert.deepStrictEqual(
            yield* Effect.map(driver.jobGet(first.id), (j) => [j?.payload, j?.runAtUs]),
            [`{"n":3}`, t0 + s(60)]
          )
          yield* driver.jobInsertUnique(unique("a", "k", { mode: "throttle", payload: `{"n":4}`, runAtUs: t0 }), t0, undefined)
          assert.deepStrictEqual(yield* Effect.map(driver.jobGet(first.id), (j) => [j?.payload, j?.runAtUs]), [`{"n":4}`, t0])
          // another name, then a running holder: left as they are
          assert.deepStrictEqual(
            yield* driver.jobInsertUnique(unique("b", "k", { mode: "replace", payload: `{"n":5}` }), t0, undefined),
            { id: first.id, inserted: false, replaced: false }
          )
          yield* claim(driver, "a")
          for (const mode of ["replace", "throttle"] as const) {
            assert.deepStrictEqual(
              yield* driver.jobInsertUnique(unique("a", "k", { mode, payload: `{"n":6}` }), t0, undefined),
              { id: first.id, inserted: false, replaced: false }
            )
          }
          assert.deepStrictEqual(yield* Effect.map(driver.jobGet(first.id), (j) => [j?.state, j?.payload]), ["running", `{"n":4}`])
          // no holder: inserted
          assert.isTrue((yield* driver.jobInsertUnique(unique("a", "k2", { mode: "replace" }), t0, undefined)).inserted)
          assert.strictEqual(yield* countJobs(prefix), 2)
        })))

    it.live(name("keys that differ by trailing spaces are one key exactly where the database pads them"), () =>
      withDriver(target, ({ driver }) =>
        Effect.gen(function*() {
          const a = yield* driver.jobInsertUnique(unique("a", "k"), t0, undefined)
          const b = yield* driver.jobInsertUnique(unique("a", "k "), t0, undefined)
          assert.deepStrictEqual(
            b.inserted ? "two keys" : b.id === a.id ? "one key" : "?",
            driver.capabilities.padSpaceKeys ? "one key" : "two keys"
          )
        })))

    it.live(name("waits for an uncommitted insert of the key; inserts when that rolls back"), () =>
      withDriver(target, ({ driver, sql }) =>
        Effect.gen(function*() {
          const inserted = yield* Deferred.make<string>()
          const rollBack = yield* Deferred.make<void>()
          const holder = yield* sql.withTransaction(Effect.gen(function*() {
            const r = yield* driver.jobInsertUnique(unique("a", "k"), t0, undefined)
            yield* Deferred.succeed(inserted, r.id)
            yield* Deferred.await(rollBack)
            return yield* Effect.fail("roll back" as const)
          })).pipe(Effect.fork)
          const uncommitted = yield* Deferred.await(inserted)
          const waiting = yield* Effect.fork(driver.jobInsertUnique(unique("a", "k"), t0, undefined))
          yield* realSleep(300)
          assert.isTrue(Option.isNone(yield* waiting.poll), "the insert waited")
          yield* Deferred.succeed(rollBack, undefined)
          assert.strictEqual(yield* Effect.flip(Fiber.join(holder)), "roll back")
          const result = yield* Fiber.join(waiting)
          assert.isTrue(result.inserted)
          assert.notStrictEqual(result.id, uncommitted)
          assert.strictEqual(yield* stateOf(driver, uncommitted), undefined)
          assert.strictEqual(yield* stateOf(driver, result.id), "pending")
        })))
  })

  describe("jobNewestId", () => {
    it.live(name("null on an empty table, then the largest id"), () =>
      withDriver(target, ({ driver }) =>
        Effect.gen(function*() {
          assert.isNull(yield* driver.jobNewestId())
          const ids = yield* insert(driver, row("a"), row("a"), row("b"))
          assert.strictEqual(yield* driver.jobNewestId(), ids[2])
          const [more] = yield* insert(driver, row("c"))
          assert.strictEqual(yield* driver.jobNewestId(), more)
        })))
  })
}
