/**
 * Dialect differences found by the compatibility matrix (docs/compatibility.md), checked without a
 * database where the behaviour is sqlane's own.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Schema from "effect/Schema"
import { inject } from "vitest"
import { Job, Worker } from "../src/index.js"
import { isTransient, retryTransient } from "../src/internal/driver/errors.js"
import { Database } from "../src/internal/Database.js"
import { withQueue } from "./support/helpers.js"

const sqlError = (cause: object) => new SqlError({ cause, message: "Failed to execute statement" })

describe("compatibility: transient errors", () => {
  it("MariaDB 11.6.2+'s snapshot-isolation error 1020 is retried like a deadlock", () => {
    assert.isTrue(isTransient(sqlError({ errno: 1020, code: "ER_CHECKREAD" })))
    assert.isTrue(isTransient(sqlError({ errno: 1020 })))
    assert.isTrue(isTransient(sqlError({ errno: 1213, code: "ER_LOCK_DEADLOCK" })))
    assert.isTrue(isTransient(sqlError({ code: "40P01" })))
    // A duplicate key or a syntax error is not transient.
    assert.isFalse(isTransient(sqlError({ errno: 1062, code: "ER_DUP_ENTRY" })))
    assert.isFalse(isTransient(sqlError({ errno: 1064, code: "ER_PARSE_ERROR" })))
  })
})

describe("compatibility: retrying transient errors", () => {
  // it.effect runs under TestClock: the retry's pauses must not wait for TestClock.adjust (a claim
  // that met a deadlock on MariaDB 11.8 hung there for good).
  it.effect("a statement that deadlocks twice succeeds on its third try, under TestClock", () =>
    Effect.gen(function*() {
      let tries = 0
      const statement = Effect.suspend(() =>
        ++tries <= 2 ? Effect.fail(sqlError({ errno: 1213, code: "ER_LOCK_DEADLOCK" })) : Effect.succeed("claimed")
      )
      // Under TestClock a timeout would not fire either: the test's own 10 s limit is the check.
      const result = yield* retryTransient(statement)
      assert.strictEqual(result, "claimed")
      assert.strictEqual(tries, 3)
    }), 10_000)

  it.effect("gives up after 5 retries, and never retries a duplicate key", () =>
    Effect.gen(function*() {
      let tries = 0
      const deadlocks = Effect.suspend(() => (++tries, Effect.fail(sqlError({ errno: 1020, code: "ER_CHECKREAD" }))))
      const exit = yield* Effect.exit(retryTransient(deadlocks))
      assert.isTrue(Exit.isFailure(exit))
      assert.strictEqual(tries, 6)
      let dupTries = 0
      const duplicate = Effect.suspend(() => (++dupTries, Effect.fail(sqlError({ errno: 1062, code: "ER_DUP_ENTRY" }))))
      yield* Effect.exit(retryTransient(duplicate))
      assert.strictEqual(dupTries, 1)
    }), 10_000)
})

const Noop = Job.make("compat-noop", { payload: Schema.Struct({}) })

for (const target of inject("targets")) {
  describe(`compatibility: worker ids [${target.id}]`, () => {
    // MySQL refuses GET_LOCK names over 64 characters (error 3057); a worker's lock is sqw<scope>:<id>.
    it.live(`[${target.id}] a worker id is at most 55 characters, so its lock name fits MySQL's 64`, () =>
      withQueue(target, () =>
        Effect.gen(function*() {
          const longest = "w".repeat(55)
          const { driver } = yield* Database
          const workerLockName = driver.workerLockName
          assert.strictEqual(workerLockName(longest).length, 64)
          yield* Worker.make({ id: longest, handlers: [Job.handler(Noop, () => Effect.void)] })
          if (target.dialect === "mysql") {
            const sql = yield* SqlClient.SqlClient
            const [row] = yield* sql<{ held: number }>`SELECT IS_USED_LOCK(${workerLockName(longest)}) IS NOT NULL AS held`
            assert.strictEqual(Number(row.held), 1)
          }
          const tooLong = yield* Effect.exit(
            Effect.scoped(Worker.make({ id: "w".repeat(56), handlers: [Job.handler(Noop, () => Effect.void)] }))
          )
          assert.isTrue(Exit.isFailure(tooLong))
          assert.include(String(Exit.isFailure(tooLong) && tooLong.cause), "at most 55 characters")
        })))
  })
}
