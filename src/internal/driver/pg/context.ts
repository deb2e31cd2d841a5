/**
 * What the modules of the PostgreSQL driver share: the client, the tables, how the hot statements
 * run, the options, and the SQL fragments that several of them use.
 *
 * @internal
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type * as PgClient from "@effect/sql-pg/PgClient"
import type * as Statement from "@effect/sql/Statement"
import type Pg from "pg"
import { runner } from "../run.js"
import { workerLockPrefix } from "../workerRows.js"

/** Options of the PostgreSQL driver. */
export interface PgOptions {
  /** Whether a claim waits for its WAL flush (`QueueOptions.durableClaims`; default false). */
  readonly durableClaims?: boolean | undefined
  /** Whether an attempt's end deletes a completed job's row (`retention.completed` of 0). */
  readonly deleteCompleted?: boolean | undefined
  /** Whether the hot statements may run directly on their connection (see `runner`). */
  readonly direct?: boolean | undefined
  /**
   * The settings of @effect/sql-pg's `PgClient`, with which the LISTEN connection is opened, and the
   * `pg` module that opens it (loaded by the caller: `pg` is an optional peer dependency); without
   * them the driver has no notifications (`capabilities.listenNotify` false).
   */
  readonly listen?: { readonly config: PgClient.PgClientConfig; readonly pg: typeof Pg } | undefined
}

/** First key of sqlane's two-key advisory locks on PostgreSQL. */
export const pgLockSpace = 0x5a1a7e

/**
 * A PostgreSQL array literal of integers (ids as decimal strings) or plain words, built here: the
 * driver would escape every element of a JS array with regular expressions. Only for values that
 * need no quoting (digits, a minus sign, letters).
 */
export const numbers = (values: ReadonlyArray<string | number | null>): string => {
  let out = "{"
  for (let i = 0; i < values.length; i++) {
    const v = values[i]
    if (i > 0) out += ","
    out += v === null ? "NULL" : typeof v === "number" ? String(Math.trunc(v)) : v
  }
  return out + "}"
}

/** Text values as an array parameter; when all are null (the common case), as a literal. */
export const texts = (values: ReadonlyArray<string | null>): string | ReadonlyArray<string | null> =>
  values.every((v) => v === null) ? `{${values.map(() => "NULL").join(",")}}` : values

/**
 * PostgreSQL: a `timestamptz` column as integer microseconds since the epoch. `timestamptz` also holds
 * `infinity` and `-infinity` (a row edited by hand), which have no number: they read as the largest and
 * smallest times a job can have (years 9999 and 1000), so such a row is still claimed and read.
 */
export const usText = (col: string) =>
  `(CASE WHEN ${col} = 'infinity' THEN 253402300799999999 WHEN ${col} = '-infinity' THEN -30610224000000000 ` +
  `ELSE (EXTRACT(EPOCH FROM ${col}) * 1000000)::bigint END)`

/** The context of each module: `database` is the database's name (`current_database()`), which scopes worker lock names. */
export const makeContext = (sql: SqlClient.SqlClient, prefix: string, database: string, options: PgOptions) => {
  const jobs = sql(`${prefix}jobs`)
  const lockPrefix = workerLockPrefix("pg", database, prefix)
  const run = runner(options.direct === true)
  // A claim's own transaction commits without waiting for the WAL flush (see `PgOptions`): the
  // setting is local to the statement's transaction, read at its commit.
  const asyncCommit = options.durableClaims === true
    ? sql.literal("")
    : sql.literal(" AND (SELECT set_config('synchronous_commit', 'off', true)) IS NOT NULL")
  const workers = sql(`${prefix}workers`)
  const ts = (us: number | Statement.Fragment) => sql`(TIMESTAMPTZ 'epoch' + ${us}::bigint * INTERVAL '1 microsecond')`
  const us = (col: string) => sql.literal(usText(col))
  const claimedColumns = sql.literal(
    `id, name, payload, attempts, attempt_base, priority, ${usText("run_at")} AS run_at_us, ` +
      `${usText("created_at")} AS created_at_us, errors, trace_context, unique_states`
  )
  const claimedColumnsOf = (t: string) =>
    sql.literal(
      `${t}.id, ${t}.name, ${t}.payload, ${t}.attempts, ${t}.attempt_base, ${t}.priority, ` +
        `${usText(`${t}.run_at`)} AS run_at_us, ` +
        `${usText(`${t}.created_at`)} AS created_at_us, ${t}.errors, ${t}.trace_context, ${t}.unique_states`
    )
  const claimedColumnsJ = claimedColumnsOf("j")
  const claimedColumnsU = claimedColumnsOf("u")
  return {
    sql,
    prefix,
    options,
    jobs,
    workers,
    lockPrefix,
    run,
    asyncCommit,
    ts,
    us,
    claimedColumns,
    claimedColumnsJ,
    claimedColumnsU
  }
}

/** What each module of the PostgreSQL driver receives. */
export type PgContext = ReturnType<typeof makeContext>
