/**
 * A database the suites run on, and the layers to reach it.
 */
import * as MysqlClient from "@effect/sql-mysql2/MysqlClient"
import * as PgClient from "@effect/sql-pg/PgClient"
import type * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import type * as ConfigError from "effect/ConfigError"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import Pg from "pg"

export interface Target {
  /** e.g. `postgres-15`, `mariadb-10.11`: shown in every test name. */
  readonly id: string
  readonly dialect: "pg" | "mysql"
  readonly url: string
}

export const clientLayer = (
  target: Target,
  options: { readonly maxConnections?: number } = {}
): Layer.Layer<SqlClient.SqlClient, SqlError | ConfigError.ConfigError> =>
  target.dialect === "pg"
    ? PgClient.layer({ url: Redacted.make(target.url), maxConnections: options.maxConnections ?? 10 })
    : MysqlClient.layer({ url: Redacted.make(target.url), maxConnections: options.maxConnections ?? 10 })

let counter = 0
/** A table prefix of its own for each test: tests never see each other's jobs. */
export const uniquePrefix = (label = "t") =>
  `${label}_${process.pid.toString(36)}_${Date.now().toString(36)}_${(counter++).toString(36)}_`

/** Runs one statement on the PostgreSQL database of `url` with a client of its own (its rows). */
export const pgQuery = async (url: string, text: string) => {
  const client = new Pg.Client({ connectionString: url })
  await client.connect()
  try {
    return (await client.query(text)).rows
  } finally {
    await client.end()
  }
}
