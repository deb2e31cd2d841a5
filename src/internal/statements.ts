/**
 * Every SQL statement sqlane runs at run time, one function per operation (noun + verb),
 * PostgreSQL and MySQL/MariaDB side by side. Built once per dialect when the services are
 * built; nothing else in the library writes SQL for the jobs table.
 *
 * Times cross the wire as integer microseconds since the Unix epoch and are converted in SQL,
 * so neither the process time zone, the driver's date handling nor the database session's
 * time zone can shift them. Columns are `timestamptz` (PostgreSQL) and `DATETIME(6)` holding
 * UTC (MySQL/MariaDB).
 *
 * MySQL/MariaDB statements use only syntax that MySQL 8.0+ and MariaDB 10.6+ both accept.
 *
 * @internal
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import type * as Statement from "@effect/sql/Statement"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"

/** A claimed job row. Times are microseconds since the epoch. */
export interface ClaimedRow {
  readonly id: string
  readonly name: string
  readonly payload: string
  readonly attempts: number
  /** Attempts made before the last manual retry: the retry schedule counts from here. */
  readonly attemptBase: number
  readonly priority: number
  readonly runAtUs: number
  readonly createdAtUs: number
  readonly errors: string | null
}

/** A job row as read by `jobGet`. */
export interface JobRow extends ClaimedRow {
  readonly state: string
  readonly claimedAtUs: number | null
  readonly finishedAtUs: number | null
  readonly lastError: string | null
  readonly result: string | null
}

/** One row to insert. */
export interface InsertRow {
  readonly name: string
  readonly payload: string
  readonly priority: number
  readonly runAtUs: number
}

/**
 * The end of one attempt, written by the Completer. Guarded by `id`, `attempt` and
 * `state = 'running'`. `released` puts the job back to pending without counting the attempt.
 */
export interface Finish {
  readonly id: string
  readonly attempt: number
  readonly state: "pending" | "completed" | "dead" | "released"
  /** New `run_at` (retries) or null to keep it. */
  readonly runAtUs: number | null
  readonly finishedAtUs: number | null
  /** New last error, or null to keep it. */
  readonly lastError: string | null
  /** New error history (JSON array), or null to keep it. */
  readonly errors: string | null
  readonly result: string | null
}

/** The earliest pending `run_at` of a job name. */
export interface ProbeRow {
  readonly name: string
  readonly nextUs: number
}

