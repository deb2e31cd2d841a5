/**
 * Operations on jobs by id, by name and in bulk: `jobGet`, `jobCancel`, `jobRetry`,
 * `pausedInsert`/`pausedDelete`/`pausedList`, `jobList`, `jobStats`, `jobRetryByName`,
 * `jobKeyedIdsByName`, `jobProgressSet`/`jobProgressGet`, `jobPruneFinished`, `prunerLock`,
 * `jobDelete`, `jobCountByState`.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import type { Driver } from "../../src/internal/driver/Driver.js"
import { stateBits } from "../../src/internal/driver/shared.js"
import type { Target } from "../support/targets.js"
import { claim, end, ended, groups, insert, row, runLock, s, session, stateOf, t0, withDriver } from "./fixtures.js"

/** An id no job has: one past the largest of `ids`. */
const noSuchId = (ids: ReadonlyArray<string>) => String(Math.max(...ids.map(Number)) + 1000)

export const adminOps = (target: Target) => {
  const name = (title: string) => `[${target.id}] ${title}`

  describe("jobGet", () => {
    it.live(name("a running job as its attempt left it; undefined for an id with no job"), () =>
      withDriver(target, ({ driver }) =>
        Effect.gen(function*() {
          const { id } = yield* driver.jobInsertUnique(
            {
              ...row("a", { payload: `{"n":1}`, priority: 2, runAtUs: t0 - s(1), traceContext: "t:s:1" }),
              uniqueKey: "k",
              uniqueStates: stateBits.pending | stateBits.running | stateBits.completed
            },
            t0 - s(2),
            undefined
          )
          const [job] = yield* driver.jobClaim([{ name: "a", priority: 2 }], 1, t0, "w1")
          yield* driver.jobFinishMany([end(job, "pending", { runAtUs: t0 + s(5), lastError: "e1", errors: `["e1"]` })])
          yield* driver.jobClaim([{ name: "a", priority: 2 }], 1, t0 + s(5), "w1")
          assert.deepStrictEqual(yield* driver.jobGet(id), {
            id,
            name: "a",
            payload: `{"n":1}`,
            attempts: 2,
            attemptBase: 0,
            priority: 2,
            runAtUs: t0 + s(5),
            createdAtUs: t0 - s(2),
            errors: `["e1"]`,
            traceContext: "t:s:1",
            keepsKey: true,
            state: "running",
            claimedAtUs: t0 + s(5),
            finishedAtUs: null,
            lastError: "e1",
            result: null
          })
          assert.isUndefined(yield* driver.jobGet(noSuchId([id])))
        })))
  })

  describe("jobCancel", () => {
    it.live(name("cancels a pending or running job, finished now; false for any other"), () =>
      withDriver(target, ({ driver }) =>
        Effect.gen(function*() {
          const [pending, running] = yield* insert(driver, row("a", { runAtUs: t0 + s(1) }), row("a"))
          yield* claim(driver, "a")
          const completed = yield* ended(driver, "b", "completed")
          assert.isTrue(yield* driver.jobCancel(pending, t0 + s(2)))
          assert.isTrue(yield* driver.jobCancel(running, t0 + s(3)))
          const read = (id: string) => Effect.map(driver.jobGet(id), (j) => [j?.state, j?.finishedAtUs])
          assert.deepStrictEqual(yield* read(pending), ["cancelled", t0 + s(2)])
          assert.deepStrictEqual(yield* read(running), ["cancelled", t0 + s(3)])
          assert.deepStrictEqual((yield* driver.jobList({ name: "a", limit: 10 })).map((j) => j.workerId), [null, null])
          assert.isFalse(yield* driver.jobCancel(pending, t0 + s(4)))
          assert.isFalse(yield* driver.jobCancel(completed, t0))
          assert.isFalse(yield* driver.jobCancel(noSuchId([pending, running, completed]), t0))
          assert.deepStrictEqual(yield* read(pending), ["cancelled", t0 + s(2)])
        })))
  })

  describe("jobRetry", () => {
    it.live(name("puts a dead or cancelled job back to pending, due now, counting its attempts from here"), () =>
      withDriver(target, ({ driver }) =>
        Effect.gen(function*() {
          const dead = yield* ended(driver, "a", "dead", { lastError: "gave up" })
          const [cancelled, pending] = yield* insert(driver, row("b"), row("c"))
          yield* driver.jobCancel(cancelled, t0)
          const completed = yield* ended(driver, "d", "completed")
          assert.isTrue(yield* driver.jobRetry(dead, t0 + s(10)))
          assert.isTrue(yield* driver.jobRetry(cancelled, t0 + s(10)))
          const read = (id: string) =>
            Effect.map(driver.jobGet(id), (j) => [j?.state, j?.runAtUs, j?.finishedAtUs, j?.attempts, j?.attemptBase, j?.lastError])
          assert.deepStrictEqual(yield* read(dead), ["pending", t0 + s(10), null, 1, 1, "gave up"])
          assert.deepStrictEqual(yield* read(cancelled), ["pending", t0 + s(10), null, 0, 0, null])
          assert.isFalse(yield* driver.jobRetry(pending, t0))
          assert.isFalse(yield* driver.jobRetry(completed, t0))
          assert.isFalse(yield* driver.jobRetry(dead, t0))
        })))

    it.live(name("false, and nothing written, while another job holds its unique key"), () =>
      withDriver(target, ({ driver }) =>
        Effect.gen(function*() {
          const keyed = (payload: string) => ({
            ...row("a", { payload }),
            uniqueKey: "k",
            uniqueStates: stateBits.pending | stateBits.running
          })
          const first = yield* driver.jobInsertUnique(keyed("1"), t0, undefined)
          const [job] = yield* claim(driver, "a")
          yield* driver.jobFinishMany([end(job, "dead")])
          // Dead is outside the mask: the key is free, and another job takes it.
          const holder = yield* driver.jobInsertUnique(keyed("2"), t0, undefined)
          assert.isTrue(holder.inserted)
          assert.isFalse(yield* driver.jobRetry(first.id, t0))
          assert.strictEqual(yield* stateOf(driver, first.id), "dead")
          // Once the holder is gone from the key's states, the retry goes through.
          yield* driver.jobCancel(holder.id, t0)
          assert.isTrue(yield* driver.jobRetry(first.id, t0))
        })))
  })

  describe("pausedInsert, pausedDelete and pausedList", () => {
    it.live(name("pause and resume say whether they changed anything; the list is by name"), () =>
      withDriver(target, ({ driver }) =>
        Effect.gen(function*() {
          assert.isTrue(yield* driver.pausedInsert("b", t0))
          assert.isTrue(yield* driver.pausedInsert("a", t0 + s(1)))
          assert.isFalse(yield* driver.pausedInsert("a", t0 + s(2)))
          assert.deepStrictEqual(yield* driver.pausedList(), [
            { name: "a", pausedAtUs: t0 + s(1) },
            { name: "b", pausedAtUs: t0 }
          ])
          assert.isTrue(yield* driver.pausedDelete("a"))
          assert.isFalse(yield* driver.pausedDelete("a"))
          assert.isFalse(yield* driver.pausedDelete("none"))
          assert.deepStrictEqual(yield* driver.pausedList(), [{ name: "b", pausedAtUs: t0 }])
        })))

    it.live(name("names that differ by trailing spaces are one name exactly where the database pads them"), () =>
      withDriver(target, ({ driver }) =>
        Effect.gen(function*() {
          assert.isTrue(yield* driver.pausedInsert("a", t0))
          assert.strictEqual(yield* driver.pausedInsert("a ", t0), !driver.capabilities.padSpaceKeys)
        })))
  })

  describe("jobList", () => {
    it.live(name("jobs newest first, by name, state and page, at most limit"), () =>
      withDriver(target, ({ driver }) =>
        Effect.gen(function*() {
          const [a1, b1, a2, a3] = yield* insert(driver, row("a"), row("b"), row("a"), row("a"))
          yield* driver.jobCancel(a2, t0)
          const ids = (filter: Parameters<typeof driver.jobList>[0]) => Effect.map(driver.jobList(filter), (rows) => rows.map((r) => r.id))
          assert.deepStrictEqual(yield* ids({ limit: 10 }), [a3, a2, b1, a1])
          assert.deepStrictEqual(yield* ids({ name: "a", limit: 10 }), [a3, a2, a1])
          assert.deepStrictEqual(yield* ids({ name: "a", state: "pending", limit: 10 }), [a3, a1])
          assert.deepStrictEqual(yield* ids({ state: "cancelled", limit: 10 }), [a2])
          assert.deepStrictEqual(yield* ids({ limit: 2 }), [a3, a2])
          assert.deepStrictEqual(yield* ids({ beforeId: a2, limit: 2 }), [b1, a1])
          assert.deepStrictEqual(yield* ids({ name: "none", limit: 10 }), [])
          assert.deepStrictEqual(yield* driver.jobList({ name: "a", state: "cancelled", limit: 1 }), [{
            id: a2,
            name: "a",
            state: "cancelled",
            attempts: 0,
            priority: 0,
            runAtUs: t0,
            createdAtUs: t0,
            claimedAtUs: null,
            finishedAtUs: t0,
            workerId: null,
            lastError: null,
            progress: null
          }])
        })))
  })

  describe("jobList filters", () => {
    it.live(name("by id, unique key and creation time (from inclusive, before exclusive)"), () =>
      withDriver(target, ({ driver }) =>
        Effect.gen(function*() {
          const [a1, a2] = yield* driver.jobInsertMany([row("a"), row("a")], t0, undefined)
          const [a3] = yield* driver.jobInsertMany([row("a")], t0 + s(10), undefined)
          const { id: keyed } = yield* driver.jobInsertUnique(
            { ...row("a"), uniqueKey: "k1", uniqueStates: stateBits.pending },
            t0 + s(20),
            undefined
          )
          const ids = (filter: Parameters<typeof driver.jobList>[0]) => Effect.map(driver.jobList(filter), (rows) => rows.map((r) => r.id))
          assert.deepStrictEqual(yield* ids({ id: a2, limit: 10 }), [a2])
          assert.deepStrictEqual(yield* ids({ uniqueKey: "k1", limit: 10 }), [keyed])
          assert.deepStrictEqual(yield* ids({ uniqueKey: "k2", limit: 10 }), [])
          assert.deepStrictEqual(yield* ids({ createdFromUs: t0 + s(10), limit: 10 }), [keyed, a3])
          assert.deepStrictEqual(yield* ids({ createdBeforeUs: t0 + s(10), limit: 10 }), [a2, a1])
          assert.deepStrictEqual(yield* ids({ createdFromUs: t0 + s(10), createdBeforeUs: t0 + s(20), limit: 10 }), [a3])
        })))
  })

  describe("jobDelete", () => {
    it.live(name("deletes a job that is not running; false for a running job or an id with no job"), () =>
      withDriver(target, ({ driver }) =>
        Effect.gen(function*() {
          const [pending] = yield* insert(driver, row("a", { runAtUs: t0 + s(60) }))
          const [running] = yield* insert(driver, row("b"))
          yield* claim(driver, "b")
          const dead = yield* ended(driver, "c", "dead")
          assert.isTrue(yield* driver.jobDelete(pending))
          assert.isTrue(yield* driver.jobDelete(dead))
          assert.isFalse(yield* driver.jobDelete(running))
          assert.isFalse(yield* driver.jobDelete(pending))
          assert.deepStrictEqual([yield* stateOf(driver, pending), yield* stateOf(driver, dead), yield* stateOf(driver, running)], [
            undefined,
            undefined,
            "running"
          ])
        })))
  })

  describe("jobCountByState", () => {
    it.live(name("counts per name of the jobs in a state, at most cap of them"), () =>
      withDriver(target, ({ driver }) =>
        Effect.gen(function*() {
          yield* insert(driver, row("a"), row("a"), row("b"))
          yield* ended(driver, "c", "dead")
          const counts = (state: Parameters<typeof driver.jobCountByState>[0], cap: number) =>
            Effect.map(driver.jobCountByState(state, cap), (rows) =>
              Object.fromEntries(rows.map((r) => [r.name, r.count])))
          assert.deepStrictEqual(yield* counts("pending", 100), { a: 2, b: 1 })
          assert.deepStrictEqual(yield* counts("dead", 100), { c: 1 })
          assert.deepStrictEqual(yield* counts("running", 100), {})
          const capped = yield* driver.jobCountByState("pending", 2)
          assert.strictEqual(capped.reduce((n, r) => n + r.count, 0), 2)
        })))
  })

  describe("jobStats", () => {
    it.live(name("per name and state: count, due, the oldest due run_at, and recently finished"), () =>
      withDriver(target, ({ driver }) =>
        Effect.gen(function*() {
          yield* insert(
            driver,
            row("a", { runAtUs: t0 - s(5) }),
            row("a", { runAtUs: t0 - s(1) }),
            row("a", { runAtUs: t0 + s(60) })
          )
          yield* ended(driver, "b", "completed", { finishedAtUs: t0 - s(100) })
          yield* ended(driver, "b", "completed", { finishedAtUs: t0 - s(10) })
          yield* ended(driver, "b", "dead", { finishedAtUs: t0 - s(10) })
          assert.deepStrictEqual(yield* driver.jobStats(t0, t0 - s(30)), [
            { name: "a", state: "pending", count: 3, due: 2, oldestDueUs: t0 - s(5), recent: 0 },
            { name: "b", state: "completed", count: 2, due: 0, oldestDueUs: null, recent: 1 },
            { name: "b", state: "dead", count: 1, due: 0, oldestDueUs: null, recent: 1 }
          ])
        })))
  })

  describe("jobRetryByName", () => {
    /** Three dead jobs of "a" finished before `t0`, and those left dead: finished later, of "b", keyed. */
    const deadJobs = (driver: Driver) =>
      Effect.gen(function*() {
        const old = [
          yield* ended(driver, "a", "dead", { finishedAtUs: t0 - s(3) }),
          yield* ended(driver, "a", "dead", { finishedAtUs: t0 - s(2) }),
          yield* ended(driver, "a", "dead", { finishedAtUs: t0 - s(1) })
        ]
        const late = yield* ended(driver, "a", "dead", { finishedAtUs: t0 + s(1) })
        const other = yield* ended(driver, "b", "dead", { finishedAtUs: t0 - s(1) })
        const { id: keyed } = yield* driver.jobInsertUnique(
          { ...row("a"), uniqueKey: "k", uniqueStates: stateBits.pending | stateBits.running },
          t0,
          undefined
        )
        const [job] = yield* claim(driver, "a")
        yield* driver.jobFinishMany([end(job, "dead", { finishedAtUs: t0 - s(1) })])
        return { old, kept: [late, other, keyed] }
      })

    it.live(name("retries the jobs of a name and state finished by a time, leaving keyed jobs"), () =>
      withDriver(target, ({ driver }) =>
        Effect.gen(function*() {
          const { kept, old } = yield* deadJobs(driver)
          // Batch after batch, as `retryAll` calls it, until none is left.
          let retried = 0
          while (true) {
            const n = yield* driver.jobRetryByName("a", "dead", t0 + s(5), 2, t0)
            if (n === 0) break
            retried += n
          }
          assert.strictEqual(retried, 3)
          assert.strictEqual(yield* driver.jobRetryByName("a", "cancelled", t0 + s(5), 2, t0), 0)
          const read = (id: string) => Effect.map(driver.jobGet(id), (j) => [j?.state, j?.runAtUs, j?.finishedAtUs, j?.attemptBase])
          for (const id of old) assert.deepStrictEqual(yield* read(id), ["pending", t0 + s(5), null, 1])
          for (const id of kept) assert.strictEqual(yield* stateOf(driver, id), "dead")
        })))

    it.live(name("retries at most limit jobs per call, oldest ids first"), () =>
      withDriver(target, ({ driver }) =>
        Effect.gen(function*() {
          const { old } = yield* deadJobs(driver)
          assert.strictEqual(yield* driver.jobRetryByName("a", "dead", t0 + s(5), 2, t0), 2)
          assert.deepStrictEqual(
            yield* Effect.forEach(old, (id) => stateOf(driver, id)),
            ["pending", "pending", "dead"]
          )
          assert.strictEqual(yield* driver.jobRetryByName("a", "dead", t0 + s(5), 2, t0), 1)
        })))
  })

  describe("jobKeyedIdsByName", () => {
    it.live(name("ids of keyed jobs of a name and state finished by a time, after an id, in order"), () =>
      withDriver(target, ({ driver }) =>
        Effect.gen(function*() {
          const keyedDead = (key: string, finishedAtUs: number) =>
            Effect.gen(function*() {
              const { id } = yield* driver.jobInsertUnique(
                { ...row("a"), uniqueKey: key, uniqueStates: stateBits.pending | stateBits.running },
                t0,
                undefined
              )
              const [job] = yield* claim(driver, "a")
              yield* driver.jobFinishMany([end(job, "dead", { finishedAtUs })])
              return id
            })
          const k1 = yield* keyedDead("k1", t0 - s(2))
          const k2 = yield* keyedDead("k2", t0 - s(1))
          const k3 = yield* keyedDead("k3", t0 - s(1))
          yield* keyedDead("k4", t0 + s(1))
          yield* ended(driver, "a", "dead", { finishedAtUs: t0 - s(1) })
          assert.deepStrictEqual(yield* driver.jobKeyedIdsByName("a", "dead", "0", t0, 10), [k1, k2, k3])
          assert.deepStrictEqual(yield* driver.jobKeyedIdsByName("a", "dead", "0", t0, 2), [k1, k2])
          assert.deepStrictEqual(yield* driver.jobKeyedIdsByName("a", "dead", k2, t0, 2), [k3])
          assert.deepStrictEqual(yield* driver.jobKeyedIdsByName("a", "cancelled", "0", t0, 10), [])
          assert.deepStrictEqual(yield* driver.jobKeyedIdsByName("b", "dead", "0", t0, 10), [])
        })))
  })

  describe("jobProgressSet and jobProgressGet", () => {
    it.live(name("a running attempt records its progress; another attempt records nothing"), () =>
      withDriver(target, ({ driver }) =>
        Effect.gen(function*() {
          const [id, idle] = yield* insert(driver, row("a"), row("b"))
          assert.isNull(yield* driver.jobProgressGet(id))
          yield* claim(driver, "a")
          assert.isTrue(yield* driver.jobProgressSet(id, 1, `{"done":1}`))
          assert.isTrue(yield* driver.jobProgressSet(id, 1, `{"done":2}`))
          assert.strictEqual(yield* driver.jobProgressGet(id), `{"done":2}`)
          assert.isFalse(yield* driver.jobProgressSet(id, 2, `{"done":3}`))
          assert.isFalse(yield* driver.jobProgressSet(idle, 0, `{"done":3}`))
          assert.strictEqual(yield* driver.jobProgressGet(id), `{"done":2}`)
          assert.isNull(yield* driver.jobProgressGet(idle))
          assert.isNull(yield* driver.jobProgressGet(noSuchId([id, idle])))
        })))
  })

  describe("jobPruneFinished", () => {
    it.live(name("deletes up to limit jobs of a state finished before the cutoff, oldest first"), () =>
      withDriver(target, ({ driver }) =>
        Effect.gen(function*() {
          const oldest = yield* ended(driver, "a", "completed", { finishedAtUs: t0 - s(3) })
          const older = yield* ended(driver, "a", "completed", { finishedAtUs: t0 - s(1) })
          const old = yield* ended(driver, "a", "completed", { finishedAtUs: t0 - s(2) })
          const recent = yield* ended(driver, "a", "completed", { finishedAtUs: t0 })
          const dead = yield* ended(driver, "a", "dead", { finishedAtUs: t0 - s(9) })
          assert.strictEqual(yield* driver.jobPruneFinished("completed", t0, 2), 2)
          // Oldest by finished_at; on PostgreSQL completed jobs go in id order (enqueue order).
          assert.deepStrictEqual(
            yield* Effect.forEach([oldest, old, older, recent, dead], (id) => stateOf(driver, id)),
            target.dialect === "pg"
              ? [undefined, "completed", undefined, "completed", "dead"]
              : [undefined, undefined, "completed", "completed", "dead"]
          )
          assert.strictEqual(yield* driver.jobPruneFinished("completed", t0, 2), 1)
          assert.strictEqual(yield* driver.jobPruneFinished("completed", t0, 2), 0)
          assert.strictEqual(yield* stateOf(driver, recent), "completed")
          assert.strictEqual(yield* driver.jobPruneFinished("dead", t0, 2), 1)
        })))

    it.live(name("keeps a completed job created before the cutoff and finished after it, among jobs created since"), () =>
      withDriver(target, ({ driver }) =>
        Effect.gen(function*() {
          const cutoffUs = t0 - s(1800)
          // Created two hours before t0: one finished an hour before it, one at t0 (a job that
          // waited or ran long); then jobs created and finished at t0.
          const endedAt = (createdUs: number, finishedAtUs: number) =>
            Effect.gen(function*() {
              const [id] = yield* driver.jobInsertMany([row("a", { runAtUs: createdUs })], createdUs, undefined)
              const [job] = yield* driver.jobClaim(groups("a"), 1, t0, "w1")
              if (job?.id !== id) return yield* Effect.dieMessage(`expected to claim job ${id}`)
              yield* driver.jobFinishMany([end(job, "completed", { finishedAtUs })])
              return id
            })
          const pruned = yield* endedAt(t0 - s(7200), t0 - s(3600))
          const kept = yield* endedAt(t0 - s(7200), t0)
          const recent = yield* Effect.forEach([1, 2, 3], () => endedAt(t0, t0))
          assert.strictEqual(yield* driver.jobPruneFinished("completed", cutoffUs, 10), 1)
          assert.deepStrictEqual(
            yield* Effect.forEach([pruned, kept, ...recent], (id) => stateOf(driver, id)),
            [undefined, "completed", "completed", "completed", "completed"]
          )
          assert.strictEqual(yield* driver.jobPruneFinished("completed", cutoffUs, 10), 0)
          // Once the cutoff passes its end, it goes too.
          assert.strictEqual(yield* driver.jobPruneFinished("completed", t0 + 1, 10), 4)
        })))
  })

  describe("prunerLock", () => {
    it.live(name("one session at a time holds the pruner's lock of a prefix, until it unlocks"), () =>
      withDriver(target, ({ driver }) =>
        Effect.gen(function*() {
          const a = yield* session
          const b = yield* session
          assert.isTrue(yield* runLock(a, driver.prunerLock.lock))
          assert.isFalse(yield* runLock(b, driver.prunerLock.lock))
          assert.isTrue(yield* runLock(a, driver.prunerLock.unlock))
          assert.isTrue(yield* runLock(b, driver.prunerLock.lock))
          assert.isTrue(yield* runLock(b, driver.prunerLock.unlock))
        })))
  })
}
