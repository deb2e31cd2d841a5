/**
 * `QueueLive`: the layer a user provides. Given a `SqlClient` from `@effect/sql-pg` or
 * `@effect/sql-mysql2`, it checks the server, runs sqlane's migrations (with `migrate: false`, it
 * fails with `SchemaNotMigrated` when any is pending), builds the driver of that database and on it
 * `Queue`, `Claimer`, `Completer`, `Admin`, `Events`, the per-minute stats its workers add to
 * (`statsInterval`) and a `Notifier`, whose wake-ups between processes follow the driver's capabilities:
 *
 * - PostgreSQL through @effect/sql-pg's `PgClient`: `LISTEN/NOTIFY`;
 * - MySQL 8.0+ / MariaDB 10.6+ (and a PostgreSQL client without `PgClient`'s settings): the insert
 *   check (`insertCheckInterval`).
 *
 * It loads the packages of the database it finds only (`@effect/sql-pg` and `pg`, or
 * `@effect/sql-mysql2`: optional peer dependencies, see docs/install.md); `pg` missing beside a
 * `PgClient` fails with `SetupError` naming the packages to install.
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { Database } from "../internal/Database.js"
import * as DriverPackages from "../internal/driverPackages.js"
import * as Facts from "../internal/facts.js"
import { makeReachability } from "../internal/outage.js"
import * as Stats from "../internal/stats.js"
import * as MysqlDriver from "../internal/driver/mysql/index.js"
import * as MysqlSession from "../internal/driver/mysql/session.js"
import * as PgDriver from "../internal/driver/pg/index.js"
import * as PgSession from "../internal/driver/pg/session.js"
import { withTransientRetry } from "../internal/driver/run.js"
import { SchemaNotMigrated, SetupError, type UnsupportedDatabase } from "../schema/Errors.js"
import * as Admin from "../services/Admin.js"
import * as Claimer from "../services/Claimer.js"
import * as Completer from "../services/Completer.js"
import * as Events from "../services/Events.js"
import * as Migrations from "../services/Migrations.js"
import * as Notifier from "../services/Notifier.js"
import * as Pruner from "../services/Pruner.js"
import * as Queue from "../services/Queue.js"
import * as QueueConfig from "../services/QueueConfig.js"

/**
 * Every service `QueueLive` provides.
 *
 * @since 0.1.0
 * @category models
 */
export type Services =
  | Queue.Queue
  | Admin.Admin
  | Events.Events
  | Claimer.Claimer
  | Completer.Completer
  | Notifier.Notifier
  | QueueConfig.QueueConfig
  | Database
  | Facts.Facts
  | Stats.Stats

const services = Layer.mergeAll(Queue.layer, Completer.layer).pipe(
  Layer.provideMerge(Claimer.layer),
  Layer.provideMerge(Events.layer),
  Layer.provideMerge(Facts.layer),
  // Built before the Completer, closed after it: the ends it writes at close are counted, then flushed.
  Layer.provideMerge(Stats.layer),
  Layer.provideMerge(Notifier.layer),
  (base) => Layer.provideMerge(Admin.layer, base),
  (base) => Layer.merge(base, Pruner.layer)
)

/** @effect/sql-pg's `PgClient` in the context, if that package is installed and a client provided. */
const pgClientOf = Effect.flatMap(
  DriverPackages.loadOptional(() => import("@effect/sql-pg/PgClient")),
  Option.match({
    onNone: () => Effect.succeedNone,
    onSome: (PgClient) => Effect.serviceOption(PgClient.PgClient)
  })
)

/** The same for @effect/sql-mysql2's `MysqlClient`. */
const mysqlClientOf = Effect.flatMap(
  DriverPackages.loadOptional(() => import("@effect/sql-mysql2/MysqlClient")),
  Option.match({
    onNone: () => Effect.succeedNone,
    onSome: (MysqlClient) => Effect.serviceOption(MysqlClient.MysqlClient)
  })
)

