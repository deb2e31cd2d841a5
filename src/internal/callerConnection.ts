/**
 * A connection the app opened itself, in a transaction the app began (`BEGIN` on a node-postgres
 * `Client`/`PoolClient`, `START TRANSACTION` or `beginTransaction()` on a mysql2 connection), as an
 * @effect/sql `Connection`. Provided as `SqlClient.TransactionConnection`, it is the connection every
 * statement of the `SqlClient` runs on — sqlane's and the app's — so they join that transaction; a
 * nested `sql.withTransaction` (sqlane cuts a large `enqueueMany` into several statements in one)
 * takes a savepoint on it. Statements are compiled by the queue's own client (placeholders, quoting)
 * and only sent on this connection.
 *
 * @internal
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"

/**
 * A connection in the app's open transaction:
 * - PostgreSQL: a node-postgres `Client` or `PoolClient` (checked out of the pool with
 *   `pool.connect()`), or any object whose `query(text, values)` runs `text` with `$1…` placeholders
 *   on that transaction's connection and resolves to `{ rows }`;
 * - MySQL/MariaDB: a mysql2 `Connection` or `PoolConnection`, of the callback API or the promise API
 *   (`mysql2/promise`).
 *
 * Not a pool: each statement of a pool may run on another connection, outside the transaction.
 *
 * @example
 * ```ts
 * const client = await pool.connect() // node-postgres
 * await client.query("BEGIN")
 * await queue.enqueue(SendEmail, { to }, { transaction: client }) // client is a CallerConnection
 * await client.query("COMMIT")
 * ```
 */
export interface CallerConnection {
  readonly query: (...args: Array<any>) => unknown
}

const failed = (cause: unknown) => new SqlError({ cause, message: "Failed to execute statement" })

type Rows = ReadonlyArray<any>
type TransformRows = (<A extends object>(row: ReadonlyArray<A>) => ReadonlyArray<A>) | undefined

/** A connection whose `execute` is given; the other kinds are made from it. */
const fromExecute = (
  execute: (sql: string, params: ReadonlyArray<unknown>, unprepared: boolean) => Effect.Effect<Rows, SqlError>,
  executeRaw: (sql: string, params: ReadonlyArray<unknown>) => Effect.Effect<unknown, SqlError>
): Connection => {
  const rows = (sql: string, params: ReadonlyArray<unknown>, transformRows: TransformRows, unprepared: boolean) =>
    transformRows === undefined ? execute(sql, params, unprepared) : Effect.map(execute(sql, params, unprepared), transformRows)
  return {
    execute: (sql, params, transformRows) => rows(sql, params, transformRows, false),
    executeUnprepared: (sql, params, transformRows) => rows(sql, params, transformRows, true),
    executeRaw,
    executeValues: (sql, params) =>
      Effect.map(execute(sql, params, false), (rows) => rows.map((row) => Object.values(row as object))),
    executeStream: (sql, params, transformRows) =>
      Stream.flatMap(Stream.fromEffect(rows(sql, params, transformRows, false)), Stream.fromIterable)
  }
}

/** A node-postgres `Client`/`PoolClient` (or an object with its `query(text, values)`). */
const pgConnection = (client: CallerConnection): Connection => {
  const query = (sql: string, params: ReadonlyArray<unknown>) =>
    Effect.tryPromise({ try: () => Promise.resolve(client.query(sql, params)), catch: failed })
  return fromExecute(
    (sql, params) =>
      Effect.map(query(sql, params), (result: any) =>
        // A text of several statements (sent without parameters) gives one result per statement.
        Array.isArray(result) ? result.map((r) => r?.rows ?? []) : result?.rows ?? []),
    query
  )
}

/** A mysql2 connection of the callback API, or the one under a `mysql2/promise` connection. */
const mysqlConnection = (connection: CallerConnection): Connection => {
  const wrapped = (connection as { readonly connection?: CallerConnection }).connection
  const conn: any = typeof wrapped?.query === "function" ? wrapped : connection
  const run = (method: "execute" | "query", sql: string, params: ReadonlyArray<unknown>) =>
    Effect.async<unknown, SqlError>((resume) => {
      try {
        conn[method]({ sql, values: params }, (cause: unknown, results: unknown) => {
          resume(cause ? Effect.fail(failed(cause)) : Effect.succeed(results))
        })
      } catch (cause) {
        resume(Effect.fail(failed(cause)))
      }
    })
  return fromExecute(
    (sql, params, unprepared) =>
      Effect.map(run(unprepared ? "query" : "execute", sql, params), (results) => Array.isArray(results) ? results : []),
    (sql, params) => run("execute", sql, params)
  )
}

/** What is wrong with `connection` for a queue of `dialect`, if anything. */
const problemOf = (dialect: "pg" | "mysql", connection: unknown): string | undefined => {
  const c = connection as Record<string, unknown> | null | undefined
  if (c === null || typeof c !== "object" || typeof c.query !== "function") {
    return "the transaction must be a connection with a query method (a node-postgres Client or PoolClient, a mysql2 connection)"
  }
  if (typeof c.getConnection === "function" || "idleCount" in c) {
    return "the transaction must be one connection, not a pool: take one from the pool (pool.connect(), pool.getConnection()) and begin the transaction on it"
  }
  const mysql2 = typeof c.execute === "function"
  if (dialect === "pg" && mysql2) return "a mysql2 connection was given to a queue on PostgreSQL"
  if (dialect === "mysql" && !mysql2) return "the transaction of a queue on MySQL/MariaDB must be a mysql2 connection"
  return undefined
}

/**
 * `effect` with every statement of the `SqlClient` on `connection`, inside the transaction the app
 * began on it. Dies (a programming error) when `connection` is not a connection of the queue's
 * database.
 */
export const join = (connection: CallerConnection) =>
<A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R | SqlClient.SqlClient> =>
  Effect.flatMap(SqlClient.SqlClient, (sql) => {
    const dialect = sql.onDialectOrElse({ pg: () => "pg" as const, mysql: () => "mysql" as const, orElse: () => undefined })
    if (dialect === undefined) return Effect.dieMessage("sqlane: joining a transaction needs PostgreSQL, MySQL or MariaDB")
    const problem = problemOf(dialect, connection)
    if (problem !== undefined) return Effect.dieMessage(`sqlane: ${problem}`)
    const conn = dialect === "pg" ? pgConnection(connection) : mysqlConnection(connection)
    return Effect.provideService(effect, SqlClient.TransactionConnection, [conn, 0] as const)
  })
