/**
 * What the modules of the MySQL/MariaDB driver share: the client, the tables and index names, how
 * statements run (prepared, or unprepared with mysqlText literals), the options, and the SQL
 * fragments that several of them use.
 *
 * @internal
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type * as Statement from "@effect/sql/Statement"
import * as MysqlText from "../../mysqlText.js"
import { type Run, type RunMode, runner } from "../run.js"
import { workerLockPrefix } from "../workerRows.js"

/** Options of the MySQL/MariaDB driver. */
export interface MysqlOptions {
  /** The server's `auto_increment_increment` (the step between the ids of one multi-row INSERT; default 1). */
  readonly autoIncrement?: number | undefined
  /** Whether the hot statements may run directly on their connection (see `runner`; default false). */
  readonly direct?: boolean | undefined
  /** The server's `max_allowed_packet` (bytes), when known. */
  readonly maxStatementBytes?: number | undefined
  /** Whether an attempt's end deletes a completed job's row (`retention.completed` of 0; default false). */
  readonly deleteCompleted?: boolean | undefined
  /** Whether the connections take several statements in one query (`capabilities.multiStatements`; default true). */
  readonly multiStatements?: boolean | undefined
}

/** The context of each module: `database` is the database's name (`DATABASE()`), which scopes worker lock names. */
export const makeContext = (sql: SqlClient.SqlClient, prefix: string, database: string, options: MysqlOptions) => {
  const { autoIncrement = 1, deleteCompleted = false, direct = false, maxStatementBytes } = options
  const jobs = sql(`${prefix}jobs`)
  const runPlain = runner(direct)
  // Statements sent unprepared carry their strings as literals that every sql_mode reads alike
  // (see mysqlText); prepared ones carry them apart from the text.
  const run = ((statement: Statement.Statement<any>, mode: RunMode = "execute") => {
    if (mode !== "unprepared") return runPlain(statement, mode as "execute")
    const [text, params] = statement.compile()
    return runPlain(sql.unsafe(text, MysqlText.values(params)), "unprepared")
  }) as Run
  const lockPrefix = workerLockPrefix("mysql", database, prefix)
  const workers = sql(`${prefix}workers`)
  const ts = (us: number) => sql`TIMESTAMPADD(MICROSECOND, ${us}, '1970-01-01 00:00:00')`
  const usOf = (col: string) => `TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', ${col})`
  const claimedColumns = sql.literal(
    `id, name, payload, attempts, attempt_base, priority, ${usOf("run_at")} AS run_at_us, ` +
      `${usOf("created_at")} AS created_at_us, errors, trace_context, unique_states`
  )
  const claimedColumnsJ = sql.literal(
    `j.id, j.name, j.payload, j.attempts, j.attempt_base, j.priority, ${usOf("j.run_at")} AS run_at_us, ` +
      `${usOf("j.created_at")} AS created_at_us, j.errors, j.trace_context, j.unique_states`
  )
  const pendingIndex = sql(`${prefix}jobs_pending`)
  return {
    sql,
    prefix,
    autoIncrement,
    deleteCompleted,
    maxStatementBytes,
    jobs,
    workers,
    pendingIndex,
    lockPrefix,
    run,
    runPlain,
    ts,
    usOf,
    claimedColumns,
    claimedColumnsJ
  }
}

/** What each module of the MySQL/MariaDB driver receives. */
export type MysqlContext = ReturnType<typeof makeContext>

/**
 * Keys as the unique indexes compare them: utf8mb4_bin pads with spaces, so keys that differ only
 * by trailing spaces are one key there (picking both would make the update fail every time, and
 * the claim would never succeed).
 */
export const keyOf = (k: unknown) => (k === null || k === undefined ? null : String(k).replace(/ +$/, ""))
