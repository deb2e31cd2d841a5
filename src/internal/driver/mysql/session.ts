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
}

/** The server's version as it reports it, e.g. `8.4.3` or `10.11.19-MariaDB-0+deb12u1`. */
export const serverVersion = (sql: SqlClient.SqlClient): Effect.Effect<string, SqlError> =>
  Effect.map(sql<{ version: string }>`SELECT VERSION() AS version`, ([row]) => row.version)

export const serverSession = (sql: SqlClient.SqlClient): Effect.Effect<MysqlSession, SqlError> =>
  Effect.map(
    sql<{ inc: number; db: string | null; id: string; packet: number }>`SELECT
      @@auto_increment_increment AS inc, DATABASE() AS db,
      CONCAT(@@hostname, ':', @@port, '/', COALESCE(DATABASE(), '')) AS id, @@max_allowed_packet AS packet`,
    ([row]) => ({
      database: row.db ?? "",
      identity: `mysql:${row.id}`,
      autoIncrement: Number(row?.inc ?? 1),
      maxStatementBytes: Number(row.packet)
    })
  )

/** A statement that only needs the server to answer. */
export const ping = (sql: SqlClient.SqlClient): Effect.Effect<unknown, SqlError> => sql`SELECT 1`