export interface Statements {
  readonly dialect: "pg" | "mysql"
  /** Inserts jobs in one statement per chunk; returns their ids in input order. */
  readonly jobInsertMany: (
    rows: ReadonlyArray<InsertRow>,
    nowUs: number,
    notify: string | undefined
  ) => Effect.Effect<ReadonlyArray<string>, SqlError>
  /** For each of `names` with pending jobs, its earliest `run_at`. Reads only names with pending jobs. */
  readonly jobProbe: (names: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<ProbeRow>, SqlError>
  /**
   * Claims up to `limit` due jobs of `names`, ordered by priority, `run_at`, id: marks them
   * `running`, counts the attempt, records the worker. Returns them in claim order.
   */
  readonly jobClaim: (
    names: ReadonlyArray<string>,
    limit: number,
    nowUs: number,
    workerId: string
  ) => Effect.Effect<ReadonlyArray<ClaimedRow>, SqlError>
  /** Writes the ends of attempts in one statement; rows whose attempt is stale are left alone. */
  readonly jobFinishMany: (finishes: ReadonlyArray<Finish>) => Effect.Effect<void, SqlError>
  readonly jobGet: (id: string) => Effect.Effect<JobRow | undefined, SqlError>
  /** Cancels a pending or running job; returns whether it was. */
  readonly jobCancel: (id: string, nowUs: number) => Effect.Effect<boolean, SqlError>
  /** Puts a dead or cancelled job back to pending, due now; returns whether it was. */
  readonly jobRetry: (id: string, nowUs: number) => Effect.Effect<boolean, SqlError>
  /** Which of these running jobs' ids are now cancelled. */
  readonly jobCancelledAmong: (ids: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<string>, SqlError>
  /**
   * Running jobs of `names` whose worker is gone: its session lock is free, its heartbeat is older
   * than `leaseCutoffUs`, or it has no worker row.
   */
  readonly jobListOrphaned: (
    names: ReadonlyArray<string>,
    leaseCutoffUs: number,
    /** Also list running jobs of this worker id (the caller keeps those it is running). */
    selfId: string
  ) => Effect.Effect<
    ReadonlyArray<ClaimedRow & { readonly workerId: string | null; readonly claimedAtUs: number }>,
    SqlError
  >
  readonly workerRegister: (id: string, nowUs: number, host: string, pid: number) => Effect.Effect<void, SqlError>
  readonly workerHeartbeat: (id: string, nowUs: number) => Effect.Effect<void, SqlError>
  readonly workerRemove: (id: string) => Effect.Effect<void, SqlError>
  /** Deletes worker rows whose heartbeat is older than `cutoffUs` and that run no job. */
  readonly workerPrune: (cutoffUs: number) => Effect.Effect<void, SqlError>
  /** The statement that takes a worker's session lock (on its dedicated connection), and its params. */
  readonly workerLockStatement: (id: string) => readonly [sql: string, params: ReadonlyArray<unknown>]

  // --- Operations (issue 6): CLI, pause/resume, retention, progress -------------------------
  /** The job names paused in `<prefix>paused`. */
  readonly pausedList: () => Effect.Effect<ReadonlyArray<PausedRow>, SqlError>
  /** Pauses a job name; returns `false` when it was already paused. */
  readonly pausedInsert: (name: string, nowUs: number) => Effect.Effect<boolean, SqlError>
  /** Resumes a job name; returns `false` when it was not paused. */
  readonly pausedDelete: (name: string) => Effect.Effect<boolean, SqlError>
  /**
   * Jobs, newest first (by id), optionally of one name and/or state, with ids below `beforeId`
   * (for paging); at most `limit`.
   */
  readonly jobList: (filter: JobListFilter) => Effect.Effect<ReadonlyArray<JobSummaryRow>, SqlError>
  /**
   * Counts per job name and state; `due` and `oldestDueUs` over pending jobs with `run_at <= nowUs`;
   * `recent` counts jobs finished at or after `sinceUs` (completed within the retention window).
   */
  readonly jobStats: (nowUs: number, sinceUs: number) => Effect.Effect<ReadonlyArray<StatsRow>, SqlError>
  /**
   * Puts up to `limit` jobs of `name` in `state` (dead or cancelled) back to pending, due now, with a
   * fresh set of attempts. Returns how many it changed.
   */
  readonly jobRetryByName: (
    name: string,
    state: "dead" | "cancelled",
    nowUs: number,
    limit: number
  ) => Effect.Effect<number, SqlError>
  /** Records a running attempt's progress (JSON text); returns `false` when the attempt is no longer running. */
  readonly jobProgressSet: (id: string, attempt: number, progress: string) => Effect.Effect<boolean, SqlError>
  /** A job's progress JSON, if it reported any. */
  readonly jobProgressGet: (id: string) => Effect.Effect<string | null, SqlError>
  /**
   * Deletes at most `limit` jobs in `state` finished before `cutoffUs`, oldest first. Returns how many
   * it deleted.
   */
  readonly jobPruneFinished: (
    state: "completed" | "dead" | "cancelled",
    cutoffUs: number,
    limit: number
  ) => Effect.Effect<number, SqlError>
  /**
   * The statements (not functions: no transient retry) that take (without waiting) and release the
   * pruner's session lock for this prefix, run on a reserved connection. The take returns one row, one column: true/1 when taken.
   */
  readonly prunerLock: {
    readonly lock: readonly [sql: string, params: ReadonlyArray<unknown>]
    readonly unlock: readonly [sql: string, params: ReadonlyArray<unknown>]
  }
  /** The ids of the migrations applied to this prefix, or `undefined` when its migrations table is missing. */
  readonly migrationList: () => Effect.Effect<ReadonlyArray<number> | undefined, SqlError>
  /** Sends a `NOTIFY` on `channel` (PostgreSQL); does nothing on MySQL/MariaDB. */
  readonly channelNotify: (channel: string, payload: string) => Effect.Effect<void, SqlError>
}

/** A paused job name. */
export interface PausedRow {
  readonly name: string
  readonly pausedAtUs: number
}

/** Filters of `jobList`. */
export interface JobListFilter {
  readonly name?: string | undefined
  readonly state?: string | undefined
  readonly beforeId?: string | undefined
  readonly limit: number
}

/** A job without its payload, errors and result, as `jobList` reads it. Times are µs. */
export interface JobSummaryRow {
  readonly id: string
  readonly name: string
  readonly state: string
  readonly attempts: number
  readonly priority: number
  readonly runAtUs: number
  readonly createdAtUs: number
  readonly claimedAtUs: number | null
  readonly finishedAtUs: number | null
  readonly workerId: string | null
  readonly lastError: string | null
  readonly progress: string | null
}

/** One job name and state of `jobStats`. */
export interface StatsRow {
  readonly name: string
  readonly state: string
  readonly count: number
  readonly due: number
  readonly oldestDueUs: number | null
  readonly recent: number
}

/** The session lock of a worker is `sqlane:w:<worker id>` (MySQL) or an advisory lock on its hash (PostgreSQL). */
export const workerLockName = (id: string) => `sqlane:w:${id}`
/** First key of sqlane's two-key advisory locks on PostgreSQL. */
const pgLockSpace = 0x5a1a7e

const num = (u: unknown): number => (typeof u === "number" ? u : Number(u))
const numOrNull = (u: unknown): number | null => (u === null || u === undefined ? null : num(u))

const toClaimed = (r: any): ClaimedRow => ({
  id: String(r.id),
  name: r.name,
  payload: r.payload,
  attempts: num(r.attempts),
  attemptBase: num(r.attempt_base ?? 0),
  priority: num(r.priority),
  runAtUs: num(r.run_at_us),
  createdAtUs: num(r.created_at_us),
  errors: r.errors ?? null
})

const toJobRow = (r: any): JobRow => ({
  ...toClaimed(r),
  state: r.state,
  claimedAtUs: numOrNull(r.claimed_at_us),
  finishedAtUs: numOrNull(r.finished_at_us),
  lastError: r.last_error ?? null,
  result: r.result ?? null
})

const byClaimOrder = (a: ClaimedRow, b: ClaimedRow) =>
  a.priority - b.priority || a.runAtUs - b.runAtUs || (BigInt(a.id) < BigInt(b.id) ? -1 : 1)

/** PostgreSQL: one statement per operation. */
export const pg = (sql: SqlClient.SqlClient, prefix: string): Statements => {
  const jobs = sql(`${prefix}jobs`)
  const workers = sql(`${prefix}workers`)
  const ts = (us: number | Statement.Fragment) => sql`(TIMESTAMPTZ 'epoch' + ${us}::bigint * INTERVAL '1 microsecond')`
  const us = (col: string) => sql.literal(`(EXTRACT(EPOCH FROM ${col}) * 1000000)::bigint`)
  const claimedColumns = sql.literal(
    `id, name, payload, attempts, attempt_base, priority, (EXTRACT(EPOCH FROM run_at) * 1000000)::bigint AS run_at_us, ` +
      `(EXTRACT(EPOCH FROM created_at) * 1000000)::bigint AS created_at_us, errors`
  )
  const claimedColumnsJ = sql.literal(
    `j.id, j.name, j.payload, j.attempts, j.attempt_base, j.priority, ` +
      `(EXTRACT(EPOCH FROM j.run_at) * 1000000)::bigint AS run_at_us, ` +
      `(EXTRACT(EPOCH FROM j.created_at) * 1000000)::bigint AS created_at_us, j.errors`
  )
  return {
    dialect: "pg",
    jobInsertMany: (rows, nowUs, notify) => {
      const insert = sql`INSERT INTO ${jobs} (name, payload, priority, run_at, created_at)
        SELECT v.name, v.payload, v.priority, TIMESTAMPTZ 'epoch' + v.run_at * INTERVAL '1 microsecond', ${ts(nowUs)}
        FROM unnest(${rows.map((r) => r.name)}::text[], ${rows.map((r) => r.payload)}::text[],
                    ${rows.map((r) => r.priority)}::int[], ${rows.map((r) => r.runAtUs)}::bigint[])
             WITH ORDINALITY AS v(name, payload, priority, run_at, ord)
        ORDER BY v.ord
        RETURNING id`
      const statement = notify === undefined
        ? sql<{ id: string }>`WITH ins AS (${insert}) SELECT id FROM ins`
        : sql<{ id: string }>`WITH ins AS (${insert})
            SELECT ins.id FROM ins CROSS JOIN (SELECT pg_notify(${`${prefix}jobs`}, ${notify})) AS n`
      return Effect.map(statement, (r) =>
        r.map((x) => BigInt(x.id)).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)).map(String))
    },
    jobProbe: (names) =>
      Effect.map(
        sql<{ name: string; next_us: string }>`WITH RECURSIVE t AS (
            (SELECT name, run_at FROM ${jobs} WHERE state = 'pending' ORDER BY name, run_at LIMIT 1)
            UNION ALL
            SELECT n.name, n.run_at FROM t CROSS JOIN LATERAL (
              SELECT j.name, j.run_at FROM ${jobs} j
              WHERE j.state = 'pending' AND j.name > t.name
              ORDER BY j.name, j.run_at LIMIT 1) n
          )
          SELECT name, ${us("run_at")} AS next_us FROM t WHERE name = ANY(${names}::text[])`,
        (rows) => rows.map((r) => ({ name: r.name, nextUs: num(r.next_us) }))
      ),
    jobClaim: (names, limit, nowUs, workerId) =>
      Effect.map(
        sql`UPDATE ${jobs} SET state = 'running', attempts = attempts + 1, claimed_at = ${ts(nowUs)},
              worker_id = ${workerId}
            WHERE id IN (
              SELECT id FROM ${jobs}
              WHERE state = 'pending' AND name = ANY(${names}::text[]) AND run_at <= ${ts(nowUs)}
              ORDER BY priority, run_at, id
              LIMIT ${sql.literal(String(Math.floor(limit)))}
              FOR UPDATE SKIP LOCKED)
            RETURNING ${claimedColumns}`,
        (rows) => rows.map(toClaimed).sort(byClaimOrder)
      ),
    jobFinishMany: (finishes) =>
      sql`UPDATE ${jobs} AS j SET
            state = CASE WHEN v.state = 'released' THEN 'pending' ELSE v.state END,
            attempts = CASE WHEN v.state = 'released' THEN j.attempts - 1 ELSE j.attempts END,
            run_at = COALESCE(TIMESTAMPTZ 'epoch' + v.run_at_us * INTERVAL '1 microsecond', j.run_at),
            finished_at = TIMESTAMPTZ 'epoch' + v.finished_at_us * INTERVAL '1 microsecond',
            last_error = COALESCE(v.last_error, j.last_error),
            errors = COALESCE(v.errors, j.errors),
            result = v.result,
            worker_id = NULL
          FROM unnest(${finishes.map((f) => f.id)}::bigint[], ${finishes.map((f) => f.attempt)}::int[],
                      ${finishes.map((f) => f.state)}::text[], ${finishes.map((f) => f.runAtUs)}::bigint[],
                      ${finishes.map((f) => f.finishedAtUs)}::bigint[], ${finishes.map((f) => f.lastError)}::text[],
                      ${finishes.map((f) => f.errors)}::text[], ${finishes.map((f) => f.result)}::text[])
               AS v(id, attempt, state, run_at_us, finished_at_us, last_error, errors, result)
          WHERE j.id = v.id AND j.attempts = v.attempt AND j.state = 'running'`.pipe(Effect.asVoid),
    jobCancel: (id, nowUs) =>
      Effect.map(
        sql`UPDATE ${jobs} SET state = 'cancelled', finished_at = ${ts(nowUs)}, worker_id = NULL
            WHERE id = ${id}::bigint AND state IN ('pending', 'running') RETURNING id`,
        (rows) => rows.length > 0
      ),
    jobRetry: (id, nowUs) =>
      Effect.map(
        sql`UPDATE ${jobs} SET state = 'pending', run_at = ${ts(nowUs)}, finished_at = NULL, attempt_base = attempts
            WHERE id = ${id}::bigint AND state IN ('dead', 'cancelled') RETURNING id`,
        (rows) => rows.length > 0
      ),
    jobCancelledAmong: (ids) =>
      ids.length === 0 ? Effect.succeed([]) : Effect.map(
        sql<{ id: string }>`SELECT id FROM ${jobs} WHERE id = ANY(${ids}::bigint[]) AND state = 'cancelled'`,
        (rows) => rows.map((r) => String(r.id))
      ),
    jobListOrphaned: (names, leaseCutoffUs, selfId) =>
      Effect.map(
        sql`SELECT ${claimedColumnsJ}, j.worker_id,
              (EXTRACT(EPOCH FROM j.claimed_at) * 1000000)::bigint AS claimed_at_us
            FROM ${jobs} j
            LEFT JOIN ${workers} w ON w.id = j.worker_id
            WHERE j.state = 'running' AND j.name = ANY(${names}::text[])
              AND (w.id IS NULL OR j.worker_id = ${selfId} OR w.heartbeat_at < ${ts(leaseCutoffUs)} OR NOT EXISTS (
                SELECT 1 FROM pg_locks l
                WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
                  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
                  AND l.classid::bigint = ${pgLockSpace}
                  AND l.objid::bigint = (hashtext(${sql.literal("'sqlane:w:'")} || j.worker_id)::bigint & 4294967295)))
            LIMIT 1000`,
        (rows) => rows.map((r: any) => ({ ...toClaimed(r), workerId: r.worker_id ?? null, claimedAtUs: num(r.claimed_at_us) }))
      ),
    workerRegister: (id, nowUs, host, pid) =>
      sql`INSERT INTO ${workers} (id, started_at, heartbeat_at, host, pid)
          VALUES (${id}, ${ts(nowUs)}, ${ts(nowUs)}, ${host}, ${pid})
          ON CONFLICT (id) DO UPDATE SET heartbeat_at = EXCLUDED.heartbeat_at`.pipe(Effect.asVoid),
    workerHeartbeat: (id, nowUs) =>
      sql`UPDATE ${workers} SET heartbeat_at = ${ts(nowUs)} WHERE id = ${id}`.pipe(Effect.asVoid),
    workerRemove: (id) => sql`DELETE FROM ${workers} WHERE id = ${id}`.pipe(Effect.asVoid),
    workerPrune: (cutoffUs) =>
      sql`DELETE FROM ${workers} w WHERE w.heartbeat_at < ${ts(cutoffUs)}
          AND NOT EXISTS (SELECT 1 FROM ${jobs} j WHERE j.state = 'running' AND j.worker_id = w.id)`.pipe(Effect.asVoid),
    workerLockStatement: (id) => ["SELECT pg_try_advisory_lock($1, hashtext($2))", [pgLockSpace, workerLockName(id)]],
    jobGet: (id) =>
      Effect.map(
        sql`SELECT ${claimedColumns}, state, ${us("claimed_at")} AS claimed_at_us,
              ${us("finished_at")} AS finished_at_us, last_error, result
            FROM ${jobs} WHERE id = ${id}::bigint`,
        (rows) => (rows.length === 0 ? undefined : toJobRow(rows[0]))
      ),

    // --- Operations (issue 6) ---------------------------------------------------------------
    pausedList: () =>
      Effect.map(
        sql`SELECT name, ${us("paused_at")} AS paused_at_us FROM ${sql(`${prefix}paused`)} ORDER BY name`,
        (rows: ReadonlyArray<any>) => rows.map((r) => ({ name: r.name, pausedAtUs: num(r.paused_at_us) }))
      ),
    pausedInsert: (name, nowUs) =>
      Effect.map(
        sql`INSERT INTO ${sql(`${prefix}paused`)} (name, paused_at) VALUES (${name}, ${ts(nowUs)})
            ON CONFLICT (name) DO NOTHING RETURNING name`,
        (rows) => rows.length > 0
      ),
    pausedDelete: (name) =>
      Effect.map(sql`DELETE FROM ${sql(`${prefix}paused`)} WHERE name = ${name} RETURNING name`, (rows) => rows.length > 0),
    jobList: (filter) =>
      Effect.map(
        sql`SELECT id, name, state, attempts, priority, ${us("run_at")} AS run_at_us,
              ${us("created_at")} AS created_at_us, ${us("claimed_at")} AS claimed_at_us,
              ${us("finished_at")} AS finished_at_us, worker_id, last_error, progress
            FROM ${jobs}
            WHERE ${sql.and([
          ...(filter.name === undefined ? [] : [sql`name = ${filter.name}`]),
          ...(filter.state === undefined ? [] : [sql`state = ${filter.state}`]),
          ...(filter.beforeId === undefined ? [] : [sql`id < ${filter.beforeId}::bigint`])
        ])}
            ORDER BY id DESC LIMIT ${sql.literal(String(Math.max(0, Math.floor(filter.limit))))}`,
        (rows) => rows.map(toSummary)
      ),
    jobStats: (nowUs, sinceUs) =>
      Effect.map(
        sql`SELECT name, state, COUNT(*) AS n,
              COUNT(*) FILTER (WHERE state = 'pending' AND run_at <= ${ts(nowUs)}) AS due,
              (EXTRACT(EPOCH FROM MIN(run_at) FILTER (WHERE state = 'pending' AND run_at <= ${ts(nowUs)})) * 1000000)::bigint
                AS oldest_due_us,
              COUNT(*) FILTER (WHERE finished_at >= ${ts(sinceUs)}) AS recent
            FROM ${jobs} GROUP BY name, state ORDER BY name, state`,
        (rows) => rows.map(toStats)
      ),
    jobRetryByName: (name, state, nowUs, limit) =>
      Effect.map(
        sql`UPDATE ${jobs} SET state = 'pending', run_at = ${ts(nowUs)}, finished_at = NULL, attempt_base = attempts
            WHERE id IN (
              SELECT id FROM ${jobs} WHERE state = ${state} AND name = ${name}
              ORDER BY id LIMIT ${sql.literal(String(Math.floor(limit)))} FOR UPDATE SKIP LOCKED)
              AND state = ${state}
            RETURNING id`,
        (rows) => rows.length
      ),
    jobProgressSet: (id, attempt, progress) =>
      Effect.map(
        sql`UPDATE ${jobs} SET progress = ${progress}
            WHERE id = ${id}::bigint AND attempts = ${attempt} AND state = 'running' RETURNING id`,
        (rows) => rows.length > 0
      ),
    jobProgressGet: (id) =>
      Effect.map(
        sql<{ progress: string | null }>`SELECT progress FROM ${jobs} WHERE id = ${id}::bigint`,
        (rows) => rows[0]?.progress ?? null
      ),
    jobPruneFinished: (state, cutoffUs, limit) =>
      // The outer conditions are checked again on rows changed meanwhile (a retried dead job stays).
      Effect.map(
        sql<{ n: string }>`WITH d AS (
              DELETE FROM ${jobs} WHERE id IN (
                SELECT id FROM ${jobs} WHERE state = ${state} AND finished_at < ${ts(cutoffUs)}
                ORDER BY finished_at LIMIT ${sql.literal(String(Math.floor(limit)))})
              AND state = ${state} AND finished_at < ${ts(cutoffUs)}
              RETURNING 1)
            SELECT COUNT(*) AS n FROM d`,
        (rows) => num(rows[0]?.n ?? 0)
      ),
    prunerLock: ({
      lock: ["SELECT pg_try_advisory_lock($1, hashtext($2))", [pgLockSpace, prunerLockName(prefix)]],
      unlock: ["SELECT pg_advisory_unlock($1, hashtext($2))", [pgLockSpace, prunerLockName(prefix)]]
    }),
    migrationList: () =>
      Effect.gen(function*() {
        const [exists] = yield* sql<{ n: string }>`SELECT COUNT(*) AS n FROM information_schema.tables
          WHERE table_schema = current_schema() AND table_name = ${`${prefix}migrations`}`
        if (num(exists?.n ?? 0) === 0) return undefined
        const rows = yield* sql<{ id: number }>`SELECT migration_id AS id FROM ${sql(`${prefix}migrations`)}
          ORDER BY migration_id`
        return rows.map((r) => num(r.id))
      }),
    channelNotify: (channel, payload) => sql`SELECT pg_notify(${channel}, ${payload})`.pipe(Effect.asVoid)
  }
}

