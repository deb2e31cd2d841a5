/**
 * Workers' rows, their session locks, and the jobs of lost workers: `workerRegister`,
 * `workerJobNames`, `workerHeartbeat`, `workerRelocking`, `workerRelocked`, `workerRemove`,
 * `workerPrune`, `workerList`, `jobStaleAttempts`, `jobListOrphaned`, `workerLockStatement` (with
 * `workerUnlockSql`), `workerLockName`, `workerLockHolder`.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import type { Driver, OrphanedRow } from "../../src/internal/driver/Driver.js"
import { workerLockPrefix } from "../../src/internal/driver/workerRows.js"
import { waitUntil } from "../support/helpers.js"
import type { Target } from "../support/targets.js"
import { claim, connectionId, insert, row, runLock, s, session, sortBy, t0, withDriver } from "./fixtures.js"

/** The workers' rows: id, host, pid, job names (JSON), relocking and relocks. */
const workerRows = (sql: SqlClient.SqlClient, prefix: string) =>
  Effect.map(
    sql<{ id: string; host: string; pid: number; job_names: string; relocking: unknown; relocks: number }>`SELECT
      id, host, pid, job_names, relocking, relocks FROM ${sql(prefix + "workers")} ORDER BY id`,
    (rows) =>
      rows.map((r) => ({
        id: r.id,
        host: r.host,
        pid: Number(r.pid),
        jobNames: JSON.parse(r.job_names) as Array<string>,
        relocking: r.relocking === true || Number(r.relocking) === 1,
        relocks: Number(r.relocks)
      }))
  )

const names = (driver: Driver, sinceUs: number) => Effect.map(driver.workerJobNames(sinceUs), (set) => [...set].sort())

/** The unlock statement of a worker's lock, with the params of its lock statement. */
const unlockOf = (driver: Driver, id: string): readonly [string, ReadonlyArray<unknown>] => [
  driver.workerUnlockSql,
  driver.workerLockStatement(id)[1]
]