/** The PostgreSQL driver on `sql`, and what is known of its database. */
const pgDatabase = (sql: SqlClient.SqlClient, config: QueueConfig.QueueConfig["Type"], version: string) =>
  Effect.gen(function*() {
    const session = yield* PgSession.serverSession(sql)
    // @effect/sql-pg's connections need no scope outside a transaction: the hot statements may
    // run on them directly (`runner`, internal/driver/run.ts). Its settings open the LISTEN
    // connection. Without the package installed, the client is another one.
    const pgClient = yield* pgClientOf
    const direct = Option.isSome(pgClient) && pgClient.value === (yield* SqlClient.SqlClient)
    const listen = Option.isSome(pgClient)
      ? { config: pgClient.value.config, pg: yield* DriverPackages.load("pg", () => import("pg").then((m) => m.default)) }
      : undefined
    const driver = PgDriver.make(sql, config.prefix, session.database, {
      durableClaims: config.durableClaims,
      direct,
      deleteCompleted: Duration.isZero(config.retention.completed),
      listen
    })
    return {
      driver: withTransientRetry(driver, direct),
      version,
      identity: session.identity,
      reachability: makeReachability(PgSession.ping(sql))
    }
  })

/** The MySQL/MariaDB driver on `sql`, and what is known of its database. */
const mysqlDatabase = (sql: SqlClient.SqlClient, config: QueueConfig.QueueConfig["Type"], version: string) =>
  Effect.gen(function*() {
    const session = yield* MysqlSession.serverSession(sql)
    // As on PostgreSQL, for @effect/sql-mysql2's client.
    const mysqlClient = yield* mysqlClientOf
    const direct = Option.isSome(mysqlClient) && mysqlClient.value === (yield* SqlClient.SqlClient)
    const driver = MysqlDriver.make(sql, config.prefix, session.database, {
      autoIncrement: session.autoIncrement,
      direct,
      maxStatementBytes: session.maxStatementBytes,
      multiStatements: session.multiStatements,
      deleteCompleted: Duration.isZero(config.retention.completed)
    })
    return {
      driver: withTransientRetry(driver, direct),
      version,
      identity: session.identity,
      reachability: makeReachability(MysqlSession.ping(sql))
    }
  })

/**
 * The layer an app provides: every sqlane service (`Queue`, `Admin`, `Events`, …) on your
 * `SqlClient`, sqlane's tables migrated (unless `migrate: false`) and its background fibers
 * running (wake-ups, rescue, pruning). Fails with `UnsupportedDatabase`, `SetupError` or
 * `SchemaNotMigrated`.
 *
 * @example
 * ```ts
 * const AppLive = QueueLive({ prefix: "jobs_" }).pipe(
 *   Layer.provideMerge(PgClient.layerConfig({ url: Config.redacted("DATABASE_URL") }))
 * )
 * const MainLive = Worker.layer({ handlers: [SendEmailHandler] }).pipe(Layer.provideMerge(AppLive))
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const QueueLive = (
  options: QueueConfig.QueueOptions = {}
): Layer.Layer<Services, SqlError | UnsupportedDatabase | SetupError | SchemaNotMigrated, SqlClient.SqlClient> =>
  Layer.unwrapEffect(
    Effect.gen(function*() {
      const problem = QueueConfig.optionsProblem(options)
      if (problem !== undefined) return yield* new SetupError({ message: `QueueLive: ${problem}` })
      const config = QueueConfig.make(options)
      const sql = (yield* SqlClient.SqlClient).withoutTransforms()
      const server = yield* Migrations.checkServer
      if (config.migrate) yield* Migrations.run(config.prefix)
      else {
        // Migrated by someone else (`sqlane migrate`): say so if not, rather than fail at the first statement.
        const status = yield* Migrations.status(config.prefix)
        if (status.pending.length > 0) {
          const applied = status.applied?.length ?? 0
          return yield* new SchemaNotMigrated({ prefix: config.prefix, applied, known: applied + status.pending.length })
        }
      }
      const database = server.dialect === "pg"
        ? yield* pgDatabase(sql, config, server.version)
        : yield* mysqlDatabase(sql, config, server.version)
      return services.pipe(
        Layer.provideMerge(Layer.succeed(Database, database)),
        Layer.provideMerge(Layer.succeed(QueueConfig.QueueConfig, config))
      )
    })
  )