/**
 * MySQL 8.0+ / MariaDB 10.6+. MySQL cannot select inside an update of the same table, so the
 * claim is one locking read (`FOR UPDATE SKIP LOCKED`) and one update, in a transaction.
 */
export const mysql = (sql: SqlClient.SqlClient, prefix: string, autoIncrement: number): Statements => {
  const jobs = sql(`${prefix}jobs`)
  const workers = sql(`${prefix}workers`)
  const ts = (us: number) => sql`TIMESTAMPADD(MICROSECOND, ${us}, '1970-01-01 00:00:00')`
  const usOf = (col: string) => `TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', ${col})`
  const claimedColumns = sql.literal(
    `id, name, payload, attempts, attempt_base, priority, ${usOf("run_at")} AS run_at_us, ` +
      `${usOf("created_at")} AS created_at_us, errors`
  )
  const claimedColumnsJ = sql.literal(
    `j.id, j.name, j.payload, j.attempts, j.attempt_base, j.priority, ${usOf("j.run_at")} AS run_at_us, ` +
      `${usOf("j.created_at")} AS created_at_us, j.errors`
  )
  // Inserts go through prepared statements (`.raw` gives the insert id), so the number of
  // distinct statement texts must stay small: rows are cut into chunks whose sizes are powers of
  // two up to 256, giving at most 9 texts per table.
  const insertChunk = (rows: ReadonlyArray<InsertRow>, nowUs: number) => {
    const values = rows.map((r) => sql`(${r.name}, ${r.payload}, ${r.priority}, ${ts(r.runAtUs)}, ${ts(nowUs)})`)
    return sql`INSERT INTO ${jobs} (name, payload, priority, run_at, created_at) VALUES ${sql.csv(values)}`.raw.pipe(
      Effect.map((result: any) => {
        // A multi-row INSERT ... VALUES is a "simple insert": InnoDB gives its rows consecutive
        // ids (in steps of auto_increment_increment) in every autoinc lock mode.
        const first = BigInt(result.insertId)
        return rows.map((_, i) => String(first + BigInt(i * autoIncrement)))
      })
    )
  }
  const chunksOf = (rows: ReadonlyArray<InsertRow>): Array<ReadonlyArray<InsertRow>> => {
    const chunks: Array<ReadonlyArray<InsertRow>> = []
    let i = 0
    while (i < rows.length) {
      const left = rows.length - i
      let size = 256
      while (size > left) size >>= 1
      chunks.push(rows.slice(i, i + size))
      i += size
    }
    return chunks
  }
  return {
    dialect: "mysql",
    jobInsertMany: (rows, nowUs) => {
      const chunks = chunksOf(rows)
      if (chunks.length === 1) return insertChunk(chunks[0], nowUs)
      return Effect.forEach(chunks, (c) => insertChunk(c, nowUs)).pipe(
        Effect.map((ids) => ids.flat()),
        sql.withTransaction
      )
    },
    jobProbe: (names) =>
      Effect.map(
        // With the index (state, name, run_at) this is a loose index scan: one index dive per
        // name with pending jobs.
        sql<{ name: string; next_us: number }>`SELECT name, ${
          sql.literal(usOf("MIN(run_at)"))
        } AS next_us FROM ${jobs}
          WHERE state = 'pending' AND name IN ${sql.in(names)} GROUP BY name`.unprepared,
        (rows) => rows.map((r) => ({ name: r.name, nextUs: num(r.next_us) }))
      ),
    jobClaim: (names, limit, nowUs, workerId) =>
      // At READ COMMITTED, so the locking read takes no gap locks that would block (or deadlock
      // with) the app's transactions enqueueing jobs; in two round trips (multi-statement).
      Effect.gen(function*() {
        const conn = yield* sql.reserve
        const [select, selectParams] = sql`SELECT ${claimedColumns} FROM ${jobs}
          WHERE state = 'pending' AND name IN ${sql.in(names)} AND run_at <= ${ts(nowUs)}
          ORDER BY priority, run_at, id
          LIMIT ${sql.literal(String(Math.floor(limit)))}
          FOR UPDATE SKIP LOCKED`.compile(true)
        return yield* Effect.gen(function*() {
          const results = yield* conn.executeUnprepared(
            `SET TRANSACTION ISOLATION LEVEL READ COMMITTED; START TRANSACTION; ${select}`,
            selectParams,
            undefined
          )
          const rows = (results[results.length - 1] ?? []) as ReadonlyArray<unknown>
          if (rows.length === 0) {
            yield* conn.executeUnprepared("COMMIT", [], undefined)
            return [] as Array<ClaimedRow>
          }
          const claimed = rows.map(toClaimed)
          const [update, updateParams] = sql`UPDATE ${jobs} SET state = 'running', attempts = attempts + 1,
                claimed_at = ${ts(nowUs)}, worker_id = ${workerId}
              WHERE id IN ${sql.in(claimed.map((r) => r.id))}`.compile(true)
          yield* conn.executeUnprepared(`${update}; COMMIT`, updateParams, undefined)
          return claimed.map((r) => ({ ...r, attempts: r.attempts + 1 }))
        }).pipe(Effect.onError(() => Effect.ignore(conn.executeUnprepared("ROLLBACK", [], undefined))))
      }).pipe(Effect.scoped),
    jobFinishMany: (finishes) => {
      const rows = finishes.map((f, i) =>
        i === 0
          ? sql`SELECT CAST(${f.id} AS SIGNED) AS id, CAST(${f.attempt} AS SIGNED) AS attempt, ${f.state} AS state,
                CAST(${f.runAtUs} AS SIGNED) AS run_at_us, CAST(${f.finishedAtUs} AS SIGNED) AS finished_at_us,
                ${f.lastError} AS last_error, ${f.errors} AS errors, ${f.result} AS result`
          : sql`SELECT ${f.id}, ${f.attempt}, ${f.state}, ${f.runAtUs}, ${f.finishedAtUs}, ${f.lastError}, ${f.errors}, ${f.result}`
      )
      return sql`UPDATE ${jobs} j JOIN (${sql.join(" UNION ALL ", false)(rows)}) v
            ON j.id = v.id AND j.attempts = v.attempt
          SET j.attempts = CASE WHEN v.state = 'released' THEN j.attempts - 1 ELSE j.attempts END,
            j.state = CASE WHEN v.state = 'released' THEN 'pending' ELSE v.state END,
            j.run_at = COALESCE(TIMESTAMPADD(MICROSECOND, v.run_at_us, '1970-01-01 00:00:00'), j.run_at),
            j.finished_at = TIMESTAMPADD(MICROSECOND, v.finished_at_us, '1970-01-01 00:00:00'),
            j.last_error = COALESCE(v.last_error, j.last_error),
            j.errors = COALESCE(v.errors, j.errors),
            j.result = v.result,
            j.worker_id = NULL
          WHERE j.state = 'running'`.unprepared.pipe(Effect.asVoid)
    },
    jobCancel: (id, nowUs) =>
      Effect.map(
        sql`UPDATE ${jobs} SET state = 'cancelled', finished_at = ${ts(nowUs)}, worker_id = NULL
            WHERE id = ${id} AND state IN ('pending', 'running')`.raw,
        (r: any) => Number(r.affectedRows) > 0
      ),
    jobRetry: (id, nowUs) =>
      Effect.map(
        sql`UPDATE ${jobs} SET state = 'pending', run_at = ${ts(nowUs)}, finished_at = NULL, attempt_base = attempts
            WHERE id = ${id} AND state IN ('dead', 'cancelled')`.raw,
        (r: any) => Number(r.affectedRows) > 0
      ),
    jobCancelledAmong: (ids) =>
      ids.length === 0 ? Effect.succeed([]) : Effect.map(
        sql<{ id: string }>`SELECT id FROM ${jobs} WHERE id IN ${sql.in(ids)} AND state = 'cancelled'`.unprepared,
        (rows) => rows.map((r) => String(r.id))
      ),
    jobListOrphaned: (names, leaseCutoffUs, selfId) =>
      Effect.map(
        sql`SELECT ${claimedColumnsJ}, j.worker_id, ${sql.literal(usOf("j.claimed_at"))} AS claimed_at_us
            FROM ${jobs} j
            LEFT JOIN ${workers} w ON w.id = j.worker_id
            WHERE j.state = 'running' AND j.name IN ${sql.in(names)}
              AND (w.id IS NULL OR j.worker_id = ${selfId} OR w.heartbeat_at < ${ts(leaseCutoffUs)}
                   OR IS_FREE_LOCK(CONCAT('sqlane:w:', j.worker_id)) = 1)
            LIMIT 1000`.unprepared,
        (rows) => rows.map((r: any) => ({ ...toClaimed(r), workerId: r.worker_id ?? null, claimedAtUs: num(r.claimed_at_us) }))
      ),
    workerRegister: (id, nowUs, host, pid) =>
      sql`INSERT INTO ${workers} (id, started_at, heartbeat_at, host, pid)
          VALUES (${id}, ${ts(nowUs)}, ${ts(nowUs)}, ${host}, ${pid})
          ON DUPLICATE KEY UPDATE heartbeat_at = VALUES(heartbeat_at)`.pipe(Effect.asVoid),
    workerHeartbeat: (id, nowUs) =>
      sql`UPDATE ${workers} SET heartbeat_at = ${ts(nowUs)} WHERE id = ${id}`.pipe(Effect.asVoid),
    workerRemove: (id) => sql`DELETE FROM ${workers} WHERE id = ${id}`.pipe(Effect.asVoid),
    workerPrune: (cutoffUs) =>
      sql`DELETE FROM ${workers} WHERE heartbeat_at < ${ts(cutoffUs)}
          AND id NOT IN (SELECT worker_id FROM (
            SELECT DISTINCT worker_id FROM ${jobs} WHERE state = 'running' AND worker_id IS NOT NULL) AS r)`.pipe(
          Effect.asVoid
        ),
    workerLockStatement: (id) => ["SELECT GET_LOCK(?, 0)", [workerLockName(id)]],
    jobGet: (id) =>
      Effect.map(
        sql`SELECT ${claimedColumns}, state, ${sql.literal(usOf("claimed_at"))} AS claimed_at_us,
              ${sql.literal(usOf("finished_at"))} AS finished_at_us, last_error, result
            FROM ${jobs} WHERE id = ${id}`,
        (rows) => (rows.length === 0 ? undefined : toJobRow(rows[0]))
      ),

    // --- Operations (issue 6) ---------------------------------------------------------------
    pausedList: () =>
      Effect.map(
        sql`SELECT name, ${sql.literal(usOf("paused_at"))} AS paused_at_us FROM ${sql(`${prefix}paused`)} ORDER BY name`,
        (rows: ReadonlyArray<any>) => rows.map((r) => ({ name: r.name, pausedAtUs: num(r.paused_at_us) }))
      ),
    pausedInsert: (name, nowUs) =>
      Effect.map(
        sql`INSERT IGNORE INTO ${sql(`${prefix}paused`)} (name, paused_at) VALUES (${name}, ${ts(nowUs)})`.raw,
        (r: any) => Number(r.affectedRows) > 0
      ),
    pausedDelete: (name) =>
      Effect.map(sql`DELETE FROM ${sql(`${prefix}paused`)} WHERE name = ${name}`.raw, (r: any) => Number(r.affectedRows) > 0),
    jobList: (filter) =>
      Effect.map(
        sql`SELECT id, name, state, attempts, priority, ${sql.literal(usOf("run_at"))} AS run_at_us,
              ${sql.literal(usOf("created_at"))} AS created_at_us, ${sql.literal(usOf("claimed_at"))} AS claimed_at_us,
              ${sql.literal(usOf("finished_at"))} AS finished_at_us, worker_id, last_error, progress
            FROM ${jobs}
            WHERE ${sql.and([
          ...(filter.name === undefined ? [] : [sql`name = ${filter.name}`]),
          ...(filter.state === undefined ? [] : [sql`state = ${filter.state}`]),
          ...(filter.beforeId === undefined ? [] : [sql`id < ${filter.beforeId}`])
        ])}
            ORDER BY id DESC LIMIT ${sql.literal(String(Math.max(0, Math.floor(filter.limit))))}`.unprepared,
        (rows) => rows.map(toSummary)
      ),
    jobStats: (nowUs, sinceUs) =>
      Effect.map(
        sql`SELECT name, state, COUNT(*) AS n,
              SUM(CASE WHEN state = 'pending' AND run_at <= ${ts(nowUs)} THEN 1 ELSE 0 END) AS due,
              TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00',
                MIN(CASE WHEN state = 'pending' AND run_at <= ${ts(nowUs)} THEN run_at END)) AS oldest_due_us,
              SUM(CASE WHEN finished_at >= ${ts(sinceUs)} THEN 1 ELSE 0 END) AS recent
            FROM ${jobs} GROUP BY name, state ORDER BY name, state`.unprepared,
        (rows) => rows.map(toStats)
      ),
    jobRetryByName: (name, state, nowUs, limit) =>
      Effect.map(
        sql`UPDATE ${jobs} SET state = 'pending', run_at = ${ts(nowUs)}, finished_at = NULL, attempt_base = attempts
            WHERE state = ${state} AND name = ${name}
            ORDER BY id LIMIT ${sql.literal(String(Math.floor(limit)))}`.raw,
        (r: any) => Number(r.affectedRows)
      ),
    jobProgressSet: (id, attempt, progress) =>
      Effect.map(
        sql`UPDATE ${jobs} SET progress = ${progress}
            WHERE id = ${id} AND attempts = ${attempt} AND state = 'running'`.raw,
        (r: any) => Number(r.affectedRows) > 0
      ),
    jobProgressGet: (id) =>
      Effect.map(
        sql<{ progress: string | null }>`SELECT progress FROM ${jobs} WHERE id = ${id}`,
        (rows) => rows[0]?.progress ?? null
      ),
    jobPruneFinished: (state, cutoffUs, limit) =>
      // Two steps, so the delete takes record locks on primary keys only: a locking range scan of
      // the (state, finished_at) index would take gap locks that block jobs finishing meanwhile.
      Effect.gen(function*() {
        const rows = yield* sql<{ id: string }>`SELECT id FROM ${jobs}
          WHERE state = ${state} AND finished_at < ${ts(cutoffUs)}
          ORDER BY finished_at LIMIT ${sql.literal(String(Math.floor(limit)))}`
        if (rows.length === 0) return 0
        // The id list is padded to `limit` entries (repeating the last id), so the prepared
        // statement's text is the same for every batch.
        const ids = Array.from({ length: Math.floor(limit) }, (_, i) => String(rows[Math.min(i, rows.length - 1)].id))
        const result: any = yield* sql`DELETE FROM ${jobs}
          WHERE id IN ${sql.in(ids)} AND state = ${state} AND finished_at < ${ts(cutoffUs)}`.raw
        return Number(result.affectedRows)
      }),
    prunerLock: ({
      lock: ["SELECT GET_LOCK(?, 0)", [prunerLockName(prefix)]],
      unlock: ["SELECT RELEASE_LOCK(?)", [prunerLockName(prefix)]]
    }),
    migrationList: () =>
      Effect.gen(function*() {
        const [exists] = yield* sql<{ n: string }>`SELECT COUNT(*) AS n FROM information_schema.tables
          WHERE table_schema = DATABASE() AND table_name = ${`${prefix}migrations`}`
        if (num(exists?.n ?? 0) === 0) return undefined
        const rows = yield* sql<{ id: number }>`SELECT migration_id AS id FROM ${sql(`${prefix}migrations`)}
          ORDER BY migration_id`
        return rows.map((r) => num(r.id))
      }),
    channelNotify: () => Effect.void
  }
}

