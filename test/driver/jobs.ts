/**
 * The probe, the claims and the ends of attempts: `jobProbe`, `jobClaim`, `jobClaimKeyed`,
 * `jobCountDue`, `jobFinishMany`, `jobEndsNotHeld`, `jobFinishManyAndClaim`.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import type { NameLimits } from "../../src/internal/driver/Driver.js"
import { endKey } from "../../src/internal/driver/shared.js"
import { holdJobRow, openTransaction, waitUntil } from "../support/helpers.js"
import type { Target } from "../support/targets.js"
import { claim, end, groups, insert, insertDue, row, s, sortBy, stateOf, t0, withDriver } from "./fixtures.js"

/** A limit of `running` on the job name "a". */
const limitA = (running: number): ReadonlyMap<string, NameLimits> => new Map([["a", { running, runningPerKey: undefined }]])

/**
 * Another claim in flight, by hand: a transaction, on a connection of its own, that has made job
 * `id` running in slot `slot` of its name and not committed. `end(true)` commits it, `end(false)`
 * rolls it back.
 */
const claimInFlight = (prefix: string, id: string, slot: number) =>
  Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    const { end, value: xid } = yield* openTransaction(Effect.gen(function*() {
      yield* sql`UPDATE ${sql(prefix + "jobs")} SET state = 'running', name_slot = ${slot}, worker_id = 'other'
        WHERE id = ${id}`
      const [row] = yield* sql<{ xid: string }>`SELECT xid(pg_current_xact_id())::text AS xid`
      return row.xid
    }))
    return {
      end,
      /** Whether a statement of another session waits for this transaction (on a row or an index entry). */
      waitedFor: Effect.map(
        sql<{ n: string }>`SELECT count(*) AS n FROM pg_locks
          WHERE locktype = 'transactionid' AND NOT granted AND transactionid = ${xid}::xid`,
        (rows) => Number(rows[0].n) > 0
      )
    }
  })

