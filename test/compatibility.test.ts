/**
 * Dialect differences found by the compatibility matrix (docs/compatibility.md), checked without a
 * database where the behaviour is sqlane's own.
 */
import { SqlError } from "@effect/sql/SqlError"
import { assert, describe, it } from "@effect/vitest"
import { isTransient } from "../src/internal/statements.js"

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