/**
 * Deadlocks and serialization failures (PostgreSQL 40P01/40001, MySQL/MariaDB 1213/1205) are
 * transient: the statement is retried, up to 5 times, 10 ms apart doubling. Inside a caller's
 * transaction nothing is retried (the transaction is already aborted; the caller decides).
 */
export const isTransient = (error: SqlError): boolean => {
  const cause = error.cause as { code?: unknown; errno?: unknown } | undefined
  const code = cause?.code
  const errno = cause?.errno
  return code === "40P01" || code === "40001" || errno === 1213 || errno === 1205 ||
    code === "ER_LOCK_DEADLOCK" || code === "ER_LOCK_WAIT_TIMEOUT"
}

const transientSchedule = Schedule.exponential("10 millis").pipe(Schedule.intersect(Schedule.recurs(5)))

export const retryTransient = <A, R>(effect: Effect.Effect<A, SqlError, R>): Effect.Effect<A, SqlError, R> =>
  Effect.flatMap(Effect.serviceOption(SqlClient.TransactionConnection), (tx) =>
    Option.isSome(tx) ? effect : Effect.retry(effect, { while: isTransient, schedule: transientSchedule }))

/** Every statement of `statements`, retried on transient errors. */
export const withTransientRetry = (statements: Statements): Statements => {
  const wrapped: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(statements)) {
    wrapped[key] = typeof value === "function" && key !== "workerLockStatement"
      ? (...args: Array<unknown>) => retryTransient((value as (...a: Array<unknown>) => Effect.Effect<unknown, SqlError>)(...args))
      : value
  }
  return wrapped as unknown as Statements
}

// --- Operations (issue 6) -------------------------------------------------------------------

const toSummary = (r: any): JobSummaryRow => ({
  id: String(r.id),
  name: r.name,
  state: r.state,
  attempts: num(r.attempts),
  priority: num(r.priority),
  runAtUs: num(r.run_at_us),
  createdAtUs: num(r.created_at_us),
  claimedAtUs: numOrNull(r.claimed_at_us),
  finishedAtUs: numOrNull(r.finished_at_us),
  workerId: r.worker_id ?? null,
  lastError: r.last_error ?? null,
  progress: r.progress ?? null
})

const toStats = (r: any): StatsRow => ({
  name: r.name,
  state: r.state,
  count: num(r.n),
  due: num(r.due ?? 0),
  oldestDueUs: numOrNull(r.oldest_due_us),
  recent: num(r.recent ?? 0)
})

/** The pruner's lock name for a table prefix (at most 53 characters: MySQL allows 64). */
export const prunerLockName = (prefix: string) => `sqlane:prune:${prefix}`
