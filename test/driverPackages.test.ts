/**
 * The database packages are optional peer dependencies, loaded when a database needs them: one that
 * is not installed is a `SetupError` naming the packages and the command that installs them. The
 * imports here are real ones, of a package that does not exist.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as DriverPackages from "../src/internal/driverPackages.js"
import { SetupError } from "../src/schema/Errors.js"

/** A package that is not installed (a variable, so that neither tsc nor vite resolves it ahead). */
const missing: string = "sqlane-package-that-is-not-installed"

describe("database packages", () => {
  it.effect("a missing package: SetupError naming the packages of the database and the install command", () =>
    Effect.gen(function*() {
      const pg = yield* Effect.flip(DriverPackages.load("pg", () => import(missing)))
      assert.instanceOf(pg, SetupError)
      assert.strictEqual(pg.message, "sqlane: PostgreSQL needs @effect/sql-pg and pg: npm install @effect/sql-pg@^0.53 pg")
      const mysql = yield* Effect.flip(DriverPackages.load("mysql", () => import(missing)))
      assert.strictEqual(
        mysql.message,
        "sqlane: MySQL/MariaDB needs @effect/sql-mysql2 and mysql2: npm install @effect/sql-mysql2@^0.53 mysql2"
      )
    }))

  it.effect("an optional package: None when missing, the module when installed", () =>
    Effect.gen(function*() {
      assert.isTrue(Option.isNone(yield* DriverPackages.loadOptional(() => import(missing))))
      const pg = yield* DriverPackages.loadOptional(() => import("@effect/sql-pg/PgClient"))
      assert.isTrue(Option.isSome(pg) && typeof pg.value.layer === "function")
    }))

  it.effect("a module that fails for another reason than being missing is a defect, not a missing package", () =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit(DriverPackages.loadOptional(() => Promise.reject(new SyntaxError("broken"))))
      assert.isTrue(exit._tag === "Failure" && exit.cause._tag === "Die")
    }))
})
