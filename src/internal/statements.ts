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
import { SqlError } from "@effect/sql/SqlError"
import type * as SqlConnection from "@effect/sql/SqlConnection"
import * as Statement from "@effect/sql/Statement"
import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"
import * as Option from "effect/Option"
import * as MysqlText from "./mysqlText.js"
import { uniqueGuard } from "./migrations.js"
import { builtInTracer } from "./tracing.js"
import { wallSleep } from "./wallClock.js"

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
  /** The span that enqueued the job, `<trace id>:<span id>:<sampled 1|0>`, if a tracer was installed. */
  readonly traceContext: string | null
  /** Whether the job holds its unique key while completed (its row outlives its completion). */
  readonly keepsKey: boolean
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
  /** Jobs that share a mutex key never run at the same time (null: no key). */
  readonly mutexKey: string | null
  /** The enqueueing span, `<trace id>:<span id>:<sampled 1|0>` (null: none). */
  readonly traceContext: string | null
}

/** A row inserted unless another job holds its unique key. */
export interface UniqueInsertRow extends InsertRow {
  readonly uniqueKey: string
  /** Bit mask of the states in which a job holds its key: pending 1, running 2, completed 4, dead 8, cancelled 16. */
  readonly uniqueStates: number
}

/** What `jobInsertUnique` did: inserted a job, or found the job that holds the key. */
export interface UniqueInsertResult {
  readonly id: string
  readonly inserted: boolean
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
  /** When a failed attempt ended (not written; the `at` of its `Failed` event). */
  readonly endedAtUs?: number | undefined
  /** New last error, or null to keep it. */
  readonly lastError: string | null
  /** New error history (JSON array), or null to keep it. */
  readonly errors: string | null
  readonly result: string | null
  /**
   * A completed job whose row must outlive its completion even when completed rows are deleted at
   * once (`retention.completed` 0): it holds its unique key while completed (`ClaimedRow.keepsKey`).
   */
  readonly keep?: boolean | undefined
  /**
   * The job's name, when the writer knows it (not written): the events of a job this process did
   * not claim (a rescue) carry it without reading the row, which may be gone by then.
   */
  readonly name?: string | undefined
}

/**
 * The ends of a write that changed nothing, by `endKey`: their attempt was stale (the job was
 * cancelled, or rescued from a worker taken for lost, while the attempt ran). Usually empty.
 */
export type StaleEnds = ReadonlySet<string>

/** A job name and a priority: the unit the probe reports and the claim reads. */
export interface Group {
  readonly name: string
  readonly priority: number
}

/** The earliest pending `run_at` of a job name at one priority. */
export interface ProbeRow extends Group {
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
  /**
   * Inserts one job unless a job holding its unique key exists (then returns that job's id and
   * writes nothing). An uncommitted insert of the same key makes this wait for its transaction.
   */
  readonly jobInsertUnique: (
    row: UniqueInsertRow,
    nowUs: number,
    notify: string | undefined
  ) => Effect.Effect<UniqueInsertResult, SqlError>
  /**
   * For each (name, priority) of `names` with pending jobs, its earliest `run_at`. A loose index
   * scan: reads one index entry per (name, priority) with pending jobs, nothing else.
   */
  readonly jobProbe: (names: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<ProbeRow>, SqlError>
  /**
   * Claims up to `limit` due jobs of `groups`, ordered by priority, `run_at`, id: marks them
   * `running`, counts the attempt, records the worker. Returns them in claim order. Each group
   * is one range of the pending index, read in order and stopped at the first job not yet due.
   */
  readonly jobClaim: (
    groups: ReadonlyArray<Group>,
    limit: number,
    nowUs: number,
    workerId: string
  ) => Effect.Effect<ReadonlyArray<ClaimedRow>, SqlError>
  /**
   * The plans of the probe and of the claims (as the database's EXPLAIN prints them, one string per
   * line or row), for tests that keep them free of full scans and sorts of the backlog.
   */
  readonly explainProbe: (names: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<string>, SqlError>
  readonly explainClaim: (groups: ReadonlyArray<Group>, limit: number, nowUs: number) => Effect.Effect<
    ReadonlyArray<string>,
    SqlError
  >
  readonly explainClaimKeyed: (groups: ReadonlyArray<Group>, limit: number, nowUs: number) => Effect.Effect<
    ReadonlyArray<string>,
    SqlError
  >
  /**
   * Like `jobClaim`, for claims that include job names whose jobs may carry mutex keys: claims due
   * jobs without a key and, for each key with no running job, the first due job of that key. A
   * unique index over running keys makes overlap impossible; a claim that loses a race for a key
   * is retried (never surfaced), and gives up (returns nothing) after 5 tries. Like `jobClaim`,
   * each group is one range of the pending index read in order; the groups' windows are merged.
   */
  readonly jobClaimKeyed: (
    groups: ReadonlyArray<Group>,
    limit: number,
    nowUs: number,
    workerId: string
  ) => Effect.Effect<ReadonlyArray<ClaimedRow>, SqlError>
  /** Due pending jobs of each of `names`, each counted up to `cap` (for the `sqlane_jobs_due` gauge). */
  readonly jobCountDue: (
    names: ReadonlyArray<string>,
    nowUs: number,
    cap: number
  ) => Effect.Effect<ReadonlyArray<{ readonly name: string; readonly due: number }>, SqlError>
  /**
   * Writes the ends of attempts in one transaction; rows whose attempt is stale are left alone, and
   * their ends are returned. PostgreSQL: one statement. MySQL/MariaDB: the ends and the commit;
   * when fewer rows changed than there were ends, rolled back and written again with the running
   * rows locked first. The ends must be of distinct attempts (a stale end is known by its attempt).
   */
  readonly jobFinishMany: (finishes: ReadonlyArray<Finish>) => Effect.Effect<StaleEnds, SqlError>
  /**
   * Of `finishes`, the ends their rows do not hold now (a row holds an end when it has what the end
   * wrote; a deleted row's end, when the row is gone): for ends whose write may have committed
   * unseen (a connection lost during the commit, then the end written again and found stale). A row
   * that has moved on since (a retry claimed again) reads as not holding it.
   */
  readonly jobEndsNotHeld: (finishes: ReadonlyArray<Finish>) => Effect.Effect<StaleEnds, SqlError>
  /**
   * `jobFinishMany` and `jobClaim` in one transaction and one commit (with the WAL flush the
   * ends need): the slots the ends free are filled by the claim in the same commit. PostgreSQL: one
   * statement, so the claim costs no round trip of its own; MySQL/MariaDB: the ends written with
   * the claim's locking reads, then its update and the commit (two round trips, one commit, where
   * the two apart take three and two; when an end was stale, the claim is dropped and the ends are
   * written as `jobFinishMany` writes them). Returns the jobs claimed and the ends that were stale.
   */
  readonly jobFinishManyAndClaim?: (
    finishes: ReadonlyArray<Finish>,
    groups: ReadonlyArray<Group>,
    limit: number,
    nowUs: number,
    workerId: string
  ) => Effect.Effect<{ readonly claimed: ReadonlyArray<ClaimedRow>; readonly stale: StaleEnds }, SqlError>
  readonly jobGet: (id: string) => Effect.Effect<JobRow | undefined, SqlError>
  /** Cancels a pending or running job; returns whether it was. */
  readonly jobCancel: (id: string, nowUs: number) => Effect.Effect<boolean, SqlError>
  /**
   * Puts a dead or cancelled job back to pending, due now; returns whether it was (false also when
   * another job now holds its unique key).
   */
  readonly jobRetry: (id: string, nowUs: number) => Effect.Effect<boolean, SqlError>
  /**
   * Of these attempts running here, those whose job no longer runs them: cancelled, retried after
   * a cancel (a later attempt, maybe running elsewhere), rescued, or deleted.
   */
  readonly jobStaleAttempts: (
    attempts: ReadonlyArray<{ readonly id: string; readonly attempt: number }>
  ) => Effect.Effect<ReadonlyArray<{ readonly id: string; readonly attempt: number }>, SqlError>
  /**
   * Running jobs of `names` whose worker is gone: its session lock is free, its heartbeat is older
   * than `leaseCutoffUs`, or it has no worker row.
   */
  readonly jobListOrphaned: (
    names: ReadonlyArray<string>,
    leaseCutoffUs: number,
    /** Also list running jobs of this worker id (the caller keeps those it is running). */
    selfId: string,
    /**
     * The most rows listed: 1,000 plus room for the caller's own running jobs (twice its concurrency,
     * for lost claims of its own too), so a worker's own jobs never crowd out the lost ones.
     */
    limit: number
  ) => Effect.Effect<
    ReadonlyArray<
      ClaimedRow & {
        readonly workerId: string | null
        readonly claimedAtUs: number
        /** Its worker has no row, or a heartbeat older than `leaseCutoffUs` (not just a free lock). */
        readonly expired: boolean
        /** Its worker's row says it is taking its lock again (see {@link Statements.workerRelocking}). */
        readonly relocking: boolean
        /** How many times its worker took its lock again (see {@link Statements.workerRelocked}). */
        readonly relocks: number
      }
    >,
    SqlError
  >
  /** Registers (or re-registers) a worker with the job names it has handlers for. */
  readonly workerRegister: (
    id: string,
    nowUs: number,
    host: string,
    pid: number,
    jobNames?: ReadonlyArray<string>
  ) => Effect.Effect<void, SqlError>
  /** The job names handled by the workers whose heartbeat is at or after `sinceUs`. */
  readonly workerJobNames: (sinceUs: number) => Effect.Effect<ReadonlySet<string>, SqlError>
  readonly workerHeartbeat: (id: string, nowUs: number) => Effect.Effect<void, SqlError>
  /** Marks a worker's row: it found its lock connection lost and is taking its lock again. */
  readonly workerRelocking: (id: string) => Effect.Effect<void, SqlError>
  /** Clears the mark of {@link workerRelocking} and counts the lock taken again (`relocks`). */
  readonly workerRelocked: (id: string) => Effect.Effect<void, SqlError>
  /**
   * The largest job id in the table (`null` when it is empty): usually one read of the primary key's
   * last entry (more while another transaction holds uncommitted inserts). The MySQL/MariaDB notifier
   * compares it between checks to learn of other processes' inserts.
   */
  readonly jobNewestId: () => Effect.Effect<string | null, SqlError>
  readonly workerRemove: (id: string) => Effect.Effect<void, SqlError>
  /** Deletes worker rows whose heartbeat is older than `cutoffUs` and that run no job. */
  readonly workerPrune: (cutoffUs: number) => Effect.Effect<void, SqlError>
  /** The latest tick (µs) enqueued for a periodic job, if any. */
  readonly scheduleGet: (name: string) => Effect.Effect<number | undefined, SqlError>
  /**
   * Runs `enqueue` for the tick `tickUs` (µs) of a periodic job and records the tick as the latest,
   * in one transaction, unless a tick at or after it is recorded already (then returns undefined and
   * enqueues nothing). The schedule's row is locked first: schedulers of one name take its ticks one
   * at a time, and a late one never enqueues a tick that another already passed — even after its job
   * row (and so its unique key) was pruned.
   */
  readonly scheduleFire: <A, E, R>(
    name: string,
    tickUs: number,
    nowUs: number,
    enqueue: Effect.Effect<A, E, R>
  ) => Effect.Effect<A | undefined, E | SqlError, R>
  /** The statement that takes a worker's session lock (on its dedicated connection), and its params. */
  readonly workerLockStatement: (id: string) => readonly [sql: string, params: ReadonlyArray<unknown>]
  /** The name of a worker's session lock (see {@link workerLockPrefix}). */
  readonly workerLockName: (id: string) => string
  /** The statement that reads the session's own connection id (`pg_backend_pid()`, `CONNECTION_ID()`). */
  readonly connectionIdStatement: string
  /** The connection id of the session holding a worker's lock, or null when it is free. */
  readonly workerLockHolder: (id: string) => Effect.Effect<number | null, SqlError>
  /** Ends a connection of this database user (`pg_terminate_backend`, `KILL CONNECTION`). */
  readonly endConnection: (connectionId: number) => Effect.Effect<void, SqlError>

  // --- Operations: CLI, pause/resume, retention, progress ----------------------------------
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
    limit: number,
    /** Only jobs finished at or before this time (those that failed again meanwhile stay). */
    finishedByUs: number
  ) => Effect.Effect<number, SqlError>
  /**
   * Ids above `afterId` of jobs of `name` in `state` that carry a unique key, finished at or before
   * `finishedByUs`, in id order (`retryAll` retries them one by one: another job may hold the key).
   */
  readonly jobKeyedIdsByName: (
    name: string,
    state: "dead" | "cancelled",
    afterId: string,
    finishedByUs: number,
    limit: number
  ) => Effect.Effect<ReadonlyArray<string>, SqlError>
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

/**
 * What every worker lock name of one queue starts with: `sqw<scope>:`, where `<scope>` is 5 base-36
 * characters of a hash (FNV-1a) of the database's name and the table prefix. A worker's session lock is
 * `<this><worker id>` (MySQL, `GET_LOCK`) or an advisory lock on that name's hash (PostgreSQL).
 *
 * The scope keeps queues apart: MySQL's `GET_LOCK` names are server-wide, and on both databases two
 * queues (two prefixes, or two databases of one server) may each have a worker of the same id. It
 * is 9 characters, as the `sqlane:w:` of earlier versions was, so ids of up to 55 characters still
 * fit MySQL's 64. On MySQL the name and prefix are lowercased first: with `lower_case_table_names`
 * set, `Test` and `test` are one database, and all processes of a queue must name its locks alike.
 * Workers of versions with the old lock names must not run beside these (they would see each other
 * as lost): stop them all before starting the new version.
 */
export const workerLockPrefix = (dialect: "pg" | "mysql", database: string, prefix: string): string => {
  const scope = `${database}/${prefix}`
  const text = dialect === "mysql" ? scope.toLowerCase() : scope
  let hash = 0x811c9dc5
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i)
    hash = Math.imul(hash, 0x01000193)
  }
  return `sqw${((hash >>> 0) % 36 ** 5).toString(36).padStart(5, "0")}:`
}
/** First key of sqlane's two-key advisory locks on PostgreSQL. */
const pgLockSpace = 0x5a1a7e

