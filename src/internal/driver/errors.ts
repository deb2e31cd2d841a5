/**
 * The one classification of the errors the database drivers raise (pg, mysql2): which are a unique
 * index refusing a row, which are transient (retried), and how a statement failed (`errorKind`).
 * Nothing else in the library reads SQL error codes or errnos.
 *
 * @internal
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { wallSleep } from "../wallClock.js"

/** A `LISTEN` connection could not be opened, or was lost (`Driver.channelListen`). */
export class ListenError extends Error {
  readonly _tag = "ListenError"
}

/** A unique index refused a row: PostgreSQL 23505, MySQL/MariaDB 1062. */
export const isUniqueViolation = (error: SqlError): boolean => {
  const cause = error.cause as { code?: unknown; errno?: unknown } | undefined
  return cause?.code === "23505" || cause?.errno === 1062 || cause?.code === "ER_DUP_ENTRY"
}

/**
 * A keyed claim lost a race for a slot or a mutex key: a unique index refused it, or (PostgreSQL
 * 55P03 `lock_not_available`) it gave up waiting for another claim in flight (`keyedLockTimeoutMs`).
 */
export const lostRace = (error: SqlError): boolean =>
  isUniqueViolation(error) || (error.cause as { code?: unknown } | undefined)?.code === "55P03"

/**
 * Deadlocks and serialization failures (PostgreSQL 40P01/40001, MySQL/MariaDB 1213/1205, and
 * MariaDB's 1020 `ER_CHECKREAD`) are transient: the statement is retried, up to 5 times, 10 ms
 * apart doubling. Inside a caller's transaction nothing is retried (the transaction is already
 * aborted; the caller decides).
 *
 * 1020 ("Record has changed since last read") comes from `innodb_snapshot_isolation`, on by
 * default since MariaDB 11.6.2; it rolls the transaction back like a deadlock. MariaDB 11.8 raises
 * it even in the keyed claim at READ COMMITTED (its locking read has a subquery on the jobs table).
 */
export const isTransient = (error: SqlError): boolean => isTransientCause(error.cause)

/** `isTransient` of a driver's error (a `SqlError`'s or a `ListenError`'s cause). */
export const isTransientCause = (u: unknown): boolean => {
  const cause = u as { code?: unknown; errno?: unknown } | undefined
  const code = cause?.code
  const errno = cause?.errno
  return code === "40P01" || code === "40001" || errno === 1213 || errno === 1205 || errno === 1020 ||
    code === "ER_LOCK_DEADLOCK" || code === "ER_LOCK_WAIT_TIMEOUT" || code === "ER_CHECKREAD"
}

/** MySQL/MariaDB errors about the connection or the server's state, not the statement. */
const unavailableErrnos = new Set([
  1021, // disk full
  1037, // out of memory
  1038, // out of sort memory
  1040, // too many connections
  1041, // out of memory (resources)
  1053, // server shutdown in progress
  1135, // can't create a thread
  1152, // connection aborted
  1154, 1155, 1156, 1157, 1158, 1159, 1160, 1161, // network read/write errors
  1180, // error during COMMIT
  1290, // --read-only (a replica, a failover)
  1317, // query interrupted
  1792, // read-only transaction
  1836, // read-only mode
  1927, // connection killed (MariaDB)
  1969, // statement timeout (MariaDB)
  3024, // max_execution_time exceeded (MySQL)
  4031 // disconnected for inactivity (MySQL)
])

/**
 * How a statement failed, for a writer that must decide whether to wait, give up at once or try a
 * few times:
 * - `"data"`: the database refused the values (PostgreSQL SQLSTATE classes 22, 23, 54, and 42 but
 *   not 42501; MySQL/MariaDB packet too large, bad string value, data too long, out of range, or a
 *   SQLSTATE of class 22 or 23): writing them again is refused again;
 * - `"unavailable"`: no answer about the statement — the connection failed or was cut, the pool or
 *   the server cannot serve it now (connection, resource, shutdown, timeout and read-only errors),
 *   deadlocks and serialization failures (`isTransient`), and any error the server did not send:
 *   it is the database that fails, for every statement alike;
 * - `"refused"`: any other error the server sent about the statement — a trigger raising
 *   (PostgreSQL `RAISE EXCEPTION`, MySQL/MariaDB `SIGNAL`), a missing privilege (42501, 1142): it
 *   may not last (a trigger may decide by other rows), or it may.
 */
export const errorKind = (error: SqlError): "data" | "unavailable" | "refused" => errorKindOfCause(error.cause)

/** `errorKind` of a driver's error (a `SqlError`'s or a `ListenError`'s cause). */
export const errorKindOfCause = (u: unknown): "data" | "unavailable" | "refused" => {
  const cause = u as
    | { code?: unknown; errno?: unknown; sqlState?: unknown; severity?: unknown; fatal?: unknown }
    | undefined
  if (cause === undefined || cause === null || typeof cause !== "object") return "unavailable"
  const { code, errno, sqlState } = cause
  if (typeof errno === "number" && typeof sqlState === "string") {
    // mysql2: errors the server sent carry its errno and SQLSTATE (the driver's own, `fatal` ones
    // and the socket's do not, or carry errno 2000 and up).
    if ([1153, 1264, 1366, 1406, 3140].includes(errno) || /^2[23]/.test(sqlState)) return "data"
    if (isTransientCause(cause) || unavailableErrnos.has(errno) || cause.fatal === true) return "unavailable"
    return errno > 0 && errno < 2000 && !/^(08|40)/.test(sqlState) ? "refused" : "unavailable"
  }
  // pg: errors the server sent carry a severity and a SQLSTATE.
  if (typeof code !== "string" || typeof cause.severity !== "string" || !/^[0-9A-Z]{5}$/.test(code)) {
    return "unavailable"
  }
  if (/^(22|23|54)/.test(code) || (code.startsWith("42") && code !== "42501")) return "data"
  // connection, invalid authorization, transaction rollback, resources, operator intervention
  // (shutdown, statement timeout), system and internal errors; a read-only transaction (a standby
  // after a failover) and a lock timeout
  if (/^(08|28|40|53|57|58|XX)/.test(code) || code === "25006" || code === "55P03") return "unavailable"
  return "refused"
}

/**
 * Retries `effect` on transient errors, up to 5 times, 10 ms apart doubling. The pauses are on the
 * wall clock (`wallSleep`): they decide nothing about jobs, and under `TestClock` a deadlock's retry
 * would otherwise wait for a `TestClock.adjust` that never comes (a worker's claim hung there).
 */
export const retryTransient = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> => {
  // Whether the statement ran inside a caller's transaction is asked only when it failed: the
  // success path is one `catchIf`.
  const attempt = (retries: number): Effect.Effect<A, E, R> =>
    Effect.catchIf(
      effect,
      (error) => retries < 5 && error instanceof SqlError && isTransient(error),
      (error) =>
        Effect.flatMap(
          Effect.serviceOption(SqlClient.TransactionConnection),
          (tx) => Option.isSome(tx) ? Effect.fail(error) : Effect.zipRight(wallSleep(10 * 2 ** retries), attempt(retries + 1))
        )
    )
  return attempt(0)
}
