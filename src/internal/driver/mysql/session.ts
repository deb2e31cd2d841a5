/**
 * What a MySQL/MariaDB session tells of its server before the driver is built, and the statements
 * that need nothing of sqlane's tables.
 *
 * @internal
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"

export interface MysqlSession {
  /** The current database (it scopes worker lock names), `""` when none is selected. */
  readonly database: string
  /** The server, its port and the database. */
  readonly identity: string
  /** `auto_increment_increment`: how far apart the ids of one multi-row insert are. */
  readonly autoIncrement: number
  /** `max_allowed_packet` (bytes): the largest statement the server takes. */
  readonly maxStatementBytes: number
  /** Whether the connection takes several statements in one query (the client flag `MULTI_STATEMENTS`). */
  readonly multiStatements: boolean
}

/** The server's version as it reports it, e.g. `8.4.3` or `10.11.19-MariaDB-0+deb12u1`. */
export const serverVersion = (sql: SqlClient.SqlClient): Effect.Effect<string, SqlError> =>
  Effect.map(sql<{ version: string }>`SELECT VERSION() AS version`, ([row]) => row.version)

/**
 * Whether the connection takes two statements in one query: without the client flag
 * `MULTI_STATEMENTS` the server refuses them with a syntax error (1064, `ER_PARSE_ERROR`).
 */
const takesMultiStatements = (sql: SqlClient.SqlClient): Effect.Effect<boolean, SqlError> =>
  sql.unsafe("SELECT 1; SELECT 1").unprepared.pipe(
    Effect.as(true),
    Effect.catchIf((error) => (error.cause as { errno?: unknown } | undefined)?.errno === 1064, () => Effect.succeed(false))
  )

export const serverSession = (sql: SqlClient.SqlClient): Effect.Effect<MysqlSession, SqlError> =>
  Effect.zipWith(
    sql<{ inc: number; db: string | null; id: string; packet: number }>`SELECT
      @@auto_increment_increment AS inc, DATABASE() AS db,
      CONCAT(@@hostname, ':', @@port, '/', COALESCE(DATABASE(), '')) AS id, @@max_allowed_packet AS packet`,
    takesMultiStatements(sql),
    ([row], multiStatements) => ({
      database: row.db ?? "",
      identity: `mysql:${row.id}`,
      autoIncrement: Number(row?.inc ?? 1),
      maxStatementBytes: Number(row.packet),
      multiStatements
    })
  )

/** A statement that only needs the server to answer. */
export const ping = (sql: SqlClient.SqlClient): Effect.Effect<unknown, SqlError> => sql`SELECT 1`
