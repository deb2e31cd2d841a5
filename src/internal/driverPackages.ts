/**
 * The database packages, loaded when a database needs them. `@effect/sql-pg` with `pg`, and
 * `@effect/sql-mysql2` with `mysql2`, are optional peer dependencies: an app installs those of its
 * database only, so sqlane imports neither statically. Each import is written out (`() =>
 * import("pg")`), so that bundlers see it.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { SetupError } from "../schema/Errors.js"

/** What each database needs installed, and the command that installs it. */
const needs = {
  pg: {
    database: "PostgreSQL",
    packages: "@effect/sql-pg and pg",
    install: "npm install @effect/sql-pg@^0.53 pg"
  },
  mysql: {
    database: "MySQL/MariaDB",
    packages: "@effect/sql-mysql2 and mysql2",
    install: "npm install @effect/sql-mysql2@^0.53 mysql2"
  }
} as const

/**
 * The message of a missing package, e.g. `sqlane: PostgreSQL needs @effect/sql-pg and pg: npm
 * install @effect/sql-pg@^0.53 pg`.
 */
export const missingMessage = (dialect: "pg" | "mysql") => {
  const n = needs[dialect]
  return `sqlane: ${n.database} needs ${n.packages}: ${n.install}`
}

/** Whether `cause` says a module could not be found (ES modules and CommonJS alike). */
const isNotFound = (cause: unknown) => {
  const code = (cause as { code?: unknown } | null)?.code
  return code === "ERR_MODULE_NOT_FOUND" || code === "MODULE_NOT_FOUND"
}

/**
 * The module `load` imports, or `None` when it is not installed (any other failure to load it is a
 * defect).
 */
export const loadOptional = <A>(load: () => Promise<A>): Effect.Effect<Option.Option<A>> =>
  Effect.tryPromise({ try: load, catch: (cause) => cause }).pipe(
    Effect.map(Option.some),
    Effect.catchAll((cause) => isNotFound(cause) ? Effect.succeed(Option.none<A>()) : Effect.die(cause))
  )

/**
 * The module `load` imports for `dialect`'s database; fails with `SetupError` naming the packages
 * to install when it is not installed.
 */
export const load = <A>(dialect: "pg" | "mysql", load: () => Promise<A>): Effect.Effect<A, SetupError> =>
  Effect.flatMap(
    loadOptional(load),
    Option.match({
      onNone: () => Effect.fail(new SetupError({ message: missingMessage(dialect) })),
      onSome: Effect.succeed
    })
  )