export const workersOps = (target: Target) => {
  const name = (title: string) => `[${target.id}] ${title}`

  describe("workerRegister", () => {
    it.live(name("writes the worker's row; registering again replaces its job names and clears relocking"), () =>
      withDriver(target, ({ driver, prefix, sql }) =>
        Effect.gen(function*() {
          yield* driver.workerRegister("w1", t0, "host-1", 101, ["a", "b"])
          yield* driver.workerRegister("w2", t0, "host-2", 102)
          assert.deepStrictEqual(yield* workerRows(sql, prefix), [
            { id: "w1", host: "host-1", pid: 101, jobNames: ["a", "b"], relocking: false, relocks: 0 },
            { id: "w2", host: "host-2", pid: 102, jobNames: [], relocking: false, relocks: 0 }
          ])
          yield* driver.workerRelocking("w1")
          yield* driver.workerRegister("w1", t0 + s(1), "host-1", 101, ["c"])
          assert.deepStrictEqual((yield* workerRows(sql, prefix))[0], {
            id: "w1",
            host: "host-1",
            pid: 101,
            jobNames: ["c"],
            relocking: false,
            relocks: 0
          })
          assert.deepStrictEqual(yield* names(driver, t0 + s(1)), ["c"])
        })))
  })

  describe("workerJobNames", () => {
    it.live(name("the union of the job names of the workers heard from since a time"), () =>
      withDriver(target, ({ driver }) =>
        Effect.gen(function*() {
          yield* driver.workerRegister("w1", t0, "h", 1, ["a", "b"])
          yield* driver.workerRegister("w2", t0 - s(10), "h", 2, ["b", "c"])
          assert.deepStrictEqual(yield* names(driver, t0 - s(10)), ["a", "b", "c"])
          assert.deepStrictEqual(yield* names(driver, t0 - s(5)), ["a", "b"])
          assert.deepStrictEqual(yield* names(driver, t0 + s(1)), [])
        })))
  })

  describe("workerHeartbeat", () => {
    it.live(name("moves the worker's heartbeat and nothing else; a row that is gone is written again as the worker started"), () =>
      withDriver(target, ({ driver, prefix, sql }) =>
        Effect.gen(function*() {
          const started = { startedAtUs: t0 - s(60), host: "h", pid: 1, jobNames: ["a"], jobLimits: new Map() }
          yield* driver.workerRegister("w1", t0 - s(60), "h", 1, ["a"])
          assert.deepStrictEqual(yield* names(driver, t0), [])
          // The row's other columns are its own: a heartbeat that finds it moves the heartbeat alone.
          yield* driver.workerRelocking("w1")
          yield* driver.workerHeartbeat("w1", t0, { ...started, host: "elsewhere", pid: 9, jobNames: ["z"] })
          assert.deepStrictEqual(yield* names(driver, t0), ["a"])
          assert.deepStrictEqual(yield* workerRows(sql, prefix), [
            { id: "w1", host: "h", pid: 1, jobNames: ["a"], relocking: true, relocks: 0 }
          ])
          // Pruned while the worker was stopped: its next heartbeat writes the row again (not that of a
          // worker that is stopping, given no start: its removal may have deleted the row).
          yield* sql`DELETE FROM ${sql(prefix + "workers")}`
          yield* driver.workerHeartbeat("w1", t0 + s(1), undefined)
          assert.deepStrictEqual(yield* driver.workerList(10), [])
          yield* driver.workerHeartbeat("w1", t0 + s(1), started)
          assert.deepStrictEqual(yield* driver.workerList(10), [
            { id: "w1", host: "h", pid: 1, startedAtUs: t0 - s(60), heartbeatAtUs: t0 + s(1), jobNames: `["a"]` }
          ])
        })))
  })

  describe("workerRelocking and workerRelocked", () => {
    it.live(name("mark the worker taking its lock again, then clear the mark and count it"), () =>
      withDriver(target, ({ driver, prefix, sql }) =>
        Effect.gen(function*() {
          yield* driver.workerRegister("w1", t0, "h", 1)
          yield* driver.workerRelocking("w1")
          assert.deepStrictEqual(
            (yield* workerRows(sql, prefix)).map((w) => [w.relocking, w.relocks]),
            [[true, 0]]
          )
          yield* driver.workerRelocked("w1")
          yield* driver.workerRelocking("w1")
          yield* driver.workerRelocked("w1")
          assert.deepStrictEqual(
            (yield* workerRows(sql, prefix)).map((w) => [w.relocking, w.relocks]),
            [[false, 2]]
          )
        })))
  })

  describe("workerRemove", () => {
    it.live(name("deletes the worker's row only"), () =>
      withDriver(target, ({ driver, prefix, sql }) =>
        Effect.gen(function*() {
          yield* driver.workerRegister("w1", t0, "h", 1)
          yield* driver.workerRegister("w2", t0, "h", 2)
          yield* driver.workerRemove("w1")
          yield* driver.workerRemove("nobody")
          assert.deepStrictEqual((yield* workerRows(sql, prefix)).map((w) => w.id), ["w2"])
        })))
    it.live(name("a worker with a job still running keeps its row, its heartbeat at the epoch: its job is listed lost"), () =>
      withDriver(target, ({ driver, prefix, sql }) =>
        Effect.gen(function*() {
          assert.isTrue(yield* runLock(yield* session, driver.workerLockStatement("busy")))
          yield* driver.workerRegister("busy", t0, "h", 1)
          const [id] = yield* insert(driver, row("a"))
          yield* claim(driver, "a", 1, "busy")
          yield* driver.workerRemove("busy")
          assert.deepStrictEqual((yield* workerRows(sql, prefix)).map((w) => w.id), ["busy"])
          // Its lock is still held: the heartbeat alone says it is lost.
          const lost = yield* driver.jobListOrphaned(["a"], t0 - s(60), "self", 100, "lost")
          assert.deepStrictEqual(lost.map((o) => [o.id, o.workerId, o.expired]), [[id, "busy", true]])
        })))
  })

  describe("workerList", () => {
    it.live(name("every worker row by id: host, pid, start, heartbeat and job names"), () =>
      withDriver(target, ({ driver }) =>
        Effect.gen(function*() {
          yield* driver.workerRegister("w2", t0, "h2", 2, ["x", "y"])
          yield* driver.workerRegister("w1", t0 - s(5), "h1", 1)
          yield* driver.workerHeartbeat("w2", t0 + s(3), { startedAtUs: t0, host: "h2", pid: 2, jobNames: ["x", "y"], jobLimits: new Map() })
          const rows = yield* driver.workerList(10)
          assert.deepStrictEqual(rows.map((r) => ({ ...r, jobNames: r.jobNames === null ? null : JSON.parse(r.jobNames) })), [
            { id: "w1", host: "h1", pid: 1, startedAtUs: t0 - s(5), heartbeatAtUs: t0 - s(5), jobNames: [] },
            { id: "w2", host: "h2", pid: 2, startedAtUs: t0, heartbeatAtUs: t0 + s(3), jobNames: ["x", "y"] }
          ])
          assert.deepStrictEqual((yield* driver.workerList(1)).map((r) => r.id), ["w1"])
        })))
  })

  describe("workerPrune", () => {
    it.live(name("deletes workers silent since the cutoff that run no job"), () =>
      withDriver(target, ({ driver, prefix, sql }) =>
        Effect.gen(function*() {
          yield* driver.workerRegister("old-idle", t0 - s(60), "h", 1)
          yield* driver.workerRegister("old-busy", t0 - s(60), "h", 2)
          yield* driver.workerRegister("fresh", t0, "h", 3)
          yield* insert(driver, row("a"))
          yield* claim(driver, "a", 1, "old-busy")
          yield* driver.workerPrune(t0 - s(30))
          assert.deepStrictEqual((yield* workerRows(sql, prefix)).map((w) => w.id), ["fresh", "old-busy"])
        })))
  })

  describe("jobStaleAttempts", () => {
    it.live(name("of attempts, those whose job no longer runs them, in the order given"), () =>
      withDriver(target, ({ driver }) =>
        Effect.gen(function*() {
          const [a, b, c] = yield* insert(driver, row("a"), row("a"), row("a"))
          yield* claim(driver, "a")
          yield* driver.jobCancel(b, t0)
          const missing = String(Number(c) + 1000)
          const attempts = [
            { id: a, attempt: 1 },
            { id: b, attempt: 1 },
            { id: a, attempt: 2 },
            { id: missing, attempt: 1 },
            { id: c, attempt: 1 }
          ]
          assert.deepStrictEqual(yield* driver.jobStaleAttempts(attempts), [
            { id: b, attempt: 1 },
            { id: a, attempt: 2 },
            { id: missing, attempt: 1 }
          ])
          assert.deepStrictEqual(yield* driver.jobStaleAttempts([]), [])
        })))
  })

  describe("jobListOrphaned", () => {
    it.live(name("running jobs of workers gone: an old heartbeat or a free lock, no row since a lease; and the caller's own"), () =>
      withDriver(target, ({ driver }) =>
        Effect.gen(function*() {
          // Holders of their locks (each on a session of its own): alive, the caller itself, and a
          // live worker whose row was pruned (it writes it again at its next heartbeat).
          for (const id of ["alive", "self", "pruned"]) {
            assert.isTrue(yield* runLock(yield* session, driver.workerLockStatement(id)))
          }
          yield* driver.workerRegister("alive", t0, "h", 1)
          yield* driver.workerRegister("self", t0, "h", 2)
          yield* driver.workerRegister("unlocked", t0, "h", 3)
          yield* driver.workerRegister("old", t0 - s(120), "h", 4)
          yield* driver.workerRelocking("unlocked")
          yield* driver.workerRelocked("old")
          const byWorker = new Map<string, string>()
          for (const worker of ["alive", "self", "unlocked", "old", "gone", "pruned"]) {
            const [id] = yield* insert(driver, row("a", { payload: JSON.stringify({ worker }) }))
            yield* claim(driver, "a", 1, worker)
            byWorker.set(worker, id)
          }
          // Another name's lost job is not listed.
          yield* insert(driver, row("b"))
          yield* claim(driver, "b", 1, "gone")
          const listing = (orphaned: ReadonlyArray<OrphanedRow>) =>
            sortBy(orphaned, (o) => o.workerId ?? "").map((o) => [o.workerId, o.id, o.expired, o.relocking, o.relocks])
          // Claimed at t0, within the lease: a job without a worker row is not lost on PostgreSQL, and
          // on MySQL/MariaDB only while its worker's lock is free (then as a free lock is: not expired).
          const orphaned = yield* driver.jobListOrphaned(["a"], t0 - s(60), "self", 100)
          const expected = [
            ["old", byWorker.get("old")!, true, false, 1],
            ["self", byWorker.get("self")!, false, false, 0],
            ["unlocked", byWorker.get("unlocked")!, false, true, 0]
          ]
          assert.deepStrictEqual(
            listing(orphaned),
            target.dialect === "pg" ? expected : [["gone", byWorker.get("gone")!, false, false, 0], ...expected]
          )
          const old = orphaned.find((o) => o.workerId === "old")!
          assert.deepStrictEqual([old.name, old.attempts, old.claimedAtUs, old.payload], ["a", 1, t0, `{"worker":"old"}`])
          assert.strictEqual((yield* driver.jobListOrphaned(["a"], t0 - s(60), "self", 2)).length, 2)
          // Claimed longer than a lease ago with no worker row since: lost, whether the lock is held or not.
          const later = yield* driver.jobListOrphaned(["a"], t0 + s(1), "self", 100)
          assert.deepStrictEqual(listing(later).filter((o) => o[0] === "gone" || o[0] === "pruned"), [
            ["gone", byWorker.get("gone")!, true, false, 0],
            ["pruned", byWorker.get("pruned")!, true, false, 0]
          ])
          // Only the jobs of workers whose row says they are lost: not the caller's own, and (on
          // PostgreSQL; MySQL/MariaDB may list more) not those without a worker row.
          const lost = yield* driver.jobListOrphaned(["a"], t0 - s(60), "self", 100, "lost")
          const listed = listing(lost)
          const lostExpected = [
            ["old", byWorker.get("old")!, true, false, 1],
            ["unlocked", byWorker.get("unlocked")!, false, true, 0]
          ]
          assert.deepStrictEqual(listed.filter((o) => o[0] !== "gone"), lostExpected)
          if (target.dialect === "pg") assert.deepStrictEqual(listed, lostExpected)
          assert.strictEqual((yield* driver.jobListOrphaned(["a"], t0 - s(60), "self", 1, "lost")).length, 1)
        })))
  })

  describe("workerLockStatement", () => {
    it.live(name("one session at a time holds a worker's lock; the unlock frees it; ids are locked apart"), () =>
      withDriver(target, ({ driver }) =>
        Effect.gen(function*() {
          const a = yield* session
          const b = yield* session
          assert.isTrue(yield* runLock(a, driver.workerLockStatement("w1")))
          assert.isFalse(yield* runLock(b, driver.workerLockStatement("w1")))
          assert.isTrue(yield* runLock(b, driver.workerLockStatement("w2")))
          assert.isTrue(yield* runLock(a, unlockOf(driver, "w1")))
          assert.isTrue(yield* runLock(b, driver.workerLockStatement("w1")))
          assert.isFalse(yield* runLock(a, driver.workerLockStatement("w1")))
        })))

    it.live(name("a lock of the same worker id on another table prefix is another lock"), () =>
      withDriver(target, ({ driver }) =>
        withDriver(target, ({ driver: other }) =>
          Effect.gen(function*() {
            assert.isTrue(yield* runLock(yield* session, driver.workerLockStatement("w1")))
            assert.isTrue(yield* runLock(yield* session, other.workerLockStatement("w1")))
          }))))
  })

  describe("workerLockName", () => {
    it.live(name("the queue's lock prefix (database and table prefix) and the worker id"), () =>
      withDriver(target, ({ driver, prefix }) =>
        Effect.sync(() => {
          const database = new URL(target.url).pathname.slice(1)
          assert.strictEqual(driver.workerLockName("w1"), `${workerLockPrefix(target.dialect, database, prefix)}w1`)
          assert.match(driver.workerLockName("w1"), /^sqw[0-9a-z]{5}:w1$/)
        })))
  })

  describe("workerLockHolder", () => {
    it.live(name("the connection id of the session holding a worker's lock, null when free"), () =>
      withDriver(target, ({ driver }) =>
        Effect.gen(function*() {
          assert.isNull(yield* driver.workerLockHolder("w1"))
          const holder = yield* session
          assert.isTrue(yield* runLock(holder, driver.workerLockStatement("w1")))
          assert.strictEqual(yield* driver.workerLockHolder("w1"), yield* connectionId(driver, holder))
          assert.isNull(yield* driver.workerLockHolder("w2"))
          assert.isTrue(yield* runLock(holder, unlockOf(driver, "w1")))
          assert.isNull(yield* driver.workerLockHolder("w1"))
        })))

    it.live(name("ending the holder's connection frees the lock"), () =>
      withDriver(target, ({ driver }) =>
        Effect.gen(function*() {
          const holder = yield* session
          assert.isTrue(yield* runLock(holder, driver.workerLockStatement("w1")))
          yield* driver.endConnection((yield* driver.workerLockHolder("w1"))!)
          yield* waitUntil(Effect.map(driver.workerLockHolder("w1"), (h) => h === null), 5_000, "the lock to be freed")
          assert.isTrue(yield* runLock(yield* session, driver.workerLockStatement("w1")))
        })))
  })
}