const num = (u: unknown): number => (typeof u === "number" ? u : Number(u))
const numOrNull = (u: unknown): number | null => (u === null || u === undefined ? null : num(u))

/**
 * The ends whose rows are deleted (completed, not `keep`, when completed rows are deleted at once)
 * and the rest, which are updated.
 */
const splitEnds = (finishes: ReadonlyArray<Finish>, deleteCompleted: boolean) => {
  if (!deleteCompleted) return { removed: [], rest: finishes }
  const removed: Array<Finish> = []
  const rest: Array<Finish> = []
  for (const f of finishes) (f.state === "completed" && f.keep !== true ? removed : rest).push(f)
  return { removed, rest }
}

/** The key of an attempt's end among the stale ends of a write (`StaleEnds`). */
export const endKey = (id: string, attempt: number): string => `${id}:${attempt}`

/** The union of the workers' `job_names` (JSON arrays; a row written before they were recorded has none). */
const jobNamesOf = (rows: ReadonlyArray<{ readonly job_names: string | null }>): ReadonlySet<string> => {
  const names = new Set<string>()
  for (const r of rows) {
    try {
      const parsed: unknown = r.job_names === null ? [] : JSON.parse(r.job_names)
      if (Array.isArray(parsed)) for (const n of parsed) if (typeof n === "string") names.add(n)
    } catch {
      // not JSON: a row edited by hand
    }
  }
  return names
}

const noStaleEnds: StaleEnds = new Set()

/**
 * The ends of `finishes` that changed nothing, from the ends written (`id:attempt,…`), or none
 * when `written` is null (every end was written).
 */
const staleEnds = (finishes: ReadonlyArray<Finish>, written: string | null): StaleEnds => {
  if (written === null) return noStaleEnds
  const applied = new Set(written === "" ? [] : written.split(","))
  const stale = new Set<string>()
  for (const f of finishes) {
    const key = endKey(f.id, f.attempt)
    if (!applied.has(key)) stale.add(key)
  }
  return stale
}

/**
 * Of `finishes`, the ends their rows (`rows`: id, attempts, state, free — worker_id IS NULL —,
 * run_at_us, finished_at_us) do not hold: a row holds an end when it has what the end wrote; a
 * deleted row's end (see `splitEnds`), when the row is gone.
 */
const notHeld = (finishes: ReadonlyArray<Finish>, rows: ReadonlyArray<any>, deleteCompleted: boolean): StaleEnds => {
  const now = new Map(rows.map((r) => [String(r.id), r]))
  const deleted = new Set(splitEnds(finishes, deleteCompleted).removed)
  const stale = new Set<string>()
  for (const f of finishes) {
    const r = now.get(f.id)
    const held = deleted.has(f)
      ? r === undefined
      : r !== undefined && (r.free === true || Number(r.free) === 1) && (f.state === "released"
        ? r.state === "pending" && num(r.attempts) === f.attempt - 1
        : r.state === f.state && num(r.attempts) === f.attempt &&
          (f.runAtUs === null || numOrNull(r.run_at_us) === f.runAtUs) &&
          numOrNull(r.finished_at_us) === f.finishedAtUs)
    if (!held) stale.add(endKey(f.id, f.attempt))
  }
  return stale
}

/** Of `attempts`, those whose row (id, attempts, state) is gone, not running, or at another attempt. */
const staleAttempts = (
  attempts: ReadonlyArray<{ readonly id: string; readonly attempt: number }>,
  rows: ReadonlyArray<any>
) => {
  const now = new Map(rows.map((r) => [String(r.id), r]))
  return attempts.filter((a) => {
    const r = now.get(a.id)
    return r === undefined || r.state !== "running" || num(r.attempts) !== a.attempt
  })
}

/** The rows changed by the statements of a multi-statement's results (MySQL/MariaDB). */
const affectedRowsOf = (results: ReadonlyArray<unknown>): number => {
  let n = 0
  for (const r of results) {
    const affected = Array.isArray(r) ? undefined : (r as { affectedRows?: unknown } | null)?.affectedRows
    if (typeof affected === "number") n += affected
  }
  return n
}

const toClaimed = (r: any): ClaimedRow => ({
  id: String(r.id),
  name: r.name,
  payload: r.payload,
  attempts: num(r.attempts),
  attemptBase: num(r.attempt_base ?? 0),
  priority: num(r.priority),
  runAtUs: num(r.run_at_us),
  createdAtUs: num(r.created_at_us),
  errors: r.errors ?? null,
  traceContext: r.trace_context ?? null,
  keepsKey: r.unique_states !== null && r.unique_states !== undefined && (num(r.unique_states) & 4) !== 0
})

const toJobRow = (r: any): JobRow => ({
  ...toClaimed(r),
  state: r.state,
  claimedAtUs: numOrNull(r.claimed_at_us),
  finishedAtUs: numOrNull(r.finished_at_us),
  lastError: r.last_error ?? null,
  result: r.result ?? null
})

/** A unique index refused a row: PostgreSQL 23505, MySQL/MariaDB 1062. */
export const isUniqueViolation = (error: SqlError): boolean => {
  const cause = error.cause as { code?: unknown; errno?: unknown } | undefined
  return cause?.code === "23505" || cause?.errno === 1062 || cause?.code === "ER_DUP_ENTRY"
}

/** Rows a keyed claim locks to find `limit` jobs: some jobs of the window may share a key. */
const keyedWindow = (limit: number) => String(Math.floor(limit) * 2 + 16)

/** Tries a keyed claim again when it lost a race for a key (a unique violation), up to 5 times. */
const retryKeyed = <A>(claim: Effect.Effect<ReadonlyArray<A>, SqlError>): Effect.Effect<ReadonlyArray<A>, SqlError> => {
  const go = (tries: number): Effect.Effect<ReadonlyArray<A>, SqlError> =>
    Effect.catchIf(claim, isUniqueViolation, () => (tries >= 5 ? Effect.succeed([]) : go(tries + 1)))
  return go(1)
}

const byClaimOrder = (a: ClaimedRow, b: ClaimedRow) =>
  a.priority - b.priority || a.runAtUs - b.runAtUs || (BigInt(a.id) < BigInt(b.id) ? -1 : 1)

/** PostgreSQL: one statement per operation. */
/** Options of the PostgreSQL statements. */
export interface PgOptions {
  /** Whether a claim waits for its WAL flush (`QueueOptions.durableClaims`; default false). */
  readonly durableClaims?: boolean | undefined
  /** Whether an attempt's end deletes a completed job's row (`retention.completed` of 0). */
  readonly deleteCompleted?: boolean | undefined
  /** Whether the hot statements may run directly on their connection (see `runner`). */
  readonly direct?: boolean | undefined
}

/** How a statement is run: as a query (rows), `raw` (the driver's result), or `unprepared`. */
type RunMode = "execute" | "raw" | "unprepared"

interface Run {
  <A extends object>(statement: Statement.Statement<A>, mode?: "execute" | "unprepared"): Effect.Effect<
    ReadonlyArray<A>,
    SqlError
  >
  (statement: Statement.Statement<any>, mode: "raw"): Effect.Effect<unknown, SqlError>
}

const viaStatement = (statement: Statement.Statement<any>, mode: RunMode): Effect.Effect<any, SqlError> =>
  mode === "raw" ? statement.raw : mode === "unprepared" ? statement.unprepared : statement

/**
 * Runs sqlane's hot statements (enqueue, probe, claim, completion, heartbeat).
 *
 * @effect/sql runs every statement inside a span (`sql.execute`) and a scope of its own: on
 * MySQL/MariaDB, callgrind counts about 420,000 instructions for those per statement, against
 * 540,000 for the driver's own work of a one-row INSERT (`mysql2` `execute`), so they are a third of an `enqueue`.
 * With `direct`, a statement runs on the connection @effect/sql would have used (the caller's
 * transaction's, or the pool's) without them — only when:
 * - the client is @effect/sql-pg's or @effect/sql-mysql2's, whose connection outside a transaction
 *   needs no scope (`direct`, decided by `QueueLive`);
 * - no tracer reads spans (Effect's built-in tracer, or tracing disabled): with any other tracer
 *   the `sql.execute` spans are made as usual;
 * - no statement transformer (`Statement.withTransformer`) is set.
 * Otherwise the statement runs as @effect/sql runs it (under a transformer, with its span skipped
 * while nobody reads it, as `withoutUnreadSpans` does).
 */
export const runner = (direct: boolean): Run => {
  if (!direct) return viaStatement as Run
  return ((statement: Statement.Statement<any>, mode: RunMode = "execute") =>
    Effect.withFiberRuntime<any, SqlError>((fiber) => {
      // The connection getter every statement of the client carries (not in @effect/sql's types).
      const acquirer = (statement as unknown as { readonly acquirer?: unknown }).acquirer
      const traced = fiber.currentTracer !== builtInTracer && fiber.getFiberRef(FiberRef.currentTracerEnabled)
      if (traced) return viaStatement(statement, mode)
      // The transformer (or an unexpected statement) needs @effect/sql's own path; its span is unread.
      if (Option.isSome(fiber.getFiberRef(Statement.currentTransformer)) || !Effect.isEffect(acquirer)) {
        return withoutUnreadSpans(viaStatement(statement, mode))
      }
      const [text, params] = statement.compile(mode === "raw")
      const transformRows = (statement as unknown as { readonly transformRows?: any }).transformRows
      // Typed with a Scope that these clients' connection getters never use (see above).
      return Effect.flatMap(
        acquirer as Effect.Effect<SqlConnection.Connection, SqlError>,
        (connection): Effect.Effect<any, SqlError> =>
          mode === "raw"
            ? connection.executeRaw(text, params)
            : mode === "unprepared"
            ? connection.executeUnprepared(text, params, transformRows)
            : connection.execute(text, params, transformRows)
      )
    })) as Run
}

/**
 * A PostgreSQL array literal of integers (ids as decimal strings) or plain words, built here: the
 * driver would escape every element of a JS array with regular expressions. Only for values that
 * need no quoting (digits, a minus sign, letters).
 */
const numbers = (values: ReadonlyArray<string | number | null>): string => {
  let out = "{"
  for (let i = 0; i < values.length; i++) {
    const v = values[i]
    if (i > 0) out += ","
    out += v === null ? "NULL" : typeof v === "number" ? String(Math.trunc(v)) : v
  }
  return out + "}"
}

