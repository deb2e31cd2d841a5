/**
 * sqlane's schema: versioned, embedded, append-only migrations per dialect (each driver holds its
 * own, `internal/driver/<dialect>/migrations.ts`), run with `@effect/sql`'s `Migrator` into
 * sqlane's own migrations table (`<prefix>migrations`).
 *
 * Safe to run from several processes at once: the run holds the driver's migration lock (a
 * transaction-level advisory lock on PostgreSQL, `GET_LOCK` on a reserved connection on
 * MySQL/MariaDB), so one process migrates while the others wait and then find nothing left to do.
 *
 * Also checks, before anything else, that the server has `FOR UPDATE SKIP LOCKED`:
 * PostgreSQL 9.5+, MySQL 8.0.1+, MariaDB 10.6+.
 *
 * @since 0.1.0
 */
import * as Migrator from "@effect/sql/Migrator"
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import type { Driver } from "../internal/driver/Driver.js"
import * as MysqlDriver from "../internal/driver/mysql/index.js"
import * as MysqlSession from "../internal/driver/mysql/session.js"
import * as PgDriver from "../internal/driver/pg/index.js"
import * as PgSession from "../internal/driver/pg/session.js"
import { recordingClient } from "../internal/driver/recorder.js"
import { versionAtLeast } from "../internal/version.js"
import { SetupError, UnsupportedDatabase } from "../schema/Errors.js"
import { isValidPrefix } from "./QueueConfig.js"

/**
 * The dialect and server version, checked for `FOR UPDATE SKIP LOCKED`.
 *
 * @example
 * ```ts
 * const info = yield* Migrations.checkServer
 * yield* Effect.log(`${info.mariadb ? "MariaDB" : info.dialect} ${info.version}`)
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface ServerInfo {
  readonly dialect: "pg" | "mysql"
  /** As the server reports it, e.g. `"15.19"`, `"10.11.19-MariaDB-0+deb12u1"`, `"8.4.3"`. */
  readonly version: string
  readonly mariadb: boolean
}

/**
 * Decides whether a server version has `FOR UPDATE SKIP LOCKED`. Pure: `version` is what the
 * server reports (`SELECT version()` / `SELECT VERSION()`).
 *
 * @example
 * ```ts
 * Migrations.checkVersion("pg", "15.19") // Either.right({ dialect: "pg", version: "15.19", mariadb: false })
 * Migrations.checkVersion("mysql", "5.7.44") // Either.left(UnsupportedDatabase)
 * ```
 *
 * @since 0.1.0
 * @category checks
 */
export const checkVersion = (dialect: "pg" | "mysql", version: string): Either.Either<ServerInfo, UnsupportedDatabase> => {
  if (dialect === "pg") {
    return versionAtLeast(version, [9, 5])
      ? Either.right({ dialect, version, mariadb: false })
      : Either.left(new UnsupportedDatabase({ found: `PostgreSQL ${version}`, needed: "PostgreSQL 9.5" }))
  }
  const mariadb = /mariadb/i.test(version)
  if (mariadb) {
    return versionAtLeast(version, [10, 6])
      ? Either.right({ dialect, version, mariadb })
      : Either.left(new UnsupportedDatabase({ found: `MariaDB ${version}`, needed: "MariaDB 10.6" }))
  }
  return versionAtLeast(version, [8, 0, 1])
    ? Either.right({ dialect, version, mariadb })
    : Either.left(new UnsupportedDatabase({ found: `MySQL ${version}`, needed: "MySQL 8.0.1" }))
}

/**
 * Reads the server's dialect and version; fails with `UnsupportedDatabase` when it lacks
 * `FOR UPDATE SKIP LOCKED` or is not PostgreSQL, MySQL or MariaDB.
 *
 * @example
 * ```ts
 * const program = Migrations.checkServer.pipe(
 *   Effect.catchTag("UnsupportedDatabase", (e) => Effect.die(e.message)),
 *   Effect.provide(ClientLive)
 * )
 * ```
 *
 * @since 0.1.0
 * @category checks
 */
export const checkServer: Effect.Effect<ServerInfo, UnsupportedDatabase | SqlError, SqlClient.SqlClient> = Effect.gen(
  function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    return yield* sql.onDialectOrElse({
      pg: () => Effect.flatMap(PgSession.serverVersion(sql), (version) => checkVersion("pg", version)),
      mysql: () => Effect.flatMap(MysqlSession.serverVersion(sql), (version) => checkVersion("mysql", version)),
      orElse: () =>
        Effect.fail(
          new UnsupportedDatabase({
            found: "a SQL dialect other than PostgreSQL or MySQL",
            needed: "PostgreSQL 9.5, MySQL 8.0.1 or MariaDB 10.6"
          })
        )
    })
  }
)

/**
 * The driver of the server's dialect, for its migrations (the migration lock, the migrations table):
 * built without the database's name, which only worker lock names need.
 */
const driverOf = (dialect: ServerInfo["dialect"], sql: SqlClient.SqlClient, prefix: string): Driver =>
  dialect === "pg" ? PgDriver.make(sql, prefix, "") : MysqlDriver.make(sql, prefix, "")

const invalidPrefix = (prefix: string) =>
  new SetupError({
    message: `invalid table prefix ${JSON.stringify(prefix)}: use lowercase letters, digits and _ (at most 40)`
  })

/**
 * Runs sqlane's pending migrations for `prefix`. Returns the migrations applied by this call
 * (`[id, name]`), empty when the schema was up to date.
 *
 * @example
 * ```ts
 * // At deploy time (what `sqlane migrate` does); the app then runs QueueLive({ migrate: false })
 * const applied = yield* Migrations.run("sqlane_")
 * yield* Effect.log(`applied ${applied.map(([id, name]) => `${id}_${name}`).join(", ") || "nothing"}`)
 * ```
 *
 * @since 0.1.0
 * @category migrations
 */
