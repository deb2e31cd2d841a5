/**
 * What a PostgreSQL session tells of its server before the driver is built, and the statements that
 * need nothing of sqlane's tables.
 *
 * @internal
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"

/** The server's version as it reports it, e.g. `15.19`. */
export const serverVersion = (sql: SqlClient.SqlClient): Effect.Effect<string, SqlError> =>
  Effect.map(sql<{ version: string }>`SELECT current_setting('server_version') AS version`, ([row]) => row.version)

/** The database's name (it scopes worker lock names) and an identity of the server and database. */
export const serverSession = (sql: SqlClient.SqlClient): Effect.Effect<{ readonly database: string; readonly identity: string }, SqlError> =>
  Effect.map(
    sql<{ db: string; id: string }>`SELECT current_database() AS db, current_database() || '@' ||
      COALESCE(host(inet_server_addr()), 'socket') || ':' || COALESCE(inet_server_port()::text, '') AS id`,
    ([row]) => ({ database: row.db, identity: `pg:${row.id}` })
  )

/** A statement that only needs the server to answer. */
export const ping = (sql: SqlClient.SqlClient): Effect.Effect<unknown, SqlError> => sql`SELECT 1`