export const jobsOps = (target: Target) => {
  const name = (title: string) => `[${target.id}] ${title}`

  describe("jobProbe", () => {
    it.live(name("the earliest run_at of each (name, priority) with pending jobs, of the names asked only"), () =>
      withDriver(target, ({ driver }) =>
        Effect.gen(function*() {
          yield* insert(
            driver,
            row("a", { runAtUs: t0 + s(5) }),
            row("a", { runAtUs: t0 + s(1) }),
            row("a", { priority: 1, runAtUs: t0 - s(2) }),
            row("b", { runAtUs: t0 }),
            row("c", { runAtUs: t0 }),
            row("d", { runAtUs: t0 - s(9) })
          )
          // A running job is not pending: d has no group left.
          yield* claim(driver, "d")
          const expected = [
            { name: "a", priority: 0, nextUs: t0 + s(1) },
            { name: "a", priority: 1, nextUs: t0 - s(2) },
            { name: "b", priority: 0, nextUs: t0 }
          ]
          const key = (r: { name: string; priority: number }) => `${r.name}/${r.priority}`
          assert.deepStrictEqual(sortBy(yield* driver.jobProbe(["a", "b", "d", "none"]), key), expected)
          // Past 32 names PostgreSQL's probe may scan every group instead: the same answer.
          const many = ["a", "b", "d", ...Array.from({ length: 40 }, (_, i) => `other-${i}`)]
          assert.deepStrictEqual(sortBy(yield* driver.jobProbe(many), key), expected)
          assert.deepStrictEqual(yield* driver.jobProbe(["none"]), [])
        })))
  })

  describe("jobClaim", () => {
    it.live(name("takes due jobs of its groups in priority, run_at, id order; marks them running and counts the attempt"), () =>
      withDriver(target, ({ driver }) =>
        Effect.gen(function*() {
          const [late, early, urgent, tie1, tie2, future, other] = yield* insert(
            driver,
            row("a", { runAtUs: t0 - s(1) }),
            row("a", { runAtUs: t0 - s(3) }),
            row("a", { priority: -5, runAtUs: t0 }),
            row("a", { runAtUs: t0 - s(2) }),
            row("a", { runAtUs: t0 - s(2) }),
            row("a", { runAtUs: t0 + s(1) }),
            row("b", { runAtUs: t0 - s(9) })
          )
          const claimed = yield* driver.jobClaim(
            [{ name: "a", priority: 0 }, { name: "a", priority: -5 }],
            10,
            t0,
            "worker-1"
          )
          assert.deepStrictEqual(claimed.map((j) => j.id), [urgent, early, tie1, tie2, late])
          assert.deepStrictEqual(claimed[0], {
            id: urgent,
            name: "a",
            payload: "{}",
            attempts: 1,
            attemptBase: 0,
            priority: -5,
            runAtUs: t0,
            createdAtUs: t0,
            errors: null,
            traceContext: null,
            keepsKey: false
          })
          const job = yield* driver.jobGet(early)
          assert.deepStrictEqual([job?.state, job?.attempts, job?.claimedAtUs], ["running", 1, t0])
          const listed = yield* driver.jobList({ state: "running", limit: 10 })
          assert.deepStrictEqual(listed.map((j) => j.workerId), claimed.map(() => "worker-1"))
          // Not due, and not of its groups: left pending.
          assert.strictEqual(yield* stateOf(driver, future), "pending")
          assert.strictEqual(yield* stateOf(driver, other), "pending")
        })))

    it.live(name("takes at most limit jobs, the first in claim order; the next claim takes the rest"), () =>
      withDriver(target, ({ driver }) =>
        Effect.gen(function*() {
          const ids = yield* insert(driver, ...Array.from({ length: 5 }, (_, i) => row("a", { runAtUs: t0 - s(5 - i) })))
          assert.deepStrictEqual((yield* claim(driver, "a", 2)).map((j) => j.id), ids.slice(0, 2))
          assert.deepStrictEqual((yield* claim(driver, "a", 2)).map((j) => j.id), ids.slice(2, 4))
          assert.deepStrictEqual((yield* claim(driver, "a", 2)).map((j) => j.id), ids.slice(4))
          assert.deepStrictEqual(yield* claim(driver, "a", 2), [])
        })))

    it.live(name("a job claimed again counts its next attempt"), () =>
      withDriver(target, ({ driver }) =>
        Effect.gen(function*() {
          const [id] = yield* insert(driver, row("a"))
          const [first] = yield* claim(driver, "a")
          yield* driver.jobFinishMany([end(first, "pending", { runAtUs: t0 })])
          const [second] = yield* claim(driver, "a")
          assert.deepStrictEqual([second.id, second.attempts], [id, 2])
        })))

    it.live(name("skips a job whose row another transaction holds (SKIP LOCKED)"), () =>
      withDriver(target, ({ driver, prefix }) =>
        Effect.gen(function*() {
          const [held, free] = yield* insert(driver, row("a", { runAtUs: t0 - s(2) }), row("a", { runAtUs: t0 - s(1) }))
          const release = yield* holdJobRow(prefix, held)
          const claimed = yield* claim(driver, "a").pipe(Effect.timeout("5 seconds"))
          yield* release
          assert.deepStrictEqual(claimed.map((j) => j.id), [free])
          assert.deepStrictEqual((yield* claim(driver, "a")).map((j) => j.id), [held])
        })))

    it.live(name("takes no job of a paused name, and takes them again once it is resumed"), () =>
      withDriver(target, ({ driver }) =>
        Effect.gen(function*() {
          const [a, b] = yield* insert(driver, row("a"), row("b"))
          assert.isTrue(yield* driver.pausedInsert("a", t0))
          const claimed = yield* driver.jobClaim(groups("a", "b"), 10, t0, "w1")
          assert.deepStrictEqual(claimed.map((j) => j.id), [b])
          assert.strictEqual(yield* stateOf(driver, a), "pending")
          assert.isTrue(yield* driver.pausedDelete("a"))
          assert.deepStrictEqual((yield* claim(driver, "a")).map((j) => j.id), [a])
        })))

    it.live(name("leaves jobs with a mutex key to the keyed claim"), () =>
      withDriver(target, ({ driver }) =>
        Effect.gen(function*() {
          const [keyed, plain] = yield* insert(driver, row("a", { mutexKey: "k" }), row("a"))
          assert.deepStrictEqual((yield* claim(driver, "a")).map((j) => j.id), [plain])
          assert.strictEqual(yield* stateOf(driver, keyed), "pending")
        })))
  })

  describe("jobClaimKeyed", () => {
    it.live(name("takes jobs without a key and the first due job of each key, in claim order"), () =>
      withDriver(target, ({ driver }) =>
        Effect.gen(function*() {
          const [k1a, k1b, k2, none, future] = yield* insert(
            driver,
            row("a", { mutexKey: "k1", runAtUs: t0 - s(4) }),
            row("a", { mutexKey: "k1", runAtUs: t0 - s(3) }),
            row("a", { mutexKey: "k2", runAtUs: t0 - s(2) }),
            row("a", { runAtUs: t0 - s(1) }),
            row("a", { mutexKey: "k3", runAtUs: t0 + s(1) })
          )
          const claimed = yield* driver.jobClaimKeyed(groups("a"), 10, t0, "w1")
          assert.deepStrictEqual(claimed.map((j) => [j.id, j.attempts]), [[k1a, 1], [k2, 1], [none, 1]])
          // k1 has a running job: its next job waits for it.
          assert.deepStrictEqual(yield* driver.jobClaimKeyed(groups("a"), 10, t0, "w1"), [])
          yield* driver.jobFinishMany([end(claimed[0], "completed")])
          assert.deepStrictEqual((yield* driver.jobClaimKeyed(groups("a"), 10, t0, "w1")).map((j) => j.id), [k1b])
          assert.strictEqual(yield* stateOf(driver, future), "pending")
        })))

    it.live(name("a key running under another job name holds back this name's job of that key"), () =>
      withDriver(target, ({ driver }) =>
        Effect.gen(function*() {
          const [x, y] = yield* insert(driver, row("x", { mutexKey: "shared" }), row("y", { mutexKey: "shared" }))
          assert.deepStrictEqual((yield* driver.jobClaimKeyed(groups("x"), 1, t0, "w1")).map((j) => j.id), [x])
          assert.deepStrictEqual(yield* driver.jobClaimKeyed(groups("y"), 1, t0, "w2"), [])
          assert.strictEqual(yield* stateOf(driver, y), "pending")
        })))

    it.live(name("takes at most limit jobs, and none of a paused name"), () =>
      withDriver(target, ({ driver }) =>
        Effect.gen(function*() {
          const [k1, k2] = yield* insert(
            driver,
            row("a", { mutexKey: "k1", runAtUs: t0 - s(2) }),
            row("a", { mutexKey: "k2", runAtUs: t0 - s(1) }),
            row("a", { mutexKey: "k3" })
          )
          yield* driver.pausedInsert("a", t0)
          assert.deepStrictEqual(yield* driver.jobClaimKeyed(groups("a"), 2, t0, "w1"), [])
          yield* driver.pausedDelete("a")
          assert.deepStrictEqual((yield* driver.jobClaimKeyed(groups("a"), 2, t0, "w1")).map((j) => j.id), [k1, k2])
        })))

    // A claim that waited on the unique index for another claim's slot could deadlock with that
    // worker's next write of ends (see `claimLockTimeout`, driver/pg/jobs.ts), for PostgreSQL's
    // `deadlock_timeout`. (MySQL/MariaDB find a deadlock at once.)
    it.live.skipIf(target.dialect !== "pg")(name("a claim does not wait for a slot another claim in flight wrote"), () =>
      withDriver(target, ({ driver, prefix }) =>
        Effect.gen(function*() {
          const [a1, a2] = yield* insertDue(driver, "a", 2)
          // a1 in slot 0, not committed: this claim's snapshot shows slot 0 free and gives it to a2.
          const other = yield* claimInFlight(prefix, a1, 0)
          const claimed = yield* driver.jobClaimKeyed(groups("a"), 10, t0, "w1", limitA(2)).pipe(
            Effect.timeout("10 seconds"),
            Effect.exit
          )
          yield* other.end(false)
          // It gave up (tried 5 times) instead of waiting for the other transaction to end.
          assert.deepStrictEqual(claimed, Exit.succeed([]))
          assert.strictEqual(yield* stateOf(driver, a2), "pending")
        })))

    it.live(name("keys that differ by trailing spaces are one key exactly where the database pads them"), () =>
      withDriver(target, ({ driver }) =>
        Effect.gen(function*() {
          const ids = yield* insert(driver, row("a", { mutexKey: "k", runAtUs: t0 - s(1) }), row("a", { mutexKey: "k " }))
          const claimed = yield* driver.jobClaimKeyed(groups("a"), 10, t0, "w1")
          assert.deepStrictEqual(claimed.map((j) => j.id), driver.capabilities.padSpaceKeys ? ids.slice(0, 1) : ids)
        })))
  })

  describe("jobCountDue", () => {
    it.live(name("counts due pending jobs per name, each up to the cap"), () =>
      withDriver(target, ({ driver }) =>
        Effect.gen(function*() {
          yield* insert(
            driver,
            row("a"),
            row("a", { runAtUs: t0 - s(1) }),
            row("a", { priority: 4 }),
            row("a", { runAtUs: t0 + s(1) }),
            row("b"),
            row("c")
          )
          yield* claim(driver, "c")
          const counts = yield* driver.jobCountDue(["a", "b", "c", "none"], t0, 2)
          assert.deepStrictEqual(sortBy(counts, (c) => c.name), [
            { name: "a", due: 2 },
            { name: "b", due: 1 },
            { name: "c", due: 0 },
            { name: "none", due: 0 }
          ])
          assert.deepStrictEqual(
            sortBy(yield* driver.jobCountDue(["a"], t0 + s(1), 10), (c) => c.name),
            [{ name: "a", due: 4 }]
          )
        })))
  })

  describe("jobFinishMany", () => {
    it.live(name("writes each kind of end: completed, retried, dead, released"), () =>
      withDriver(target, ({ driver }) =>
        Effect.gen(function*() {
          const [done, again, dead, released] = yield* insert(driver, row("a"), row("a"), row("a"), row("a"))
          const claimed = yield* claim(driver, "a")
          const [cDone, cAgain, cDead, cReleased] = claimed
          const stale = yield* driver.jobFinishMany([
            end(cDone, "completed", { result: `{"ok":true}` }),
            end(cAgain, "pending", { runAtUs: t0 + s(30), lastError: "boom", errors: `["boom"]` }),
            end(cDead, "dead", { lastError: "gave up", errors: `["gave up"]` }),
            end(cReleased, "released")
          ])
          assert.strictEqual(stale.size, 0)
          const read = (id: string) =>
            Effect.map(driver.jobGet(id), (j) => [j?.state, j?.attempts, j?.runAtUs, j?.finishedAtUs, j?.lastError, j?.errors, j?.result])
          assert.deepStrictEqual(yield* read(done), ["completed", 1, t0, t0 + s(1), null, null, `{"ok":true}`])
          assert.deepStrictEqual(yield* read(again), ["pending", 1, t0 + s(30), null, "boom", `["boom"]`, null])
          assert.deepStrictEqual(yield* read(dead), ["dead", 1, t0, t0 + s(1), "gave up", `["gave up"]`, null])
          // Released: back to pending, the attempt not counted.
          assert.deepStrictEqual(yield* read(released), ["pending", 0, t0, null, null, null, null])
          // No end keeps its worker.
          assert.deepStrictEqual((yield* driver.jobList({ limit: 10 })).map((j) => j.workerId), [null, null, null, null])
        })))

    it.live(name("an end of a stale attempt changes nothing and is returned; the others are written"), () =>
      withDriver(target, ({ driver }) =>
        Effect.gen(function*() {
          const [a, b, c] = yield* insert(driver, row("a"), row("a"), row("a"))
          const [ca, cb, cc] = yield* claim(driver, "a")
          // b was cancelled while its attempt ran; c's end names an attempt it is not at.
          assert.isTrue(yield* driver.jobCancel(b, t0))
          const stale = yield* driver.jobFinishMany([
            end(ca, "completed"),
            end(cb, "completed"),
            end({ id: cc.id, attempts: 2 }, "dead")
          ])
          assert.deepStrictEqual([...stale].sort(), [endKey(b, 1), endKey(c, 2)].sort())
          assert.strictEqual(yield* stateOf(driver, a), "completed")
          const cancelled = yield* driver.jobGet(b)
          assert.deepStrictEqual([cancelled?.state, cancelled?.finishedAtUs], ["cancelled", t0])
          const running = yield* driver.jobGet(c)
          assert.deepStrictEqual([running?.state, running?.attempts, running?.finishedAtUs], ["running", 1, null])
          // The same end again: its attempt is over, so it is stale now.
          assert.deepStrictEqual([...(yield* driver.jobFinishMany([end(ca, "dead")]))], [endKey(a, 1)])
          assert.strictEqual(yield* stateOf(driver, a), "completed")
        })))

    it.live(name("with completed rows deleted at once: a completed end deletes its row unless kept"), () =>
      withDriver(target, ({ driver }) =>
        Effect.gen(function*() {
          const [gone, kept, dead] = yield* insert(driver, row("a"), row("a"), row("a"))
          const [cGone, cKept, cDead] = yield* claim(driver, "a")
          const stale = yield* driver.jobFinishMany([
            end(cGone, "completed"),
            end(cKept, "completed", { keep: true }),
            end(cDead, "dead")
          ])
          assert.strictEqual(stale.size, 0)
          assert.strictEqual(yield* stateOf(driver, gone), undefined)
          assert.strictEqual(yield* stateOf(driver, kept), "completed")
          assert.strictEqual(yield* stateOf(driver, dead), "dead")
          // A stale completed end deletes nothing.
          const [again] = yield* insert(driver, row("a"))
          const [cAgain] = yield* claim(driver, "a")
          yield* driver.jobCancel(again, t0)
          assert.deepStrictEqual([...(yield* driver.jobFinishMany([end(cAgain, "completed")]))], [endKey(again, 1)])
          assert.strictEqual(yield* stateOf(driver, again), "cancelled")
        }), { retention: { completed: 0 } }))
  })

  describe("jobEndsNotHeld", () => {
    it.live(name("of ends, those their rows do not hold now: never written, or moved on since"), () =>
      withDriver(target, ({ driver }) =>
        Effect.gen(function*() {
          const [done, retried, running] = yield* insert(driver, row("a"), row("a"), row("a"))
          const [cDone, cRetried, cRunning] = yield* claim(driver, "a")
          const written = [end(cDone, "completed"), end(cRetried, "pending", { runAtUs: t0, lastError: "x" })]
          yield* driver.jobFinishMany(written)
          assert.strictEqual((yield* driver.jobEndsNotHeld(written)).size, 0)
          // Never written: the row is still running.
          assert.deepStrictEqual([...(yield* driver.jobEndsNotHeld([end(cRunning, "completed")]))], [endKey(running, 1)])
          // The retried job was claimed again: its row no longer holds the end of attempt 1.
          yield* claim(driver, "a")
          assert.deepStrictEqual([...(yield* driver.jobEndsNotHeld(written))], [endKey(retried, 1)])
          assert.strictEqual(yield* stateOf(driver, done), "completed")
        })))

    it.live(name("with completed rows deleted at once: a deleted row holds its completed end"), () =>
      withDriver(target, ({ driver }) =>
        Effect.gen(function*() {
          const [, running] = yield* insert(driver, row("a"), row("a"))
          const [cGone, cRunning] = yield* claim(driver, "a")
          const gone = end(cGone, "completed")
          yield* driver.jobFinishMany([gone])
          assert.strictEqual((yield* driver.jobEndsNotHeld([gone])).size, 0)
          assert.deepStrictEqual([...(yield* driver.jobEndsNotHeld([end(cRunning, "completed")]))], [endKey(running, 1)])
        }), { retention: { completed: 0 } }))
  })

  describe("jobFinishManyAndClaim", () => {
    it.live(name("writes the ends and claims in claim order, never a job whose end it just wrote"), () =>
      withDriver(target, ({ driver }) =>
        Effect.gen(function*() {
          const [a1, a2, a3, a4] = yield* insertDue(driver, "a", 4)
          const [c1, c2] = yield* claim(driver, "a", 2)
          // a2 is released: pending again, but not claimed by the same call.
          const { claimed, stale } = yield* driver.jobFinishManyAndClaim!(
            [end(c1, "completed"), end(c2, "released")],
            groups("a"),
            5,
            t0,
            "w2"
          )
          assert.strictEqual(stale.size, 0)
          assert.deepStrictEqual(claimed.map((j) => [j.id, j.attempts]), [[a3, 1], [a4, 1]])
          assert.strictEqual(yield* stateOf(driver, a1), "completed")
          assert.deepStrictEqual(
            (yield* driver.jobList({ state: "running", limit: 10 })).map((j) => [j.id, j.workerId]),
            [[a4, "w2"], [a3, "w2"]]
          )
          const released = yield* driver.jobGet(a2)
          assert.deepStrictEqual([released?.state, released?.attempts], ["pending", 0])
        })))

    it.live(name("a stale end changes nothing and is returned; what it claims is claimed"), () =>
      withDriver(target, ({ driver }) =>
        Effect.gen(function*() {
          const [a1, a2] = yield* insert(driver, row("a", { runAtUs: t0 - s(1) }), row("a"))
          const [c1] = yield* claim(driver, "a", 1)
          yield* driver.jobCancel(a1, t0)
          const { claimed, stale } = yield* driver.jobFinishManyAndClaim!([end(c1, "completed")], groups("a"), 5, t0, "w2")
          assert.deepStrictEqual([...stale], [endKey(a1, 1)])
          assert.strictEqual(yield* stateOf(driver, a1), "cancelled")
          // Whether the claim went on beside a stale end is the driver's choice; what it returns is running.
          assert.isTrue(claimed.every((j) => j.id === a2 && j.attempts === 1))
          assert.strictEqual(yield* stateOf(driver, a2), claimed.length === 1 ? "running" : "pending")
        })))

    it.live.skipIf(target.dialect !== "pg")(
      name("a claim that lost a race for a slot is made again with the ends, not dropped"),
      () =>
        withDriver(target, ({ driver, prefix }) =>
          Effect.gen(function*() {
            const [a1, a2, a3, a4] = yield* insertDue(driver, "a", 4)
            const [c1] = yield* driver.jobClaimKeyed(groups("a"), 1, t0, "w1", limitA(3))
            assert.deepStrictEqual([c1.id, c1.nameSlot], [a1, 0])
            // a2 in slot 1, not committed: the ride's snapshot shows slots 0 and 1 free, so it gives
            // them to a3 and a4 and waits on slot 1; the other transaction then commits, and the
            // ride's claim loses the race (the unique index).
            const other = yield* claimInFlight(prefix, a2, 1)
            const ride = yield* Effect.fork(driver.jobFinishManyAndClaim!(
              [end(c1, "completed")],
              groups("a"),
              5,
              t0,
              "w1",
              { limits: limitA(3) }
            ))
            yield* waitUntil(other.waitedFor, 10_000, "the ride to wait for the other claim")
            yield* other.end(true)
            const { claimed, stale } = yield* Fiber.join(ride)
            assert.strictEqual(stale.size, 0)
            assert.strictEqual(yield* stateOf(driver, a1), "completed")
            // Made again on a new snapshot: slot 1 is a2's. Written alone, the ends would have
            // claimed nothing (and freed slot 0 for other workers).
            assert.deepStrictEqual(claimed.map((j) => [j.id, j.nameSlot]), [[a3, 0], [a4, 2]])
          })))

    it.live(name("claims no job of a paused name"), () =>
      withDriver(target, ({ driver }) =>
        Effect.gen(function*() {
          const [a1, a2] = yield* insert(driver, row("a", { runAtUs: t0 - s(1) }), row("a"))
          const [c1] = yield* claim(driver, "a", 1)
          yield* driver.pausedInsert("a", t0)
          const { claimed, stale } = yield* driver.jobFinishManyAndClaim!([end(c1, "completed")], groups("a"), 5, t0, "w1")
          assert.deepStrictEqual([claimed, stale.size], [[], 0])
          assert.strictEqual(yield* stateOf(driver, a1), "completed")
          assert.strictEqual(yield* stateOf(driver, a2), "pending")
        })))
  })
}