export const run = (
  prefix: string
): Effect.Effect<
  ReadonlyArray<readonly [id: number, name: string]>,
  SetupError | UnsupportedDatabase | SqlError,
  SqlClient.SqlClient
> =>
  Effect.gen(function*() {
    if (!isValidPrefix(prefix)) return yield* invalidPrefix(prefix)
    const info = yield* checkServer
    const driver = driverOf(info.dialect, (yield* SqlClient.SqlClient).withoutTransforms(), prefix)
    const migrator = Migrator.make({})
    return yield* migrator({
      loader: Migrator.fromRecord(driver.migrations),
      table: `${prefix}migrations`
    }).pipe(
      Effect.catchTag("MigrationError", (e) => new SetupError({ message: `migration failed: ${e.message}`, cause: e })),
      Effect.catchAllDefect((defect) => new SetupError({ message: `migration failed: ${String(defect)}`, cause: defect })),
      driver.migrationLocked
    )
  })

/**
 * Drops every table of `prefix` (those that exist), its jobs with them: the end of a test's own
 * tables (`sqlane/testing`'s `TestQueueLive` with `uniquePrefix` drops its tables so). Stop every
 * worker and `QueueLive` of the prefix first.
 *
 * @example
 * ```ts
 * yield* Migrations.drop("sqlane_t1_")
 * ```
 *
 * @since 0.2.0
 * @category migrations
 */
export const drop = (
  prefix: string
): Effect.Effect<void, SetupError | UnsupportedDatabase | SqlError, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    if (!isValidPrefix(prefix)) return yield* invalidPrefix(prefix)
    const info = yield* checkServer
    yield* driverOf(info.dialect, (yield* SqlClient.SqlClient).withoutTransforms(), prefix).migrationDropAll()
  })

/**
 * Where a table prefix's schema stands: the migrations applied, and those this version of sqlane
 * would apply (`[id, name]`, in order). `applied` is `undefined` when the migrations table does not
 * exist (nothing was ever migrated).
 *
 * @example
 * ```ts
 * const { applied, pending } = yield* Migrations.status("sqlane_")
 * if (pending.length > 0) yield* Effect.logWarning(`${pending.length} migration(s) to apply`)
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface MigrationStatus {
  readonly dialect: "pg" | "mysql"
  readonly applied: ReadonlyArray<number> | undefined
  readonly pending: ReadonlyArray<readonly [id: number, name: string]>
}

const known = (driver: Driver) =>
  Object.entries(driver.migrations)
    .map(([key, migration]) => {
      const [, id, name] = key.match(/^(\d+)_(.*)$/)!
      return { id: Number(id), name, migration }
    })
    .sort((a, b) => a.id - b.id)

/**
 * Reads which migrations are applied to `prefix` and which are pending. Changes nothing.
 *
 * @example
 * ```ts
 * const { pending } = yield* Migrations.status("sqlane_")
 * const upToDate = pending.length === 0
 * ```
 *
 * @since 0.1.0
 * @category migrations
 */
export const status = (
  prefix: string
): Effect.Effect<MigrationStatus, SetupError | UnsupportedDatabase | SqlError, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    if (!isValidPrefix(prefix)) return yield* invalidPrefix(prefix)
    const info = yield* checkServer
    const driver = driverOf(info.dialect, (yield* SqlClient.SqlClient).withoutTransforms(), prefix)
    const applied = yield* driver.migrationList()
    const done = new Set(applied ?? [])
    return {
      dialect: info.dialect,
      applied,
      pending: known(driver).filter((m) => !done.has(m.id)).map((m) => [m.id, m.name] as const)
    }
  })

/**
 * The SQL that {@link run} would execute for `prefix`, per pending migration, without executing it:
 * each pending migration runs against a recording client of the server's dialect. Statements with
 * parameters list them after the SQL as a comment. The migrations table itself is created by
 * `run` and is not listed.
 *
 * @example
 * ```ts
 * for (const migration of yield* Migrations.dryRun("sqlane_")) {
 *   console.log(`-- ${migration.id}_${migration.name}\n${migration.sql.join("\n")}`)
 * }
 * ```
 *
 * @since 0.1.0
 * @category migrations
 */
export const dryRun = (
  prefix: string
): Effect.Effect<
  ReadonlyArray<{ readonly id: number; readonly name: string; readonly sql: ReadonlyArray<string> }>,
  SetupError | UnsupportedDatabase | SqlError,
  SqlClient.SqlClient
> =>
  Effect.gen(function*() {
    const current = yield* status(prefix)
    const pendingIds = new Set(current.pending.map(([id]) => id))
    const out: Array<{ id: number; name: string; sql: ReadonlyArray<string> }> = []
    const driver = driverOf(current.dialect, (yield* SqlClient.SqlClient).withoutTransforms(), prefix)
    for (const m of known(driver)) {
      if (!pendingIds.has(m.id)) continue
      const recorded: Array<string> = []
      const recorder = yield* recordingClient(current.dialect, (text, params) => {
        const sqlText = text.trim().replace(/\n\s+/g, "\n  ")
        recorded.push(params.length === 0 ? `${sqlText};` : `${sqlText}; -- params: ${JSON.stringify(params)}`)
      })
      yield* m.migration.pipe(
        Effect.provideService(SqlClient.SqlClient, recorder),
        Effect.mapError((e) => new SetupError({ message: `dry run of migration ${m.id}_${m.name} failed: ${String(e)}` }))
      )
      out.push({ id: m.id, name: m.name, sql: recorded })
    }
    return out
  })