/** Text values as an array parameter; when all are null (the common case), as a literal. */
const texts = (values: ReadonlyArray<string | null>): string | ReadonlyArray<string | null> =>
  values.every((v) => v === null) ? `{${values.map(() => "NULL").join(",")}}` : values

/**
 * PostgreSQL: a `timestamptz` column as integer microseconds since the epoch. `timestamptz` also holds
 * `infinity` and `-infinity` (a row edited by hand), which have no number: they read as the largest and
 * smallest times a job can have (years 9999 and 1000), so such a row is still claimed and read.
 */
const usText = (col: string) =>
  `(CASE WHEN ${col} = 'infinity' THEN 253402300799999999 WHEN ${col} = '-infinity' THEN -30610224000000000 ` +
  `ELSE (EXTRACT(EPOCH FROM ${col}) * 1000000)::bigint END)`

/** Joins payloads sent as one text (U+001E, record separator; never raw in JSON text). */
const payloadSeparator = "\u001e"

/** `database`: the database's name (`current_database()`), which scopes worker lock names. */
export const pg = (sql: SqlClient.SqlClient, prefix: string, database: string, options: PgOptions = {}): Statements => {
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
  // Every (name, priority) group with pending jobs, of any name: a loose index scan, one index
  // entry per group. The caller keeps its own names (a `name = ANY($1)` filter here costs more
  // than it saves: the array is sent and parsed on every probe).
  const probeAll = sql<{ name: string; priority: number; next_us: string }>`WITH RECURSIVE t AS (
        (SELECT name, priority, run_at FROM ${jobs} WHERE state = 'pending'
         ORDER BY name, priority, run_at LIMIT 1)
        UNION ALL
        SELECT n.name, n.priority, n.run_at FROM t CROSS JOIN LATERAL (
          SELECT j.name, j.priority, j.run_at FROM ${jobs} j
          WHERE j.state = 'pending' AND (j.name, j.priority) > (t.name, t.priority)
          ORDER BY j.name, j.priority, j.run_at LIMIT 1) n
      )
      SELECT name, priority, ${us("run_at")} AS next_us FROM t`
  // The groups of the worker's names: the same loose scan, started from each of those names, so its
  // cost follows the worker's names, not every name with pending jobs. The names come through an
  // InitPlan (`SELECT $1`), which hides the array's length from the planner: with it visible the
  // estimate grows with the names, and past a few hundred crosses `jit_above_cost` (JIT then adds
  // ~100 ms to each probe).
  const probeNames = (names: ReadonlyArray<string>) =>
    sql<{ name: string; priority: number; next_us: string }>`WITH RECURSIVE t AS (
        SELECT n.name, p.priority, p.run_at FROM unnest((SELECT ${names}::text[])) AS n(name) CROSS JOIN LATERAL (
          SELECT j.priority, j.run_at FROM ${jobs} j WHERE j.state = 'pending' AND j.name = n.name
          ORDER BY j.priority, j.run_at LIMIT 1) p
        UNION ALL
        SELECT t.name, q.priority, q.run_at FROM t CROSS JOIN LATERAL (
          SELECT j.priority, j.run_at FROM ${jobs} j
          WHERE j.state = 'pending' AND j.name = t.name AND j.priority > t.priority
          ORDER BY j.priority, j.run_at LIMIT 1) q
      )
      SELECT name, priority, ${us("run_at")} AS next_us FROM t`
  /**
   * Which form probes `names`. The per-name form costs about 2 µs per name plus 2 per group it
   * finds; the scan of every group about 6 µs per group with pending jobs, of any name (PostgreSQL
   * 15, 1,000 names; docs/performance.md, "Probe"). Up to `probeNamesMax` names the
   * per-name form always runs; above, the form with the lower cost by the last probe of the same
   * names: the groups of these names it found, and all groups as the last scan counted them (at
   * least the groups found since). A stale count only picks the slower form, never a wrong answer.
   */
  const probeNamesMax = 32
  const probeHistory = new Map<string, { readonly found: number; readonly all: number }>()
  const probeKey = (names: ReadonlyArray<string>) => `${names.length}\u0000${names[0]}\u0000${names[names.length - 1]}`
  const probePerName = (names: ReadonlyArray<string>) => {
    if (names.length <= probeNamesMax) return true
    const last = probeHistory.get(probeKey(names))
    return last !== undefined && 2 * names.length + 2 * last.found < 6 * last.all
  }
  /** `all`: the groups of every name the scan found, or undefined after a per-name probe. */
  const probeRemember = (names: ReadonlyArray<string>, found: number, all: number | undefined) => {
    if (names.length <= probeNamesMax) return
    const key = probeKey(names)
    const before = probeHistory.get(key)
    if (before === undefined && probeHistory.size >= 256) probeHistory.clear()
    probeHistory.set(key, { found, all: all ?? Math.max(found, before?.all ?? 0) })
  }
  /**
   * The paused check of a claim's arm: the group's name is not a row of `<prefix>paused` (one lookup
   * of its primary key, evaluated once per arm, before the arm reads any job: an InitPlan and a
   * one-time filter). The arm's jobs have `name = <the group's name>`, so this leaves out exactly the
   * jobs of a paused name, compared as the database compares text (what the primary key compares).
   *
   * Why this is a barrier: the whole claim (every arm of the UNION ALL, the keyed claim's CTE, the
   * claim inside `jobFinishManyAndClaim`) is one statement, and at READ COMMITTED one statement reads
   * one snapshot, the paused table included. A job enqueued after `pause` returned was inserted after
   * the pause committed, so any snapshot that shows the job also shows the pause row: no claim can
   * see such a job and miss the pause. `FOR UPDATE` re-reads a locked row's newest version only for
   * rows that were already pending in the snapshot (never a row inserted after it), and the one-time
   * filter is not evaluated again for it. So what a claim in flight when the pause commits (its
   * snapshot taken before the commit) may still take is a job that was pending before the pause
   * committed; every claim whose statement starts after the commit takes no job of that name.
   */
  const notPaused = (name: string) =>
    sql`NOT EXISTS (SELECT 1 FROM ${sql(`${prefix}paused`)} p WHERE p.name = ${name})`
  // One arm per group, with the group's name and priority as parameters (not an unnest): the
  // planner sees the values, estimates the group's size from its statistics and reads the index
  // range in order, stopping after `limit` rows, instead of fetching the whole group and sorting.
  const claimStatement = (
    groups: ReadonlyArray<Group>,
    limit: number,
    nowUs: number,
    workerId: string,
    commit: Statement.Fragment = asyncCommit
  ) => {
    const k = sql.literal(String(Math.floor(limit)))
    const arms = groups.map((g, i) =>
      sql`SELECT * FROM (
          SELECT j.id, j.priority, j.run_at FROM ${jobs} j
          WHERE j.state = 'pending' AND j.name = ${g.name} AND j.priority = ${g.priority} AND j.run_at <= ${ts(nowUs)}
            AND j.mutex_key IS NULL AND ${notPaused(g.name)}
          ORDER BY j.run_at, j.id LIMIT ${k}
          FOR UPDATE SKIP LOCKED) ${sql(`g${i}`)}`
    )
    // One group (the common case): its arm alone, already in claim order.
    const pick = arms.length === 1 ? arms[0] : sql`SELECT c.id FROM (${sql.join(" UNION ALL ", false)(arms)}) c
          ORDER BY c.priority, c.run_at, c.id LIMIT ${k}`
    return sql`UPDATE ${jobs} AS u SET state = 'running', attempts = LEAST(u.attempts, 2147483646) + 1, claimed_at = ${ts(nowUs)},
          worker_id = ${workerId}
        FROM (${pick}) AS pick
        WHERE u.id = pick.id${commit}
        RETURNING ${claimedColumnsU}`
  }
  // The keyed claim: per group (of a name not paused, see `notPaused`), a window of due jobs whose
  // key (if any) has no running job, read in order from the group's index range and locked; of the
  // merged windows, the jobs without a key and the first job of each key, in claim order; the
  // first `limit` of those.
  const claimKeyedStatement = (groups: ReadonlyArray<Group>, limit: number, nowUs: number, workerId: string) => {
    const w = sql.literal(keyedWindow(limit))
    const arms = groups.map((g, i) =>
      sql`SELECT * FROM (
          SELECT j.id, j.mutex_key, j.priority, j.run_at FROM ${jobs} j
          WHERE j.state = 'pending' AND j.name = ${g.name} AND j.priority = ${g.priority} AND j.run_at <= ${ts(nowUs)}
            AND (j.mutex_key IS NULL OR NOT EXISTS (
              -- "mutex_key IS NOT NULL" lets the planner read the running keys from the small
              -- partial index jobs_mutex instead of scanning the table.
              SELECT 1 FROM ${jobs} r
              WHERE r.state = 'running' AND r.mutex_key IS NOT NULL AND r.mutex_key = j.mutex_key))
            AND ${notPaused(g.name)}
          ORDER BY j.run_at, j.id LIMIT ${w}
          FOR UPDATE OF j SKIP LOCKED) ${sql(`g${i}`)}`
    )
    return sql`WITH cand AS (${sql.join(" UNION ALL ", false)(arms)}),
        pick AS (
          SELECT c.id FROM (
            SELECT id, mutex_key, priority, run_at,
              row_number() OVER (PARTITION BY mutex_key ORDER BY priority, run_at, id) AS rn
            FROM cand) c
          WHERE c.mutex_key IS NULL OR c.rn = 1
          ORDER BY c.priority, c.run_at, c.id
          LIMIT ${sql.literal(String(Math.floor(limit)))}
        )
        UPDATE ${jobs} AS j SET state = 'running', attempts = LEAST(j.attempts, 2147483646) + 1, claimed_at = ${ts(nowUs)},
          worker_id = ${workerId}
        FROM pick WHERE j.id = pick.id${asyncCommit}
        RETURNING ${claimedColumnsJ}`
  }
  // The ends of attempts, guarded by id, attempt and state: a stale attempt changes nothing.
  /**
   * The ends of attempts, as common table expressions for a `WITH` (data-modifying statements must
   * be at its top level): `ended`, an update; with `deleteCompleted`, `removed` deletes the rows of
   * completed jobs instead (those not `keep`, see `Finish`), and `ended` updates the others, if any.
   * Both return the (id, attempt) of the ends they wrote; `applied` is a one-row subquery over them:
   * its column `applied` is null when every end was written, else those ends as `id:attempt,…`
   * (read with `staleEnds`).
   */
  const finishCtes = (finishes: ReadonlyArray<Finish>) => {
    const { removed, rest } = splitEnds(finishes, options.deleteCompleted === true)
    const ended = () => sql`ended AS (${finishUpdate(rest)})`
    const remove = () => sql`removed AS (DELETE FROM ${jobs} AS j
        USING unnest(${numbers(removed.map((f) => f.id))}::bigint[], ${numbers(removed.map((f) => f.attempt))}::int[])
          AS v(id, attempt)
        WHERE j.id = v.id AND j.attempts = v.attempt AND j.state = 'running'
        RETURNING v.id, v.attempt)`
    const ctes = removed.length === 0 ? ended() : rest.length === 0 ? remove() : sql`${remove()}, ${ended()}`
    const written = removed.length === 0
      ? sql.literal("ended")
      : rest.length === 0
      ? sql.literal("removed")
      : sql.literal("(SELECT id, attempt FROM removed UNION ALL SELECT id, attempt FROM ended)")
    // One row: null when every end was written (the common case), else the ends written.
    const applied = sql`(SELECT CASE WHEN count(*) < ${sql.literal(String(finishes.length))}
        THEN (SELECT coalesce(string_agg(w.id::text || ':' || w.attempt::text, ','), '') FROM ${written} AS w) END
        AS applied FROM ${written} AS e)`
    return { ctes, applied }
  }
  const finishUpdate = (finishes: ReadonlyArray<Finish>) =>
    sql`UPDATE ${jobs} AS j SET
        state = CASE WHEN v.state = 'released' THEN 'pending' ELSE v.state END,
        attempts = CASE WHEN v.state = 'released' THEN j.attempts - 1 ELSE j.attempts END,
        run_at = COALESCE(TIMESTAMPTZ 'epoch' + v.run_at_us * INTERVAL '1 microsecond', j.run_at),
        finished_at = TIMESTAMPTZ 'epoch' + v.finished_at_us * INTERVAL '1 microsecond',
        last_error = COALESCE(v.last_error, j.last_error),
        errors = COALESCE(v.errors, j.errors),
        result = v.result,
        worker_id = NULL
      FROM unnest(${numbers(finishes.map((f) => f.id))}::bigint[], ${numbers(finishes.map((f) => f.attempt))}::int[],
                  ${numbers(finishes.map((f) => f.state))}::text[], ${numbers(finishes.map((f) => f.runAtUs))}::bigint[],
                  ${numbers(finishes.map((f) => f.finishedAtUs))}::bigint[], ${texts(finishes.map((f) => f.lastError))}::text[],
                  ${texts(finishes.map((f) => f.errors))}::text[], ${texts(finishes.map((f) => f.result))}::text[])
           AS v(id, attempt, state, run_at_us, finished_at_us, last_error, errors, result)
      WHERE j.id = v.id AND j.attempts = v.attempt AND j.state = 'running'
      RETURNING v.id, v.attempt`
  // The one-job insert, compiled once: its parameters are, in order, name, payload, priority,
  // run_at (µs), created_at (µs), mutex key, trace context (and the NOTIFY channel and payload).
  const insertOne = sql`INSERT INTO ${jobs} (name, payload, priority, run_at, created_at, mutex_key, trace_context)
          VALUES (${"name"}, ${"payload"}, ${0}, ${ts(0)}, ${ts(0)}, ${null}, ${null})
          RETURNING id`
  const [insertOneText] = insertOne.compile()
  const [insertOneNotifyText] = sql`WITH ins AS (${insertOne})
      SELECT ins.id FROM ins CROSS JOIN (SELECT pg_notify(${"channel"}, ${"payload"})) AS n`.compile()
  const explain = (statement: Statement.Statement<unknown>) => {
    const [text, params] = statement.compile()
    return Effect.map(
      sql.unsafe<{ "QUERY PLAN": string }>(`EXPLAIN ${text}`, params),
      (rows) => rows.map((r) => r["QUERY PLAN"])
    )
  }
  return {
    dialect: "pg",
    jobInsertMany: (rows, nowUs, notify) => {
      if (rows.length === 1) {
        // One job (the common `enqueue`): a plain VALUES insert, cheaper to plan than the unnest; its
        // text is compiled once (see `insertOneText`), only the values change.
        const r = rows[0]
        const params: Array<unknown> = [r.name, r.payload, r.priority, r.runAtUs, nowUs, r.mutexKey, r.traceContext]
        if (notify !== undefined) params.push(`${prefix}jobs`, notify)
        return Effect.map(
          run(sql.unsafe<{ id: string }>(notify === undefined ? insertOneText : insertOneNotifyText, params)),
          (rows) => [String(rows[0].id)]
        )
      }
      const first = rows[0]
      const uniform = rows.every((r) =>
        r.name === first.name && r.priority === first.priority && r.runAtUs === first.runAtUs &&
        r.traceContext === first.traceContext
      )
      // One job name, priority, run_at and trace (every `enqueueMany`): those as scalars, and only
      // the payloads and mutex keys as arrays.
      // The payloads travel as one text, joined by U+001E: JSON text never holds a raw control
      // character (JSON.stringify escapes them), and a text[] parameter costs an escaping pass over
      // every payload in the driver and a parse of the array literal in the server.
      const joinable = rows.every((r) => r.mutexKey === null && !r.payload.includes(payloadSeparator))
      const insert = uniform && joinable
        ? sql`INSERT INTO ${jobs} (name, payload, priority, run_at, created_at, trace_context)
          SELECT ${first.name}, v.payload, ${first.priority}, ${ts(first.runAtUs)}, ${ts(nowUs)}, ${first.traceContext}
          FROM unnest(string_to_array(${rows.map((r) => r.payload).join(payloadSeparator)}::text, chr(30)))
               WITH ORDINALITY AS v(payload, ord)
          ORDER BY v.ord
          RETURNING id`
        : uniform
        ? sql`INSERT INTO ${jobs} (name, payload, priority, run_at, created_at, mutex_key, trace_context)
          SELECT ${first.name}, v.payload, ${first.priority}, ${ts(first.runAtUs)}, ${ts(nowUs)}, v.mutex_key,
            ${first.traceContext}
          FROM unnest(${rows.map((r) => r.payload)}::text[], ${rows.map((r) => r.mutexKey)}::text[])
               WITH ORDINALITY AS v(payload, mutex_key, ord)
          ORDER BY v.ord
          RETURNING id`
        : sql`INSERT INTO ${jobs} (name, payload, priority, run_at, created_at, mutex_key, trace_context)
        SELECT v.name, v.payload, v.priority, TIMESTAMPTZ 'epoch' + v.run_at * INTERVAL '1 microsecond', ${ts(nowUs)},
          v.mutex_key, v.trace_context
        FROM unnest(${rows.map((r) => r.name)}::text[], ${rows.map((r) => r.payload)}::text[],
                    ${rows.map((r) => r.priority)}::int[], ${rows.map((r) => r.runAtUs)}::bigint[],
                    ${rows.map((r) => r.mutexKey)}::text[], ${rows.map((r) => r.traceContext)}::text[])
             WITH ORDINALITY AS v(name, payload, priority, run_at, mutex_key, trace_context, ord)
        ORDER BY v.ord
        RETURNING id`
      // The ids come back as one text, in ascending order: one row to parse instead of one per job.
      const statement = notify === undefined
        ? sql<{ ids: string }>`WITH ins AS (${insert}) SELECT string_agg(id::text, ',' ORDER BY id) AS ids FROM ins`
        : sql<{ ids: string }>`WITH ins AS (${insert})
            SELECT string_agg(ins.id::text, ',' ORDER BY ins.id) AS ids
            FROM ins CROSS JOIN (SELECT pg_notify(${`${prefix}jobs`}, ${notify})) AS n`
      return Effect.map(run(statement), (r) => (r[0]?.ids ?? "") === "" ? [] : r[0].ids.split(","))
    },
    jobInsertUnique: (row, nowUs, notify) => {
      // ON CONFLICT DO NOTHING, then read the holder in a new statement (a new snapshot at READ
      // COMMITTED: the holder may have committed while the insert waited for it). If the holder
      // left its guarded states in between, insert again.
      const insert = sql`INSERT INTO ${jobs}
          (name, payload, priority, run_at, created_at, mutex_key, trace_context, unique_key, unique_states)
        VALUES (${row.name}, ${row.payload}, ${row.priority}, ${ts(row.runAtUs)}, ${ts(nowUs)}, ${row.mutexKey},
          ${row.traceContext},
          ${row.uniqueKey}, ${row.uniqueStates})
        ON CONFLICT DO NOTHING
        RETURNING id`
      const statement = notify === undefined
        ? sql<{ id: string }>`WITH ins AS (${insert}) SELECT id FROM ins`
        : sql<{ id: string }>`WITH ins AS (${insert})
            SELECT ins.id FROM ins CROSS JOIN (SELECT pg_notify(${`${prefix}jobs`}, ${notify})) AS n`
      const holder = sql<{ id: string }>`SELECT id FROM ${jobs}
        WHERE unique_key = ${row.uniqueKey} AND ${sql.literal(uniqueGuard())}`
      const go = (tries: number): Effect.Effect<UniqueInsertResult, SqlError> =>
        Effect.flatMap(run(statement), (inserted) =>
          inserted.length > 0
            ? Effect.succeed({ id: String(inserted[0].id), inserted: true })
            : Effect.flatMap(run(holder), (held) =>
              held.length > 0
                ? Effect.succeed({ id: String(held[0].id), inserted: false })
                : tries >= 10
                ? Effect.fail(new SqlError({ message: `sqlane: unique key ${row.uniqueKey} kept changing hands` }))
                : go(tries + 1)))
      return go(1)
    },
    jobProbe: (names) => {
      const perName = probePerName(names)
      return Effect.map(
        run(perName ? probeNames(names) : probeAll),
        (rows) => {
          const wanted = perName ? undefined : new Set(names)
          const groups: Array<ProbeRow> = []
          for (const r of rows) {
            if (wanted === undefined || wanted.has(r.name)) {
              groups.push({ name: r.name, priority: num(r.priority), nextUs: num(r.next_us) })
            }
          }
          probeRemember(names, groups.length, perName ? undefined : rows.length)
          return groups
        }
      )
    },
    jobClaim: (groups, limit, nowUs, workerId) =>
      Effect.map(run(claimStatement(groups, limit, nowUs, workerId)), (rows) => rows.map(toClaimed).sort(byClaimOrder)),
    explainProbe: (names) =>
      // Both forms: the one that starts from the names and the scan of every group.
      Effect.zipWith(explain(probeNames(names)), explain(probeAll), (a, b) => [...a, ...b]),
    explainClaim: (groups, limit, nowUs) => explain(claimStatement(groups, limit, nowUs, "explain")),
    explainClaimKeyed: (groups, limit, nowUs) => explain(claimKeyedStatement(groups, limit, nowUs, "explain")),
    jobClaimKeyed: (groups, limit, nowUs, workerId) =>
      retryKeyed(Effect.map(run(claimKeyedStatement(groups, limit, nowUs, workerId)), (rows) => rows.map(toClaimed).sort(byClaimOrder))),
    jobCountDue: (names, nowUs, cap) =>
      Effect.map(
        sql<{ name: string; due: string }>`SELECT n.name, (SELECT count(*) FROM (
              SELECT 1 FROM ${jobs} j WHERE j.state = 'pending' AND j.name = n.name AND j.run_at <= ${ts(nowUs)}
              LIMIT ${sql.literal(String(Math.floor(cap)))}) x) AS due
            FROM unnest(${names}::text[]) AS n(name)`,
        (rows) => rows.map((r) => ({ name: r.name, due: num(r.due) }))
      ),
    jobFinishMany: (finishes) => {
      const { applied, ctes } = finishCtes(finishes)
      return Effect.map(
        run(sql<{ applied: string | null }>`WITH ${ctes} SELECT a.applied FROM ${applied} AS a`),
        (rows) => staleEnds(finishes, rows[0]?.applied ?? null)
      )
    },
    jobEndsNotHeld: (finishes) =>
      Effect.map(
        sql`SELECT id, attempts, state, worker_id IS NULL AS free, ${us("run_at")} AS run_at_us,
              ${us("finished_at")} AS finished_at_us
            FROM ${jobs} WHERE id = ANY(${numbers(finishes.map((f) => f.id))}::bigint[])`,
        (rows) => notHeld(finishes, rows, options.deleteCompleted === true)
      ),
    // The ends touch running rows and the claim pending ones: one snapshot, disjoint rows. The
    // claim's rows are locked while the ends are written, so a bulk update by hand can deadlock
    // with it; the transient retry runs it again. Its commit waits for the WAL flush, as the
    // ends' writes always do (no `synchronous_commit` off here).
    // The claim is a CTE too, so that the statement returns a row (the ends written) when it claims
    // nothing; it reads the paused names in the statement's one snapshot, as alone (`notPaused`).
    jobFinishManyAndClaim: (finishes, groups, limit, nowUs, workerId) => {
      const { applied, ctes } = finishCtes(finishes)
      return Effect.map(
        run(sql`WITH ${ctes}, claimed AS (${claimStatement(groups, limit, nowUs, workerId, sql.literal(""))})
          SELECT c.*, a.applied FROM ${applied} AS a LEFT JOIN claimed c ON true`),
        (rows) => ({
          claimed: rows.filter((r) => r.id !== null).map(toClaimed).sort(byClaimOrder),
          stale: staleEnds(finishes, (rows[0]?.applied ?? null) as string | null)
        })
      )
    },
    jobCancel: (id, nowUs) =>
      Effect.map(
        sql`UPDATE ${jobs} SET state = 'cancelled', finished_at = ${ts(nowUs)}, worker_id = NULL
            WHERE id = ${id}::bigint AND state IN ('pending', 'running') RETURNING id`,
        (rows) => rows.length > 0
      ),
    jobRetry: (id, nowUs) =>
      Effect.map(
        // Not while another job holds its unique key (the unique index would refuse the update).
        sql`UPDATE ${jobs} j SET state = 'pending', run_at = ${ts(nowUs)}, finished_at = NULL, attempt_base = attempts
            WHERE j.id = ${id}::bigint AND j.state IN ('dead', 'cancelled')
              AND (j.unique_key IS NULL OR NOT EXISTS (
                SELECT 1 FROM ${jobs} o WHERE o.unique_key = j.unique_key AND o.id <> j.id
                  AND ${sql.literal(uniqueGuard("o."))}))
            RETURNING j.id`,
        (rows) => rows.length > 0
      ).pipe(
        // The guard cannot see a key taken by an uncommitted transaction: the update then waits for
        // it and meets the index. Inside the caller's transaction that error would abort it, so the
        // update runs in a transaction of its own — a savepoint there — rolled back on the error.
        sql.withTransaction,
        Effect.catchIf(isUniqueViolation, () => Effect.succeed(false))
      ),
    jobStaleAttempts: (attempts) =>
      attempts.length === 0 ? Effect.succeed([]) : Effect.map(
        sql`SELECT id, attempts, state FROM ${jobs} WHERE id = ANY(${numbers(attempts.map((a) => a.id))}::bigint[])`,
        (rows) => staleAttempts(attempts, rows)
      ),
    jobListOrphaned: (names, leaseCutoffUs, selfId, limit) =>
      Effect.map(
        sql`SELECT ${claimedColumnsJ}, j.worker_id,
              ${sql.literal(usText("j.claimed_at"))} AS claimed_at_us,
              (w.id IS NULL OR w.heartbeat_at < ${ts(leaseCutoffUs)}) AS expired,
              COALESCE(w.relocking, false) AS relocking, COALESCE(w.relocks, 0) AS relocks
            FROM ${jobs} j
            LEFT JOIN ${workers} w ON w.id = j.worker_id
            WHERE j.state = 'running' AND j.name = ANY(${names}::text[])
              AND (w.id IS NULL OR j.worker_id = ${selfId} OR w.heartbeat_at < ${ts(leaseCutoffUs)} OR NOT EXISTS (
                SELECT 1 FROM pg_locks l
                WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
                  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
                  AND l.classid::bigint = ${pgLockSpace}
                  AND l.objid::bigint = (hashtext(${lockPrefix}::text || j.worker_id)::bigint & 4294967295)))
            LIMIT ${sql.literal(String(Math.min(Math.floor(limit), 2147483647)))}`,
        (rows) =>
          rows.map((r: any) => ({
            ...toClaimed(r),
            workerId: r.worker_id ?? null,
            claimedAtUs: num(r.claimed_at_us),
            expired: r.expired === true || Number(r.expired) === 1,
            relocking: r.relocking === true || Number(r.relocking) === 1,
            relocks: num(r.relocks)
          }))
      ),
    workerRegister: (id, nowUs, host, pid, jobNames = []) =>
      sql`INSERT INTO ${workers} (id, started_at, heartbeat_at, host, pid, job_names)
          VALUES (${id}, ${ts(nowUs)}, ${ts(nowUs)}, ${host}, ${pid}, ${JSON.stringify(jobNames)})
          ON CONFLICT (id) DO UPDATE SET heartbeat_at = EXCLUDED.heartbeat_at, relocking = false,
            job_names = EXCLUDED.job_names`.pipe(Effect.asVoid),
    workerJobNames: (sinceUs) =>
      Effect.map(
        sql<{ job_names: string | null }>`SELECT job_names FROM ${workers} WHERE heartbeat_at >= ${ts(sinceUs)}`,
        jobNamesOf
      ),
    workerHeartbeat: (id, nowUs) =>
      run(sql`UPDATE ${workers} SET heartbeat_at = ${ts(nowUs)} WHERE id = ${id}`).pipe(Effect.asVoid),
    workerRelocking: (id) => sql`UPDATE ${workers} SET relocking = true WHERE id = ${id}`.pipe(Effect.asVoid),
    workerRelocked: (id) =>
      sql`UPDATE ${workers} SET relocking = false, relocks = relocks + 1 WHERE id = ${id}`.pipe(Effect.asVoid),
    jobNewestId: () => newestId(run, sql, jobs),
    workerRemove: (id) => sql`DELETE FROM ${workers} WHERE id = ${id}`.pipe(Effect.asVoid),
    workerPrune: (cutoffUs) =>
      sql`DELETE FROM ${workers} w WHERE w.heartbeat_at < ${ts(cutoffUs)}
          AND NOT EXISTS (SELECT 1 FROM ${jobs} j WHERE j.state = 'running' AND j.worker_id = w.id)`.pipe(Effect.asVoid),
    workerLockStatement: (id) => ["SELECT pg_try_advisory_lock($1, hashtext($2))", [pgLockSpace, lockPrefix + id]],
    workerLockName: (id) => lockPrefix + id,
    connectionIdStatement: "SELECT pg_backend_pid()",
    workerLockHolder: (id) =>
      Effect.map(
        sql<{ pid: number }>`SELECT pid FROM pg_locks
          WHERE locktype = 'advisory' AND granted AND objsubid = 2 AND classid::bigint = ${pgLockSpace}
            AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
            AND objid::bigint = (hashtext(${lockPrefix + id})::bigint & 4294967295)`,
        (rows) => (rows.length === 0 ? null : num(rows[0].pid))
      ),
    endConnection: (connectionId) => Effect.asVoid(sql`SELECT pg_terminate_backend(${connectionId})`),
    scheduleGet: (name) =>
      Effect.map(
        sql<{ us: string }>`SELECT ${us("last_tick_at")} AS us FROM ${sql(`${prefix}schedules`)} WHERE name = ${name}`,
        (rows) => (rows.length === 0 ? undefined : num(rows[0].us))
      ),
    scheduleFire: (name, tickUs, nowUs, enqueue) => {
      const schedules = sql(`${prefix}schedules`)
      return sql.withTransaction(Effect.gen(function*() {
        // A first tick's row is written here and locked; a row that exists is locked as it is.
        yield* sql`INSERT INTO ${schedules} (name, last_tick_at, updated_at)
            VALUES (${name}, TIMESTAMPTZ '-infinity', ${ts(nowUs)}) ON CONFLICT (name) DO NOTHING`
        const rows = yield* sql<{ us: string }>`SELECT ${us("last_tick_at")} AS us FROM ${schedules}
            WHERE name = ${name} FOR UPDATE`
        if (rows.length > 0 && num(rows[0].us) >= tickUs) return undefined
        const enqueued = yield* enqueue
        yield* sql`UPDATE ${schedules} SET last_tick_at = ${ts(tickUs)}, updated_at = ${ts(nowUs)} WHERE name = ${name}`
        return enqueued
      }))
    },
    jobGet: (id) =>
      Effect.map(
        sql`SELECT ${claimedColumns}, state, ${us("claimed_at")} AS claimed_at_us,
              ${us("finished_at")} AS finished_at_us, last_error, result
            FROM ${jobs} WHERE id = ${id}::bigint`,
        (rows) => (rows.length === 0 ? undefined : toJobRow(rows[0]))
      ),

    // --- Operations -------------------------------------------------------------------------
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
    // A run_at of -infinity (a row edited by hand) reads as the year 1000, as in usText.
    jobStats: (nowUs, sinceUs) =>
      Effect.map(
        sql`SELECT name, state, COUNT(*) AS n,
              COUNT(*) FILTER (WHERE state = 'pending' AND run_at <= ${ts(nowUs)}) AS due,
              (EXTRACT(EPOCH FROM MIN(GREATEST(run_at, '1000-01-01Z')) FILTER (WHERE state = 'pending' AND run_at <= ${ts(nowUs)})) * 1000000)::bigint
                AS oldest_due_us,
              COUNT(*) FILTER (WHERE finished_at >= ${ts(sinceUs)}) AS recent
            FROM ${jobs} GROUP BY name, state ORDER BY name, state`,
        (rows) => rows.map(toStats)
      ),
    jobRetryByName: (name, state, nowUs, limit, finishedByUs) =>
      Effect.map(
        // Jobs with a unique key are left to `jobRetry`, one by one (another job may hold the key).
        sql`UPDATE ${jobs} SET state = 'pending', run_at = ${ts(nowUs)}, finished_at = NULL, attempt_base = attempts
            WHERE id IN (
              SELECT id FROM ${jobs} WHERE state = ${state} AND name = ${name} AND unique_key IS NULL
                AND finished_at <= ${ts(finishedByUs)}
              ORDER BY id LIMIT ${sql.literal(String(Math.floor(limit)))} FOR UPDATE SKIP LOCKED)
              AND state = ${state} AND unique_key IS NULL AND finished_at <= ${ts(finishedByUs)}
            RETURNING id`,
        (rows) => rows.length
      ),
    jobKeyedIdsByName: (name, state, afterId, finishedByUs, limit) =>
      Effect.map(
        sql<{ id: string }>`SELECT id FROM ${jobs}
            WHERE state = ${state} AND name = ${name} AND unique_key IS NOT NULL
              AND finished_at <= ${ts(finishedByUs)} AND id > ${afterId}::bigint
            ORDER BY id LIMIT ${sql.literal(String(Math.floor(limit)))}`,
        (rows) => rows.map((r) => String(r.id))
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
/** `database`: the database's name (`DATABASE()`), which scopes worker lock names. */
export const mysql = (
  sql: SqlClient.SqlClient,
  prefix: string,
  database: string,
  autoIncrement: number,
  /** Whether the hot statements may run directly on their connection (see `runner`). */
  direct = false,
  /** The server's `max_allowed_packet` (bytes), when known. */
  maxStatementBytes?: number,
  /** Whether an attempt's end deletes a completed job's row (`retention.completed` of 0). */
  deleteCompleted = false
): Statements => {
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
  // One job: a prepared insert (`.raw` gives the insert id), compiled once (as on PostgreSQL): only
  // its values change.
  const [insertOneText] = sql`INSERT INTO ${jobs} (name, payload, priority, run_at, created_at, mutex_key, trace_context)
      VALUES (${"name"}, ${"payload"}, ${0}, ${ts(0)}, ${ts(0)}, ${null}, ${null})`.compile()
  const insertOne = (r: InsertRow, nowUs: number) =>
    Effect.map(
      run(sql.unsafe(insertOneText, [r.name, r.payload, r.priority, r.runAtUs, nowUs, r.mutexKey, r.traceContext]), "raw"),
      (result: any) => [String(result.insertId)]
    )
  // Several jobs: one unprepared multi-row INSERT and `LAST_INSERT_ID()`, in one round trip, whatever
  // the count (a prepared text per count would fill the server's statement cache). The text is
  // written here, its strings as mysqlText literals.
  const [jobsText] = sql`${jobs}`.compile()
  const epochUs = (us: number) => `TIMESTAMPADD(MICROSECOND, ${us}, '1970-01-01 00:00:00')`
  const insertHead = `INSERT INTO ${jobsText} (name, payload, priority, run_at, created_at, mutex_key, trace_context) VALUES `
  const orNull = (s: string | null) => (s === null ? "NULL" : MysqlText.literal(s))
  const insertMany = (rows: ReadonlyArray<InsertRow>, nowUs: number) => {
    const created = epochUs(nowUs)
    let text = insertHead
    for (let i = 0; i < rows.length; i++) {
      const r = rows[i]
      text += `${i === 0 ? "" : ", "}(${MysqlText.literal(r.name)}, ${MysqlText.literal(r.payload)}, ${Number(r.priority)}, ${
        epochUs(Number(r.runAtUs))
      }, ${created}, ${orNull(r.mutexKey)}, ${orNull(r.traceContext)})`
    }
    return Effect.map(
      run(sql.unsafe<any>(`${text}; SELECT LAST_INSERT_ID() AS id`), "unprepared"),
      (results: ReadonlyArray<any>) => {
        // A multi-row INSERT ... VALUES is a "simple insert": InnoDB gives its rows consecutive
        // ids (in steps of auto_increment_increment) in every autoinc lock mode; LAST_INSERT_ID()
        // is the first.
        const first = BigInt(results[1][0].id)
        return rows.map((_, i) => String(first + BigInt(i * autoIncrement)))
      }
    )
  }
  /** The most bytes of row values in one multi-row INSERT: well inside `max_allowed_packet`. */
  const insertBytes = Math.max(32_768, Math.min(maxStatementBytes ?? 16_777_216, 16_777_216) / 2)
  /** A row's bytes in the INSERT's text (its strings as literals, the rest at most 200 bytes). */
  const rowBytes = (r: InsertRow) =>
    MysqlText.literalBytes(r.payload) + MysqlText.literalBytes(r.name) +
    (r.mutexKey === null ? 0 : MysqlText.literalBytes(r.mutexKey)) +
    (r.traceContext === null ? 0 : MysqlText.literalBytes(r.traceContext)) + 200
  const insertChunk = (rows: ReadonlyArray<InsertRow>, nowUs: number) =>
    rows.length === 1 ? insertOne(rows[0], nowUs) : insertMany(rows, nowUs)
  const pendingIndex = sql(`${prefix}jobs_pending`)
  // With the index (state, name, priority, run_at, id) the probe is a loose index scan ("Using
  // index for group-by"): one index dive per (name, priority) with pending jobs, of any name; the
  // caller keeps its own names. A filter on the names in the statement (in WHERE, or in HAVING,
  // which MariaDB pushes into WHERE) makes MariaDB read every pending job of those names instead.
  // The index is forced: on fresh statistics MariaDB has been seen to pick another and sort.
  const probeStatement = () =>
    sql<{ name: string; priority: number; next_us: number }>`SELECT name, priority, ${
      sql.literal(usOf("MIN(run_at)"))
    } AS next_us FROM ${jobs} FORCE INDEX (${pendingIndex})
      WHERE state = 'pending' GROUP BY state, name, priority ORDER BY NULL`
  // One range of that index per group, read in claim order: no filesort, and only the rows
  // returned are locked.
  const claimSelect = (g: Group, limit: number, nowUs: number) =>
    sql`SELECT ${claimedColumns} FROM ${jobs} FORCE INDEX (${pendingIndex})
      WHERE state = 'pending' AND name = ${g.name} AND priority = ${g.priority} AND run_at <= ${ts(nowUs)}
        AND mutex_key IS NULL
      ORDER BY run_at, id LIMIT ${sql.literal(String(Math.floor(limit)))}
      FOR UPDATE SKIP LOCKED`
  const claimKeyedSelect = (g: Group, limit: number, nowUs: number) =>
    sql`SELECT ${claimedColumns}, mutex_key FROM ${jobs} j FORCE INDEX (${pendingIndex})
      WHERE state = 'pending' AND name = ${g.name} AND priority = ${g.priority} AND run_at <= ${ts(nowUs)}
        AND (mutex_key IS NULL OR NOT EXISTS (SELECT 1 FROM ${jobs} r WHERE r.mutex_running = j.mutex_key))
      ORDER BY run_at, id LIMIT ${sql.literal(keyedWindow(limit))}
      FOR UPDATE SKIP LOCKED`
  /**
   * The paused check of a claim: which of `names` (the claim's job names, `p0`, `p1`, … in their
   * order) are paused, as one read of the paused table's primary key (the table holds a row per
   * paused name: a few rows). Each row read says which names it equals, compared by SQL, so by the
   * table's collation (utf8mb4_bin, PAD SPACE: a pause of "name " holds "name" too).
   *
   * Why it runs as it does (InnoDB): a claim's locking reads (`FOR UPDATE SKIP LOCKED`) see the
   * newest committed jobs, while a plain read in the same statement reads a snapshot (its read
   * view) that may predate the pause — so a paused check inside the locking read could see a job
   * enqueued after the pause and miss the pause. This check is a statement of its own, run after
   * the locking reads in the same transaction (`claimInTransaction`), and a locking read itself
   * (`LOCK IN SHARE MODE`, which MySQL 8.0 and MariaDB both accept): it reads the newest committed
   * paused rows, whatever the isolation level. A job it locked and the claim takes was committed
   * before the locking read, so a pause that committed before that job's enqueue began is seen
   * here and the job is left out (its row lock is released at COMMIT). What a claim in flight when
   * the pause commits may still take is a job already locked before the commit: one enqueued before
   * the pause committed.
   *
   * Its cost and its locks: the claim runs at READ COMMITTED, where a locking read of a key that is
   * not there locks nothing (no gap locks), so when no name is paused it takes no lock; a paused
   * name's row gets a shared lock until the claim's COMMIT. `pausedInsert` (`INSERT IGNORE`: a new
   * row, or a shared lock on the existing one) and `pausedDelete` (one row) are one statement each
   * and lock no jobs, so they and a claim never wait for each other in a cycle: at worst one waits
   * for the other's short transaction. (A pause inside an app's longer transaction holds its row
   * until that commits: claims of that name wait for it.) No LIMIT in the read: MariaDB refuses one
   * inside `IN (subquery)`, and none is needed.
   */
  const pausedStatement = (names: ReadonlyArray<string>) =>
    sql`SELECT ${sql.join(", ", false)(names.map((n, i) => sql`name = ${n} AS ${sql(`p${i}`)}`))}
      FROM ${sql(`${prefix}paused`)} WHERE name IN ${sql.in(names)} LOCK IN SHARE MODE`
  /** The distinct job names of `groups`, in order. */
  const namesOf = (groups: ReadonlyArray<Group>) => Array.from(new Set(groups.map((g) => g.name)))
  const explain = (statement: Statement.Statement<unknown>) => {
    const [text, params] = statement.compile(true)
    return Effect.map(
      run(sql.unsafe<Record<string, unknown>>(`EXPLAIN ${text}`, params), "unprepared"),
      (rows) => rows.map((r) => JSON.stringify(r))
    )
  }
  /** Rows cut into runs that each fit one INSERT ({@link insertBytes}), in order. */
  const chunksOf = (rows: ReadonlyArray<InsertRow>): Array<ReadonlyArray<InsertRow>> => {
    const chunks: Array<Array<InsertRow>> = [[]]
    let bytes = 0
    for (const r of rows) {
      const size = rowBytes(r)
      if (bytes + size > insertBytes && chunks[chunks.length - 1].length > 0) {
        chunks.push([])
        bytes = 0
      }
      chunks[chunks.length - 1].push(r)
      bytes += size
    }
    return chunks
  }
  // The ends of attempts, guarded by id, attempt and state: a stale attempt changes nothing.
  /**
   * The ends of attempts: one update; with `deleteCompleted`, a delete of the rows of completed jobs
   * (those not `keep`, see `Finish`) and an update of the others, if any, in one text.
   */
  const finishStatements = (finishes: ReadonlyArray<Finish>): readonly [string, ReadonlyArray<unknown>] => {
    const { removed, rest } = splitEnds(finishes, deleteCompleted)
    if (removed.length === 0) return finishStatement(finishes).compile(true)
    // Through the primary key, named: MariaDB reads a lone row equality `(id, attempts) IN ((?, ?))`
    // through no key, and with few running rows prefers the `(state, finished_at)` index for
    // `state = 'running'` even beside `id IN` — and at REPEATABLE READ locks that range and the gap
    // after it, where every new pending job's entry goes. (Index hints need the multi-table form.)
    const [remove, removeParams] = sql`DELETE j FROM ${jobs} j FORCE INDEX (PRIMARY)
        WHERE j.id IN ${sql.in(removed.map((f) => f.id))}
          AND (j.id, j.attempts) IN (${sql.join(", ", false)(removed.map((f) => sql`(${f.id}, ${f.attempt})`))})
          AND j.state = 'running'`.compile(true)
    if (rest.length === 0) return [remove, removeParams]
    const [update, updateParams] = finishStatement(rest).compile(true)
    return [`${remove}; ${update}`, [...removeParams, ...updateParams]]
  }
  const finishStatement = (finishes: ReadonlyArray<Finish>) => {
    const rows = finishes.map((f, i) =>
      i === 0
        ? sql`SELECT CAST(${f.id} AS SIGNED) AS id, CAST(${f.attempt} AS SIGNED) AS attempt, ${f.state} AS state,
              CAST(${f.runAtUs} AS SIGNED) AS run_at_us, CAST(${f.finishedAtUs} AS SIGNED) AS finished_at_us,
              ${f.lastError} AS last_error, ${f.errors} AS errors, ${f.result} AS result`
        : sql`SELECT ${f.id}, ${f.attempt}, ${f.state}, ${f.runAtUs}, ${f.finishedAtUs}, ${f.lastError}, ${f.errors}, ${f.result}`
    )
    // Only the ends' rows, through the primary key (`j.id IN`, as the delete above): with a batch that
    // is a large share of the running rows, MariaDB read the jobs first, every running row, and
    // locked each, so an end waited for (or deadlocked with) a transaction holding an unrelated
    // running job (an app's cancel, a handler's own update).
    return sql`UPDATE ${jobs} j FORCE INDEX (PRIMARY) JOIN (${sql.join(" UNION ALL ", false)(rows)}) v
          ON j.id = v.id AND j.attempts = v.attempt
        SET j.attempts = CASE WHEN v.state = 'released' THEN j.attempts - 1 ELSE j.attempts END,
          j.state = CASE WHEN v.state = 'released' THEN 'pending' ELSE v.state END,
          j.run_at = COALESCE(TIMESTAMPADD(MICROSECOND, v.run_at_us, '1970-01-01 00:00:00'), j.run_at),
          j.finished_at = TIMESTAMPADD(MICROSECOND, v.finished_at_us, '1970-01-01 00:00:00'),
          j.last_error = COALESCE(v.last_error, j.last_error),
          j.errors = COALESCE(v.errors, j.errors),
          j.result = v.result,
          j.worker_id = NULL
        WHERE j.id IN ${sql.in(finishes.map((f) => f.id))} AND j.state = 'running'`
  }
  /**
   * A claim: at READ COMMITTED, so the locking reads take no gap locks that would block (or
   * deadlock with) the app's transactions enqueueing jobs; in two round trips on one connection
   * (multi-statement): the locking reads (`select`, one per group) and the paused check
   * (`pausedStatement`, after them), then one update of the rows `pick` keeps from the result sets
   * of the groups whose name is not paused (a paused name's set is passed empty). Rows read but not
   * kept are unlocked at COMMIT. With `before` (a ride), the ends are written first; when fewer rows
   * changed than there were ends, the transaction is rolled back and the ends are written alone,
   * exactly (`finishExactly`), with nothing claimed.
   */
  const claimInTransaction = (
    groups: ReadonlyArray<Group>,
    select: (group: Group) => readonly [string, ReadonlyArray<unknown>],
    pick: (sets: ReadonlyArray<ReadonlyArray<any>>) => ReadonlyArray<ClaimedRow>,
    nowUs: number,
    workerId: string,
    /** The ends a claim rides on, written first in the same transaction. */
    before?: ReadonlyArray<Finish>
  ) =>
    Effect.gen(function*() {
      const names = namesOf(groups)
      const selects = groups.length === 0 ? [] : [...groups.map(select), pausedStatement(names).compile(true)]
      const conn = yield* sql.reserve
      const statements = before === undefined ? selects : [finishStatements(before), ...selects]
      return yield* Effect.gen(function*() {
        const results = yield* conn.executeUnprepared(
          `SET TRANSACTION ISOLATION LEVEL READ COMMITTED; START TRANSACTION; ${statements.map(([q]) => q).join("; ")}`,
          MysqlText.values(statements.flatMap(([, params]) => params)),
          undefined
        )
        if (before !== undefined && affectedRowsOf(results.slice(0, results.length - selects.length)) < before.length) {
          yield* conn.executeUnprepared("ROLLBACK", [], undefined)
          return { claimed: [] as Array<ClaimedRow>, stale: yield* finishExactly(before, conn) }
        }
        const stale = noStaleEnds
        const read = results.slice(results.length - selects.length) as ReadonlyArray<ReadonlyArray<any>>
        const pausedRows = read.length === 0 ? [] : read[read.length - 1]
        const paused = new Set(names.filter((_, i) => pausedRows.some((r) => Number(r[`p${i}`]) === 1)))
        const picked = pick(read.slice(0, groups.length).map((set, i) => (paused.has(groups[i].name) ? [] : set)))
        if (picked.length === 0) {
          yield* conn.executeUnprepared("COMMIT", [], undefined)
          return { claimed: [] as Array<ClaimedRow>, stale }
        }
        const [update, updateParams] = sql`UPDATE ${jobs} SET state = 'running', attempts = LEAST(attempts, 2147483646) + 1,
              claimed_at = ${ts(nowUs)}, worker_id = ${workerId}
            WHERE id IN ${sql.in(picked.map((r) => r.id))}`.compile(true)
        yield* conn.executeUnprepared(`${update}; COMMIT`, MysqlText.values(updateParams), undefined)
        return { claimed: picked.map((r) => ({ ...r, attempts: Math.min(r.attempts, 2147483646) + 1 })), stale }
      }).pipe(Effect.onError(() => Effect.ignore(conn.executeUnprepared("ROLLBACK", [], undefined))))
    }).pipe(Effect.scoped)
  /** What `notHeld` reads of the rows of `finishes`. */
  const endsRead = (finishes: ReadonlyArray<Finish>) =>
    sql`SELECT id, attempts, state, worker_id IS NULL AS free, ${sql.literal(usOf("run_at"))} AS run_at_us,
        ${sql.literal(usOf("finished_at"))} AS finished_at_us
      FROM ${jobs} FORCE INDEX (PRIMARY) WHERE id IN ${sql.in(finishes.map((f) => f.id))}`.compile(true)
  /**
   * The ends written exactly, in a transaction of their own on `conn` (no transaction open): the
   * rows of the attempts still running are locked first (`FOR UPDATE`), then only those ends are
   * written; the others are the stale ends. For a write that changed fewer rows than it had ends
   * (rows changed count only, not which; a row another attempt deleted is gone either way).
   */
  const finishExactly = (finishes: ReadonlyArray<Finish>, conn: SqlConnection.Connection): Effect.Effect<StaleEnds, SqlError> =>
    Effect.gen(function*() {
      const [lock, lockParams] = sql`SELECT id, attempts FROM ${jobs} FORCE INDEX (PRIMARY)
          WHERE id IN ${sql.in(finishes.map((f) => f.id))} AND state = 'running' FOR UPDATE`.compile(true)
      const results = yield* conn.executeUnprepared(`START TRANSACTION; ${lock}`, MysqlText.values(lockParams), undefined)
      const rows = (results[results.length - 1] ?? []) as ReadonlyArray<any>
      const running = new Set(rows.map((r) => endKey(String(r.id), num(r.attempts))))
      const live = finishes.filter((f) => running.has(endKey(f.id, f.attempt)))
      if (live.length > 0) {
        const [text, params] = finishStatements(live)
        yield* conn.executeUnprepared(`${text}; COMMIT`, MysqlText.values(params), undefined)
      } else {
        yield* conn.executeUnprepared("COMMIT", [], undefined)
      }
      const stale = new Set<string>()
      for (const f of finishes) if (!running.has(endKey(f.id, f.attempt))) stale.add(endKey(f.id, f.attempt))
      return stale
    })
  return {
    dialect: "mysql",
    jobInsertMany: (rows, nowUs) => {
      if (rows.length === 0) return Effect.succeed([])
      const chunks = chunksOf(rows)
      if (chunks.length === 1) return insertChunk(chunks[0], nowUs)
      return Effect.forEach(chunks, (c) => insertChunk(c, nowUs)).pipe(
        Effect.map((ids) => ids.flat()),
        sql.withTransaction,
        // Its `sql.transaction` span is unread with the built-in tracer.
        withoutUnreadSpans
      )
    },
    jobInsertUnique: (row, nowUs) => {
      // A plain INSERT: a duplicate key fails only this statement (InnoDB keeps the caller's
      // transaction), and then the holder is read with a locking read, which sees the latest
      // committed row whatever the isolation level. An uncommitted insert of the key makes the
      // INSERT wait for its transaction: if that rolls back, this insert goes through.
      const insert = sql`INSERT INTO ${jobs}
          (name, payload, priority, run_at, created_at, mutex_key, trace_context, unique_key, unique_states)
        VALUES (${row.name}, ${row.payload}, ${row.priority}, ${ts(row.runAtUs)}, ${ts(nowUs)}, ${row.mutexKey},
          ${row.traceContext},
          ${row.uniqueKey}, ${row.uniqueStates})`
      const holder = run(sql<{ id: string }>`SELECT id FROM ${jobs} WHERE unique_active = ${row.uniqueKey}
        LOCK IN SHARE MODE`)
      const go = (tries: number): Effect.Effect<UniqueInsertResult, SqlError> =>
        run(insert, "raw").pipe(
          Effect.map((result: any): UniqueInsertResult => ({ id: String(result.insertId), inserted: true })),
          Effect.catchIf(isUniqueViolation, () =>
            Effect.flatMap(holder, (held) =>
              held.length > 0
                ? Effect.succeed({ id: String(held[0].id), inserted: false })
                : tries >= 10
                ? Effect.fail(new SqlError({ message: `sqlane: unique key ${row.uniqueKey} kept changing hands` }))
                : go(tries + 1)))
        )
      return go(1)
    },
    jobProbe: (names) =>
      Effect.map(
        run(probeStatement(), "unprepared"),
        (rows) => {
          const wanted = new Set(names)
          return rows.filter((r) => wanted.has(r.name)).map((r) => ({
            name: r.name,
            priority: num(r.priority),
            nextUs: num(r.next_us)
          }))
        }
      ),
    explainProbe: () => explain(probeStatement()),
    explainClaim: (groups, limit, nowUs) =>
      Effect.map(
        Effect.forEach([...groups.map((g) => claimSelect(g, limit, nowUs)), pausedStatement(namesOf(groups))], explain),
        (plans) => plans.flat()
      ),
    jobClaim: (groups, limit, nowUs, workerId) =>
      // One locking read per group (an index range in claim order, no filesort), then the first
      // `limit` rows in claim order.
      Effect.map(
        claimInTransaction(
          groups,
          (g) => claimSelect(g, limit, nowUs).compile(true),
          (sets) => sets.flat().map(toClaimed).sort(byClaimOrder).slice(0, Math.floor(limit)),
          nowUs,
          workerId
        ),
        (r) => r.claimed
      ),
    explainClaimKeyed: (groups, limit, nowUs) =>
      Effect.map(
        Effect.forEach(
          [...groups.map((g) => claimKeyedSelect(g, limit, nowUs)), pausedStatement(namesOf(groups))],
          explain
        ),
        (plans) => plans.flat()
      ),
    jobClaimKeyed: (groups, limit, nowUs, workerId) =>
      // As `jobClaim`; each group's locking read skips jobs whose key has a running job (the unique
      // index on `mutex_running` answers that); of the merged windows one job per key is kept.
      retryKeyed(Effect.map(claimInTransaction(
        groups,
        (g) => claimKeyedSelect(g, limit, nowUs).compile(true),
        (sets) => {
          const rows = sets.flat().map((row) => ({ row, claimed: toClaimed(row) }))
          rows.sort((a, b) => byClaimOrder(a.claimed, b.claimed))
          const keys = new Set<string>()
          const picked: Array<ClaimedRow> = []
          for (const { claimed, row } of rows) {
            if (picked.length >= limit) break
            if (row.mutex_key !== null && row.mutex_key !== undefined) {
              // Compared as the unique index compares them: utf8mb4_bin pads with spaces, so keys
              // that differ only by trailing spaces are one key there (picking both would make the
              // update fail every time, and the claim would never succeed).
              const key = String(row.mutex_key).replace(/ +$/, "")
              if (keys.has(key)) continue
              keys.add(key)
            }
            picked.push(claimed)
          }
          return picked
        },
        nowUs,
        workerId
      ), (r) => r.claimed)),
    jobCountDue: (names, nowUs, cap) =>
      names.length === 0 ? Effect.succeed([]) : Effect.map(
        run(sql<{ name: string; due: number }>`${
          sql.join(" UNION ALL ", false)(names.map((name) =>
            sql`SELECT ${name} AS name, (SELECT COUNT(*) FROM (
                SELECT 1 FROM ${jobs} FORCE INDEX (${pendingIndex})
                WHERE state = 'pending' AND name = ${name} AND run_at <= ${ts(nowUs)}
                LIMIT ${sql.literal(String(Math.floor(cap)))}) x) AS due`
          ))
        }`, "unprepared"),
        (rows) => rows.map((r) => ({ name: r.name, due: num(r.due) }))
      ),
    // In a transaction of its own: as a multi-statement, the driver returns the rows each statement
    // changed; when fewer rows changed than there were ends, it is rolled back and the ends are
    // written exactly (`finishExactly`).
    jobFinishMany: (finishes) =>
      Effect.gen(function*() {
        const [text, params] = finishStatements(finishes)
        const conn = yield* sql.reserve
        return yield* Effect.gen(function*() {
          const results = yield* conn.executeUnprepared(`START TRANSACTION; ${text}`, MysqlText.values(params), undefined)
          if (affectedRowsOf(results) >= finishes.length) {
            yield* conn.executeUnprepared("COMMIT", [], undefined)
            return noStaleEnds
          }
          yield* conn.executeUnprepared("ROLLBACK", [], undefined)
          return yield* finishExactly(finishes, conn)
        }).pipe(Effect.onError(() => Effect.ignore(conn.executeUnprepared("ROLLBACK", [], undefined))))
      }).pipe(Effect.scoped),
    jobEndsNotHeld: (finishes) =>
      Effect.map(
        Effect.flatMap(Effect.sync(() => endsRead(finishes)), ([text, params]) =>
          runPlain(sql.unsafe(text, MysqlText.values(params)), "unprepared")),
        (rows) => notHeld(finishes, rows, deleteCompleted)
      ),
    // The ends touch running rows and the claim pending ones. The ends' row locks are held while
    // the claim reads (SKIP LOCKED: it waits for no lock), and one COMMIT ends both. Unlike
    // PostgreSQL's one statement (one snapshot), the locking reads see the ends just written: a job
    // they put back to pending (released, or retried at once) is left for a later claim, as there.
    jobFinishManyAndClaim: (finishes, groups, limit, nowUs, workerId) => {
      const ended = new Set(finishes.map((f) => String(f.id)))
      return claimInTransaction(
        groups,
        (g) => claimSelect(g, limit, nowUs).compile(true),
        (sets) =>
          sets.flat().map(toClaimed).filter((r) => !ended.has(r.id)).sort(byClaimOrder).slice(0, Math.floor(limit)),
        nowUs,
        workerId,
        finishes
      )
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
        // Another job holds its unique key: the index refuses the update (only this statement fails).
      ).pipe(Effect.catchIf(isUniqueViolation, () => Effect.succeed(false))),
    jobStaleAttempts: (attempts) =>
      attempts.length === 0 ? Effect.succeed([]) : Effect.map(
        run(sql`SELECT id, attempts, state FROM ${jobs} WHERE id IN ${sql.in(attempts.map((a) => a.id))}`, "unprepared"),
        (rows) => staleAttempts(attempts, rows)
      ),
    jobListOrphaned: (names, leaseCutoffUs, selfId, limit) =>
      Effect.map(
        run(sql`SELECT ${claimedColumnsJ}, j.worker_id, ${sql.literal(usOf("j.claimed_at"))} AS claimed_at_us,
              (w.id IS NULL OR w.heartbeat_at < ${ts(leaseCutoffUs)}) AS expired,
              COALESCE(w.relocking, 0) AS relocking, COALESCE(w.relocks, 0) AS relocks
            FROM ${jobs} j
            LEFT JOIN ${workers} w ON w.id = j.worker_id
            WHERE j.state = 'running' AND j.name IN ${sql.in(names)}
              AND (w.id IS NULL OR j.worker_id = ${selfId} OR w.heartbeat_at < ${ts(leaseCutoffUs)}
                   OR IS_FREE_LOCK(CONCAT(${lockPrefix}, j.worker_id)) = 1)
            LIMIT ${sql.literal(String(Math.min(Math.floor(limit), 2147483647)))}`, "unprepared"),
        (rows) =>
          rows.map((r: any) => ({
            ...toClaimed(r),
            workerId: r.worker_id ?? null,
            claimedAtUs: num(r.claimed_at_us),
            expired: r.expired === true || Number(r.expired) === 1,
            relocking: r.relocking === true || Number(r.relocking) === 1,
            relocks: num(r.relocks)
          }))
      ),
    workerRegister: (id, nowUs, host, pid, jobNames = []) =>
      sql`INSERT INTO ${workers} (id, started_at, heartbeat_at, host, pid, job_names)
          VALUES (${id}, ${ts(nowUs)}, ${ts(nowUs)}, ${host}, ${pid}, ${JSON.stringify(jobNames)})
          ON DUPLICATE KEY UPDATE heartbeat_at = VALUES(heartbeat_at), relocking = FALSE,
            job_names = VALUES(job_names)`.pipe(Effect.asVoid),
    workerJobNames: (sinceUs) =>
      Effect.map(
        sql<{ job_names: string | null }>`SELECT job_names FROM ${workers} WHERE heartbeat_at >= ${ts(sinceUs)}`,
        jobNamesOf
      ),
    workerHeartbeat: (id, nowUs) =>
      run(sql`UPDATE ${workers} SET heartbeat_at = ${ts(nowUs)} WHERE id = ${id}`).pipe(Effect.asVoid),
    workerRelocking: (id) => sql`UPDATE ${workers} SET relocking = TRUE WHERE id = ${id}`.pipe(Effect.asVoid),
    workerRelocked: (id) =>
      sql`UPDATE ${workers} SET relocking = FALSE, relocks = relocks + 1 WHERE id = ${id}`.pipe(Effect.asVoid),
    jobNewestId: () => newestId(run, sql, jobs),
    workerRemove: (id) => sql`DELETE FROM ${workers} WHERE id = ${id}`.pipe(Effect.asVoid),
    workerPrune: (cutoffUs) =>
      // Plain reads first, then a delete by id: in a DELETE, InnoDB reads the jobs subquery with
      // shared locks on every row it scans (REPEATABLE READ), so the prune waited for every claim,
      // ride and enqueue in flight, and blocked them while it scanned. A plain SELECT locks nothing.
      // Without stale workers (the common case) the jobs table is not read at all.
      Effect.gen(function*() {
        const stale = yield* sql<{ id: string }>`SELECT id FROM ${workers} WHERE heartbeat_at < ${ts(cutoffUs)}`
        if (stale.length === 0) return
        const ids = stale.map((r) => String(r.id))
        const busy = yield* sql<{ worker_id: string }>`SELECT DISTINCT worker_id FROM ${jobs}
          WHERE state = 'running' AND worker_id IN ${sql.in(ids)}`
        const running = new Set(busy.map((r) => String(r.worker_id)))
        const idle = ids.filter((id) => !running.has(id))
        if (idle.length === 0) return
        yield* sql`DELETE FROM ${workers} WHERE heartbeat_at < ${ts(cutoffUs)} AND id IN ${sql.in(idle)}`
      }),
    workerLockStatement: (id) => ["SELECT GET_LOCK(?, 0)", [lockPrefix + id]],
    workerLockName: (id) => lockPrefix + id,
    connectionIdStatement: "SELECT CONNECTION_ID()",
    workerLockHolder: (id) =>
      Effect.map(
        sql<{ conn: number | null }>`SELECT IS_USED_LOCK(${lockPrefix + id}) AS conn`,
        (rows) => (rows[0]?.conn === null || rows[0]?.conn === undefined ? null : num(rows[0].conn))
      ),
    endConnection: (connectionId) => Effect.asVoid(sql.unsafe(`KILL CONNECTION ${Math.trunc(connectionId)}`)),
    scheduleGet: (name) =>
      Effect.map(
        sql<{ us: number }>`SELECT ${sql.literal(usOf("last_tick_at"))} AS us FROM ${sql(`${prefix}schedules`)}
          WHERE name = ${name}`,
        (rows) => (rows.length === 0 ? undefined : num(rows[0].us))
      ),
    scheduleFire: (name, tickUs, nowUs, enqueue) => {
      const schedules = sql(`${prefix}schedules`)
      return sql.withTransaction(Effect.gen(function*() {
        // A first tick's row is written here; either way the row is locked (the no-op update locks
        // an existing one), and the locking read sees the latest committed tick.
        yield* sql`INSERT INTO ${schedules} (name, last_tick_at, updated_at)
            VALUES (${name}, '1000-01-01 00:00:00', ${ts(nowUs)}) ON DUPLICATE KEY UPDATE name = name`
        const rows = yield* sql<{ us: number }>`SELECT ${sql.literal(usOf("last_tick_at"))} AS us FROM ${schedules}
            WHERE name = ${name} FOR UPDATE`
        if (rows.length > 0 && num(rows[0].us) >= tickUs) return undefined
        const enqueued = yield* enqueue
        yield* sql`UPDATE ${schedules} SET last_tick_at = ${ts(tickUs)}, updated_at = ${ts(nowUs)} WHERE name = ${name}`
        return enqueued
      }))
    },
    jobGet: (id) =>
      Effect.map(
        sql`SELECT ${claimedColumns}, state, ${sql.literal(usOf("claimed_at"))} AS claimed_at_us,
              ${sql.literal(usOf("finished_at"))} AS finished_at_us, last_error, result
            FROM ${jobs} WHERE id = ${id}`,
        (rows) => (rows.length === 0 ? undefined : toJobRow(rows[0]))
      ),

    // --- Operations -------------------------------------------------------------------------
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
        run(sql`SELECT id, name, state, attempts, priority, ${sql.literal(usOf("run_at"))} AS run_at_us,
              ${sql.literal(usOf("created_at"))} AS created_at_us, ${sql.literal(usOf("claimed_at"))} AS claimed_at_us,
              ${sql.literal(usOf("finished_at"))} AS finished_at_us, worker_id, last_error, progress
            FROM ${jobs}
            WHERE ${sql.and([
          ...(filter.name === undefined ? [] : [sql`name = ${filter.name}`]),
          ...(filter.state === undefined ? [] : [sql`state = ${filter.state}`]),
          ...(filter.beforeId === undefined ? [] : [sql`id < ${filter.beforeId}`])
        ])}
            ORDER BY id DESC LIMIT ${sql.literal(String(Math.max(0, Math.floor(filter.limit))))}`, "unprepared"),
        (rows) => rows.map(toSummary)
      ),
    jobStats: (nowUs, sinceUs) =>
      Effect.map(
        run(sql`SELECT name, state, COUNT(*) AS n,
              SUM(CASE WHEN state = 'pending' AND run_at <= ${ts(nowUs)} THEN 1 ELSE 0 END) AS due,
              TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00',
                MIN(CASE WHEN state = 'pending' AND run_at <= ${ts(nowUs)} THEN run_at END)) AS oldest_due_us,
              SUM(CASE WHEN finished_at >= ${ts(sinceUs)} THEN 1 ELSE 0 END) AS recent
            FROM ${jobs} GROUP BY name, state ORDER BY name, state`, "unprepared"),
        (rows) => rows.map(toStats)
      ),
    jobRetryByName: (name, state, nowUs, limit, finishedByUs) =>
      Effect.map(
        // Jobs with a unique key are left to `jobRetry`, one by one (another job may hold the key).
        sql`UPDATE ${jobs} SET state = 'pending', run_at = ${ts(nowUs)}, finished_at = NULL, attempt_base = attempts
            WHERE state = ${state} AND name = ${name} AND unique_key IS NULL AND finished_at <= ${ts(finishedByUs)}
            ORDER BY id LIMIT ${sql.literal(String(Math.floor(limit)))}`.raw,
        (r: any) => Number(r.affectedRows)
      ),
    jobKeyedIdsByName: (name, state, afterId, finishedByUs, limit) =>
      Effect.map(
        sql<{ id: string }>`SELECT id FROM ${jobs}
            WHERE state = ${state} AND name = ${name} AND unique_key IS NOT NULL
              AND finished_at <= ${ts(finishedByUs)} AND id > ${afterId}
            ORDER BY id LIMIT ${sql.literal(String(Math.floor(limit)))}`,
        (rows) => rows.map((r) => String(r.id))
      ),
    jobProgressSet: (id, attempt, progress) =>
      Effect.map(
        // Through the primary key, named (see the delete of completed jobs): a handler may report
        // progress inside its own transaction, and a lock on the `(state, finished_at)` range of
        // running jobs would hold back every enqueue until that transaction ends.
        sql`UPDATE ${jobs} FORCE INDEX (PRIMARY) SET progress = ${progress}
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
 * Deadlocks and serialization failures (PostgreSQL 40P01/40001, MySQL/MariaDB 1213/1205, and
 * MariaDB's 1020 `ER_CHECKREAD`) are transient: the statement is retried, up to 5 times, 10 ms
 * apart doubling. Inside a caller's transaction nothing is retried (the transaction is already
 * aborted; the caller decides).
 *
 * 1020 ("Record has changed since last read") comes from `innodb_snapshot_isolation`, on by
 * default since MariaDB 11.6.2; it rolls the transaction back like a deadlock. MariaDB 11.8 raises
 * it even in the keyed claim at READ COMMITTED (its locking read has a subquery on the jobs table).
 */
export const isTransient = (error: SqlError): boolean => {
  const cause = error.cause as { code?: unknown; errno?: unknown } | undefined
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
export const errorKind = (error: SqlError): "data" | "unavailable" | "refused" => {
  const cause = error.cause as
    | { code?: unknown; errno?: unknown; sqlState?: unknown; severity?: unknown; fatal?: unknown }
    | undefined
  if (cause === undefined || cause === null || typeof cause !== "object") return "unavailable"
  const { code, errno, sqlState } = cause
  if (typeof errno === "number" && typeof sqlState === "string") {
    // mysql2: errors the server sent carry its errno and SQLSTATE (the driver's own, `fatal` ones
    // and the socket's do not, or carry errno 2000 and up).
    if ([1153, 1264, 1366, 1406, 3140].includes(errno) || /^2[23]/.test(sqlState)) return "data"
    if (isTransient(error) || unavailableErrnos.has(errno) || cause.fatal === true) return "unavailable"
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
export const retryTransient = <A, R>(effect: Effect.Effect<A, SqlError, R>): Effect.Effect<A, SqlError, R> => {
  // Whether the statement ran inside a caller's transaction is asked only when it failed: the
  // success path is one `catchIf`.
  const attempt = (retries: number): Effect.Effect<A, SqlError, R> =>
    Effect.catchIf(
      effect,
      (error) => retries < 5 && isTransient(error),
      (error) =>
        Effect.flatMap(
          Effect.serviceOption(SqlClient.TransactionConnection),
          (tx) => Option.isSome(tx) ? Effect.fail(error) : Effect.zipRight(wallSleep(10 * 2 ** retries), attempt(retries + 1))
        )
    )
  return attempt(0)
}

/**
 * `effect` without the `sql.execute` spans of @effect/sql while the tracer is Effect's built-in one
 * (no exporter installed): nobody reads those spans, and making one took about a third of the
 * client's CPU for a statement (callgrind: 236k of 1,349k instructions for a one-row INSERT). With
 * any other tracer the spans are made as usual.
 */
export const withoutUnreadSpans = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.withFiberRuntime((fiber) =>
    fiber.currentTracer === builtInTracer && fiber.getFiberRef(FiberRef.currentTracerEnabled)
      ? Effect.withTracerEnabled(effect, false)
      : effect
  )

/** `jobNewestId`, the same SQL on both dialects. */
const newestId = (run: Run, sql: SqlClient.SqlClient, jobs: Statement.Identifier) =>
  Effect.map(
    run(sql<{ id: string | null }>`SELECT MAX(id) AS id FROM ${jobs}`),
    (rows) => (rows[0]?.id === null || rows[0]?.id === undefined ? null : String(rows[0].id))
  )

/** The statements that run through `runner` (or, on MySQL/MariaDB, on a reserved connection): no span to skip. */
const runDirect: ReadonlySet<string> = new Set([
  "jobInsertMany",
  "jobInsertUnique",
  "jobProbe",
  "jobClaim",
  "jobClaimKeyed",
  "jobFinishMany",
  "jobFinishManyAndClaim",
  "workerHeartbeat",
  "jobNewestId"
])

/**
 * Every statement of `statements`, retried on transient errors, without unread spans. `direct`:
 * the statements were built with `direct` (see `runner`), so the hot ones make no span to skip.
 */
export const withTransientRetry = (statements: Statements, direct = false): Statements => {
  const wrapped: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(statements)) {
    const f = value as (...a: Array<unknown>) => Effect.Effect<unknown, SqlError>
    wrapped[key] = typeof value !== "function" || key === "workerLockStatement" || key === "workerLockName"
      ? value
      : direct && runDirect.has(key)
      ? (...args: Array<unknown>) => retryTransient(f(...args))
      : (...args: Array<unknown>) => withoutUnreadSpans(retryTransient(f(...args)))
  }
  return wrapped as unknown as Statements
}

// --- Operations ---------------------------------------------------------------------------

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
