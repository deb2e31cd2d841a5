/**
 * How the `sqlane` command reaches a database: the URL (`--database-url` or `DATABASE_URL`), the
 * client of its dialect (only that driver is loaded), the options every command takes, and the
 * `QueueLive` the commands run against.
 *
 * @since 0.1.0
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import * as Options from "@effect/cli/Options"
import * as Config from "effect/Config"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as DriverPackages from "../internal/driverPackages.js"
import { QueueLive } from "../layers/QueueLive.js"
import { SetupError } from "../schema/Errors.js"
import type * as Admin from "../services/Admin.js"
import { CliError } from "./CliError.js"

/**
 * The URL with its password hidden, for messages: the user-info password and query parameters that
 * may carry a secret (`?password=…`, which the pg and mysql2 drivers read, `sslpassword`, `sslkey`…).
 */
export const safeUrl = (url: URL) => {
  const copy = new URL(url.toString())
  if (copy.password) copy.password = "***"
  for (const key of Array.from(copy.searchParams.keys())) {
    if (/pass|secret|token|key|cert/i.test(key)) copy.searchParams.set(key, "***")
  }
  return copy.toString()
}

export interface Target {
  readonly dialect: "pg" | "mysql"
  readonly url: URL
}

export const parseUrl = (text: string): Effect.Effect<Target, CliError> =>
  Effect.gen(function*() {
    let url: URL
    try {
      url = new URL(text)
    } catch {
      return yield* new CliError({
        message: `invalid database URL: expected postgres://user@host:port/db or mysql://user@host:port/db`
      })
    }
    switch (url.protocol) {
      case "postgres:":
      case "postgresql:":
        return { dialect: "pg", url }
      case "mysql:":
      case "mariadb:": {
        const mysql = new URL(url.toString().replace(/^mariadb:/, "mysql:"))
        return { dialect: "mysql", url: mysql }
      }
      default:
        return yield* new CliError({
          message: `unsupported database URL scheme "${url.protocol}": use postgres://, postgresql://, mysql:// or mariadb://`
        })
    }
  })

/**
 * The client of the URL's dialect; only that driver is loaded. Its package missing (an optional
 * peer dependency) is said with the command that installs it.
 */
export const clientLayer = (target: Target): Layer.Layer<SqlClient.SqlClient, CliError> => {
  const layer = Layer.unwrapEffect(
    target.dialect === "pg"
      ? DriverPackages.load("pg", () => import("@effect/sql-pg/PgClient")).pipe(Effect.map((PgClient) =>
        PgClient.layer({
          url: Redacted.make(target.url.toString()),
          maxConnections: 3,
          connectTimeout: "10 seconds",
          applicationName: "sqlane-cli"
        })
      ))
      : DriverPackages.load("mysql", () => import("@effect/sql-mysql2/MysqlClient")).pipe(Effect.map((MysqlClient) =>
        MysqlClient.layer({ url: Redacted.make(target.url.toString()), maxConnections: 3 })
      ))
  )
  return Layer.mapError(layer, (error) => {
    if (error instanceof SetupError) return new CliError({ message: error.message })
    const cause = (error as { cause?: unknown }).cause
    const detail = cause instanceof Error ? cause.message || (cause as any).code : String(cause ?? error)
    return new CliError({ message: `cannot connect to ${safeUrl(target.url)}: ${detail}` })
  }) as Layer.Layer<SqlClient.SqlClient, CliError>
}

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
