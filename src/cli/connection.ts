/**
 * How the `sqlane` command reaches a database: the URL (`--database-url` or `DATABASE_URL`), the
 * client of its dialect (`internal/databaseUrl.ts`, shared with `sqlane/promise`), the options every
 * command takes, and the `QueueLive` the commands run against.
 *
 * @since 0.1.0
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import * as Options from "@effect/cli/Options"
import * as Config from "effect/Config"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as DatabaseUrl from "../internal/databaseUrl.js"
import { connectProblem, parseDatabaseUrl, type Target } from "../internal/databaseUrl.js"
import { QueueLive } from "../layers/QueueLive.js"
import type * as Admin from "../services/Admin.js"
import { CliError } from "./CliError.js"

/** The dialect and URL of `text`. */
export const parseUrl = (text: string): Effect.Effect<Target, CliError> =>
  Either.match(parseDatabaseUrl(text), {
    onLeft: (message) => new CliError({ message }),
    onRight: Effect.succeed
  })

/** The client of the URL's dialect; only that driver is loaded. */
export const clientLayer = (target: Target): Layer.Layer<SqlClient.SqlClient, CliError> =>
  Layer.mapError(
    DatabaseUrl.clientLayer(target, { maxConnections: 3, applicationName: "sqlane-cli" }),
    (error) => new CliError({ message: connectProblem(target, error) })
  )

export const databaseUrl = Options.text("database-url").pipe(
  Options.withDescription("postgres://… or mysql://… (default: the DATABASE_URL environment variable)"),
  Options.withFallbackConfig(Config.string("DATABASE_URL")),
  Options.optional
)
export const prefix = Options.text("prefix").pipe(
  Options.withDescription("table prefix (default: SQLANE_PREFIX or sqlane_)"),
  Options.withFallbackConfig(Config.string("SQLANE_PREFIX")),
  Options.withDefault("sqlane_")
)
export const json = Options.boolean("json").pipe(Options.withDescription("print JSON instead of a table"))

export const common = { databaseUrl, prefix, json }

export interface Common {
  readonly databaseUrl: Option.Option<string>
  readonly prefix: string
  readonly json: boolean
}

export const connect = (c: Common) =>
  Effect.gen(function*() {
    if (Option.isNone(c.databaseUrl) || c.databaseUrl.value.trim() === "") {
      return yield* new CliError({ message: "no database URL: pass --database-url or set DATABASE_URL" })
    }
    return clientLayer(yield* parseUrl(c.databaseUrl.value))
  })

/** Runs `body` against the database, after checking that the schema is fully migrated. */
export const withAdmin = <A, E>(
  c: Common,
  body: Effect.Effect<A, E, Admin.Admin>
) =>
  Effect.gen(function*() {
    const client = yield* connect(c)
    // With migrate: false, QueueLive fails with SchemaNotMigrated when the tables are missing or behind.
    return yield* body.pipe(Effect.provide(QueueLive({ prefix: c.prefix, migrate: false })), Effect.provide(client))
  })
