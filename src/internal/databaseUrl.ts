/**
 * A database URL (`postgres://…`, `postgresql://…`, `mysql://…`, `mariadb://…`) and the SQL client
 * of its dialect, as the `sqlane` command and `createQueue` of `sqlane/promise` reach a database.
 * Only the driver of that dialect is loaded.
 *
 * @internal
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import type { SetupError } from "../schema/Errors.js"
import * as DriverPackages from "./driverPackages.js"

/** A parsed database URL; `mariadb://` is read as `mysql://`. */
export interface Target {
  readonly dialect: "pg" | "mysql"
  readonly url: URL
}

/** The pool a client from a URL opens. */
export interface ClientOptions {
  /** Most connections of the pool. */
  readonly maxConnections: number
  /** PostgreSQL's `application_name` of each connection (shown in `pg_stat_activity`). */
  readonly applicationName: string
  /** How long opening a connection may take (PostgreSQL; mysql2 has its own 10 s). */
  readonly connectTimeout?: Duration.DurationInput | undefined
}

/**
 * The URL with its password hidden, for messages: the user-info password and query parameters that
 * may carry a secret (`?password=…`, which the pg and mysql2 drivers read, `sslpassword`, `sslkey`…).
 */
export const safeUrl = (url: URL): string => {
  const copy = new URL(url.toString())
  if (copy.password) copy.password = "***"
  for (const key of Array.from(copy.searchParams.keys())) {
    if (/pass|secret|token|key|cert/i.test(key)) copy.searchParams.set(key, "***")
  }
  return copy.toString()
}

/** The dialect and URL of `text`, or what is wrong with it (a message without the URL's secrets). */
export const parseDatabaseUrl = (text: string): Either.Either<Target, string> => {
  let url: URL
  try {
    url = new URL(text)
  } catch {
    return Either.left("invalid database URL: expected postgres://user@host:port/db or mysql://user@host:port/db")
  }
  switch (url.protocol) {
    case "postgres:":
    case "postgresql:":
      return Either.right({ dialect: "pg", url })
    case "mysql:":
    case "mariadb:":
      return Either.right({ dialect: "mysql", url: new URL(url.toString().replace(/^mariadb:/, "mysql:")) })
    default:
      return Either.left(
        `unsupported database URL scheme "${url.protocol}": use postgres://, postgresql://, mysql:// or mariadb://`
      )
  }
}

/**
 * The client of the target's dialect (`@effect/sql-pg` or `@effect/sql-mysql2`); only that driver is
 * loaded. Its package missing (an optional peer dependency) fails with `SetupError` naming the
 * command that installs it.
 */
export const clientLayer = (
  target: Target,
  options: ClientOptions
): Layer.Layer<SqlClient.SqlClient, SqlError | SetupError> =>
  Layer.unwrapEffect(
    target.dialect === "pg"
      ? DriverPackages.load("pg", () => import("@effect/sql-pg/PgClient")).pipe(Effect.map((PgClient) =>
        PgClient.layer({
          url: Redacted.make(target.url.toString()),
          maxConnections: options.maxConnections,
          connectTimeout: options.connectTimeout ?? "10 seconds",
          applicationName: options.applicationName
        })
      ))
      : DriverPackages.load("mysql", () => import("@effect/sql-mysql2/MysqlClient")).pipe(Effect.map((MysqlClient) =>
        MysqlClient.layer({ url: Redacted.make(target.url.toString()), maxConnections: options.maxConnections })
      ))
  ) as Layer.Layer<SqlClient.SqlClient, SqlError | SetupError>

/** Why a client of `target` could not be made, in one line: `cannot connect to <url>: <the driver's reason>`. */
export const connectProblem = (target: Target, error: unknown): string => {
  if ((error as { _tag?: unknown })._tag === "SetupError") return (error as SetupError).message
  const cause = (error as { cause?: unknown }).cause
  const detail = cause instanceof Error ? cause.message || (cause as any).code : String(cause ?? error)
  return `cannot connect to ${safeUrl(target.url)}: ${detail}`
}
