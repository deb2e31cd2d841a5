/**
 * The driver of one database: every SQL operation sqlane runs at run time, one function per
 * operation (noun + verb), and what the database can do (`capabilities`). One implementation per
 * dialect (driver/pg, driver/mysql), built once when the services are built; nothing else in the
 * library writes SQL for the jobs table.
 *
 * Times cross the wire as integer microseconds since the Unix epoch and are converted in SQL,
 * so neither the process time zone, the driver's date handling nor the database session's
 * time zone can shift them. Columns are `timestamptz` (PostgreSQL) and `DATETIME(6)` holding
 * UTC (MySQL/MariaDB).
 *
 * @internal
 */
import type { SqlError } from "@effect/sql/SqlError"
import type * as Statement from "@effect/sql/Statement"
import type * as Effect from "effect/Effect"
import type { SetupError, UniqueKeyContended } from "../../schema/Errors.js"
import type { ListenError } from "./errors.js"
import type {
  Ahead,
  ClaimedRow,
  Finish,
  Group,
  InsertRow,
  JobListFilter,
  KeyedClaim,
  JobRow,
  JobSummaryRow,
  LimitChanges,
  LimitRow,
  LimitUseRow,
  Migration,
  NameLimits,
  OrphanedRow,
  PausedRow,
  RatedClaim,
  RateNameRow,
  RatePruneBatch,
  ProbeRow,
  ScheduleRow,
  StaleEnds,
  StatsMinuteRow,
  StatsRow,
  UniqueInsertResult,
  UniqueInsertRow,
  WorkerRow,
  WorkerStart
} from "./rows.js"

export type * from "./rows.js"

/** What a database can do, for the services that decide by it. */
export interface Capabilities {
  /**
   * Whether this driver delivers notifications between sessions (`channelListen`, `channelNotify`):
   * PostgreSQL's `LISTEN/NOTIFY`, when the client is @effect/sql-pg's `PgClient` (the LISTEN
   * connection is opened with its settings). The Notifier wakes other processes by `NOTIFY` when
   * true, and reads the newest job id (the insert check) when false.
   */
  readonly listenNotify: boolean
  /** Whether a claim can ride on the write of ends (`jobFinishManyAndClaim`). */
  readonly claimsRideOnEnds: boolean
  /**
   * The largest statement (bytes) the server takes, if it has a limit sqlane must respect:
   * MySQL/MariaDB `max_allowed_packet`, read at start. `undefined` on PostgreSQL (a value may
   * be up to 1 GB). Payloads are refused at enqueue, and multi-row inserts are cut, to fit it.
   */
  readonly maxStatementBytes: number | undefined
  /**
   * Whether keys (job names, mutex keys) compare with trailing spaces ignored (MySQL/MariaDB's PAD
   * SPACE collation): "name " and "name" are one key there.
   */
  readonly padSpaceKeys: boolean
  /**
   * Whether the client's connections take several statements in one query. The MySQL/MariaDB
   * driver's claims and ends send their transaction in one round trip and need it (a `Worker`
   * refuses to start without it); inserting jobs does not. @effect/sql-mysql2's client sets the
   * flag (`MULTI_STATEMENTS`); a connection through a proxy that refuses it, or a client opened
   * without it, has none. Always true on PostgreSQL, whose driver never sends several.
   */
  readonly multiStatements: boolean
}

export interface Driver {
  readonly capabilities: Capabilities
  /** Inserts jobs in one statement per chunk; returns their ids in input order. */
  readonly jobInsertMany: (
    rows: ReadonlyArray<InsertRow>,
    nowUs: number,
    notify: string | undefined
  ) => Effect.Effect<ReadonlyArray<string>, SqlError>
  /**
   * Inserts one job unless a job holding its unique key exists: then, by `row.mode`, gives that job
   * the row's values when it is pending and of the same name (`replace`, `throttle`: `replaced`), or
   * writes nothing; either way returns that job's id. An uncommitted insert of the same key makes
   * this wait for its transaction. The unique index decides (never a read before the write).
   * PostgreSQL: `INSERT … ON CONFLICT DO NOTHING` or `… ON CONFLICT (unique_key) WHERE <guard> DO
   * UPDATE … WHERE state = 'pending' AND name = EXCLUDED.name`; MySQL/MariaDB: a plain `INSERT`,
   * and on a duplicate key an `UPDATE … WHERE unique_active = ? AND state = 'pending' AND name = ?`.
   */
  readonly jobInsertUnique: (
    row: UniqueInsertRow,
    nowUs: number,
    notify: string | undefined
  ) => Effect.Effect<UniqueInsertResult, SqlError | UniqueKeyContended>
  /**
   * For each (name, priority) of `names` with pending jobs, its earliest `run_at`. A loose index
   * scan: reads one index entry per (name, priority) with pending jobs, nothing else.
   */
  readonly jobProbe: (names: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<ProbeRow>, SqlError>
  /** `jobProbe` of every job name: each (name, priority) with pending jobs, and its earliest `run_at`. */
  readonly jobPendingGroups: () => Effect.Effect<ReadonlyArray<ProbeRow>, SqlError>
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
    workerId: string,
    /**
     * The concurrency limits of the groups' names: a job of a limited name is claimed only with a
     * free slot of its name (and of its key), which the claim writes into its row; a unique index
     * over running rows' slots makes two holders of one slot impossible (a lost race is retried).
     */
    limits?: ReadonlyMap<string, NameLimits>,
    /** Jobs of limited names the claim may take without a slot, and the most that take one. */
    ahead?: Ahead
  ) => Effect.Effect<ReadonlyArray<ClaimedRow>, SqlError>
  /**
   * `jobClaimKeyed` for groups that include names under a rate limit (`rate`, `ratePerKey` of
   * `limits`, or held by a `RateLimited`): in one transaction, the rate windows of those names and
   * of their candidates' keys are locked (created, or moved to the current window), the claim
   * takes no more than each window has left, and the windows count what it took. What a claim
   * that does not commit took is not counted; two claims of one window take turns on its row.
   */
  readonly jobClaimRated: (
    groups: ReadonlyArray<Group>,
    limit: number,
    nowUs: number,
    workerId: string,
    limits: ReadonlyMap<string, NameLimits>
  ) => Effect.Effect<RatedClaim, SqlError>
  /**
   * Holds back a job name (`key` null) or one concurrency key of it until `untilUs` (µs since the
   * epoch), in every process whose claims apply its rate windows; a later hold already there is kept.
   */
  readonly rateHold: (name: string, key: string | null, untilUs: number) => Effect.Effect<void, SqlError>
  /**
   * Of each name under a per-key concurrency limit (`perKey`, its `runningPerKey`): of its first
   * `cap` due pending jobs (any `cap`: the read is bounded by it, not by the backlog), those whose key
   * has every slot of that limit in use (for the `sqlane_jobs_held_back_by_key` gauge).
   */
  readonly jobCountHeldByKey: (
    limits: ReadonlyArray<{ readonly name: string; readonly perKey: number }>,
    nowUs: number,
    cap: number
  ) => Effect.Effect<ReadonlyArray<{ readonly name: string; readonly held: number }>, SqlError>
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
   *
   * With `keyed`, the claim is `jobClaimKeyed`'s (mutex keys, concurrency limits and fair shares of
   * `keyed.limits`; no rate limits), and takes the slots and keys the ends free: on PostgreSQL in
   * the same statement, its reads of what running rows hold leaving out the rows the ends change
   * (its snapshot still shows them running); on MySQL/MariaDB its reads follow the ends in the
   * transaction. A claim that loses a race for a slot or a key (the unique indexes) takes nothing,
   * and the ends are written alone.
   */
  readonly jobFinishManyAndClaim?: (
    finishes: ReadonlyArray<Finish>,
    groups: ReadonlyArray<Group>,
    limit: number,
    nowUs: number,
    workerId: string,
    keyed?: KeyedClaim
  ) => Effect.Effect<{ readonly claimed: ReadonlyArray<ClaimedRow>; readonly stale: StaleEnds }, SqlError>
  readonly jobGet: (id: string) => Effect.Effect<JobRow | undefined, SqlError>
  /** Deletes a job that is not running (cancel a running one first); returns whether it did. */
  readonly jobDelete: (id: string) => Effect.Effect<boolean, SqlError>
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
   * Running jobs of `names` whose worker is gone: its session lock is free or its heartbeat is older
   * than `leaseCutoffUs`; with `scope` "all" (the default), also those whose worker has no row and
   * the caller's own. A dialect may list more than its scope asks (MySQL/MariaDB reads every running
   * job in either scope); what it lists is checked by the caller.
   */
  readonly jobListOrphaned: (
    names: ReadonlyArray<string>,
    leaseCutoffUs: number,
    /** With `scope` "all", also list running jobs of this worker id (the caller keeps those it is running). */
    selfId: string,
    /**
     * The most rows listed: 1,000 plus room for the caller's own running jobs (twice its concurrency,
     * for lost claims of its own too), so a worker's own jobs never crowd out the lost ones.
     */
    limit: number,
    /**
     * "lost": only the jobs of workers whose row says they are lost (on PostgreSQL no job is read
     * when none is); "all": also jobs with no worker row and the caller's own, which reads every
     * running job of `names`.
     */
    scope?: "lost" | "all"
  ) => Effect.Effect<ReadonlyArray<OrphanedRow>, SqlError>
  /** Registers (or re-registers) a worker with the job names it has handlers for. */
  readonly workerRegister: (
    id: string,
    nowUs: number,
    host: string,
    pid: number,
    jobNames?: ReadonlyArray<string>,
    /** The concurrency limits of its job definitions, by name (published for `sqlane status`). */
    jobLimits?: ReadonlyMap<string, NameLimits>
  ) => Effect.Effect<void, SqlError>
  /** The job names handled by the workers whose heartbeat is at or after `sinceUs`. */
  readonly workerJobNames: (sinceUs: number) => Effect.Effect<ReadonlySet<string>, SqlError>
  /** The job definitions' limits the workers whose heartbeat is at or after `sinceUs` published, by name. */
  readonly workerJobLimits: (sinceUs: number) => Effect.Effect<ReadonlyMap<string, NameLimits>, SqlError>
  /**
   * A worker's heartbeat: its row's `heartbeat_at` set to `nowUs`; with `started`, a row that is gone
   * (pruned while the worker was stopped for minutes, or deleted by hand) is written again from it,
   * so that the jobs the worker claims from then on have a live worker's row. (Without: a worker
   * that is stopping, whose row its removal may delete meanwhile.)
   */
  readonly workerHeartbeat: (id: string, nowUs: number, started: WorkerStart | undefined) => Effect.Effect<void, SqlError>
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
  /**
   * A worker leaves: its row's heartbeat is set to the epoch (rescuers take a job it left running at
   * once), then the row is deleted unless a job of it is still running (`workerPrune` deletes it later).
   */
  readonly workerRemove: (id: string) => Effect.Effect<void, SqlError>
  /** Deletes worker rows whose heartbeat is older than `cutoffUs` and that run no job. */
  readonly workerPrune: (cutoffUs: number) => Effect.Effect<void, SqlError>
  /** Every worker row (live ones, and ones that ended without closing, until pruned), by id; at most `limit`. */
  readonly workerList: (limit: number) => Effect.Effect<ReadonlyArray<WorkerRow>, SqlError>
  /** The periodic jobs that enqueued a tick or were described, by name, with their latest tick and description; at most `limit`. */
  readonly scheduleList: (limit: number) => Effect.Effect<ReadonlyArray<ScheduleRow>, SqlError>
  /**
   * Records what a scheduler runs under a periodic job's name — the job it enqueues, its cron
   * expression and time zone as given, and the next tick it waits for (µs) — for the dashboard, on
   * the name's row once its first tick made one (a row means a tick was enqueued: schedulers of
   * earlier versions read it so). The latest scheduler to write wins.
   */
  readonly scheduleDescribe: (
    name: string,
    description: { readonly jobName: string; readonly expression: string; readonly timeZone: string; readonly nextTickUs: number }
  ) => Effect.Effect<void, SqlError>
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
  /** The statement that releases a worker's session lock (on its connection), with the params of `workerLockStatement`. */
  readonly workerUnlockSql: string
  /** The name of a worker's session lock (see `workerLockPrefix`, driver/workerRows.ts). */
  readonly workerLockName: (id: string) => string
  /** The statement that reads the session's own connection id (`pg_backend_pid()`, `CONNECTION_ID()`). */
  readonly connectionIdStatement: string
  /**
   * The statement a worker runs on its lock's connection to learn that the connection still answers
   * (`SELECT 1`): it reads nothing and takes no lock.
   */
  readonly connectionCheckStatement: string
  /** The connection id of the session holding a worker's lock, or null when it is free. */
  readonly workerLockHolder: (id: string) => Effect.Effect<number | null, SqlError>
  /** Ends a connection of this database user (`pg_terminate_backend`, `KILL CONNECTION`). */
  readonly endConnection: (connectionId: number) => Effect.Effect<void, SqlError>

  // --- Concurrency limits set at run time ------------------------------------------------------
  /** The rows of `<prefix>limits`, by name. */
  readonly limitList: () => Effect.Effect<ReadonlyArray<LimitRow>, SqlError>
  /**
   * Sets the run-time limits of a job name, limit by limit, in one transaction: a value sets it,
   * `null` removes it, `undefined` keeps the row's. A row left with no limit is deleted. Returns the
   * row as it is now (undefined: none).
   */
  readonly limitSet: (name: string, changes: LimitChanges, nowUs: number) => Effect.Effect<LimitRow | undefined, SqlError>
  /** Removes a job name's run-time limits; returns `false` when it had none. */
  readonly limitDelete: (name: string) => Effect.Effect<boolean, SqlError>
  /**
   * Lifts the holds (`rateHold`) of a job name and of its keys still in force at `nowUs`; returns how
   * many. (A hold whose time has passed holds nothing: it is left, and not counted.)
   */
  readonly rateHoldsLift: (name: string, nowUs: number) => Effect.Effect<number, SqlError>
  /**
   * The slots held now by running attempts of `names` (names holding none are left out); without
   * `keys` (default true), only the name slots (the keys' counts are 0).
   */
  readonly limitUse: (names: ReadonlyArray<string>, keys?: boolean) => Effect.Effect<ReadonlyArray<LimitUseRow>, SqlError>
  /**
   * Where other processes' releases are not notified (MySQL/MariaDB): the slots and keys running
   * attempts hold now, counted per `key` — each job name's name slots (`name`), the key slots of each
   * of `names` (`k:name`), and the running mutex keys (`mutex`); held by none, a count is left out.
   * The insert check compares them between readings: a count that fell is a release. Reads only the
   * running rows that hold one (the slot and mutex indexes).
   */
  readonly slotsHeld?: (names: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<{ readonly key: string; readonly held: number }>, SqlError>

  // --- Rate windows (`<prefix>rates`) outside the claims -------------------------------------
  /** The own window rows (key '') of those of `names` that have one, for `sqlane status`. */
  readonly rateNameList: (names: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<RateNameRow>, SqlError>
  /**
   * Reads the next `limit` window rows of `name` in key order (the name's own row, key '', first),
   * after `afterKey` (undefined: from the first), and deletes those among them whose window began
   * before `cutoffUs` and whose hold (if any) ended before it. A claim that holds a row's lock
   * meanwhile is waited for, and a row it moved to a later window is kept. One range of the primary
   * key per batch, however many rows the table holds.
   */
  readonly ratePrune: (
    name: string,
    cutoffUs: number,
    afterKey: string | undefined,
    limit: number
  ) => Effect.Effect<RatePruneBatch, SqlError>

  // --- Per-minute stats (`<prefix>stats`) ---------------------------------------------------
  /**
   * Adds counts to the rows of `<prefix>stats`, each (minute, name) created at 0 if missing, in one
   * statement per 500 rows (`INSERT … ON CONFLICT DO UPDATE` / `ON DUPLICATE KEY UPDATE` adding the
   * values). The rows are written in primary-key order, so that two processes adding to the same
   * rows lock them in the same order.
   */
  readonly statsAdd: (rows: ReadonlyArray<StatsMinuteRow>) => Effect.Effect<void, SqlError>
  /**
   * The rows of `<prefix>stats` of the minutes at or after `sinceUs` (µs), newest first, at most
   * `limit`: one range of the primary key (minute, name), read backwards.
   */
  readonly statsRead: (sinceUs: number, limit: number) => Effect.Effect<ReadonlyArray<StatsMinuteRow>, SqlError>
  /**
   * Deletes at most `limit` rows of `<prefix>stats` whose minute began before `cutoffUs`, oldest
   * first (the start of the primary key). Returns how many it deleted.
   */
  readonly statsPrune: (cutoffUs: number, limit: number) => Effect.Effect<number, SqlError>

  // --- Operations: CLI, pause/resume, retention, progress ----------------------------------
  /** The job names paused in `<prefix>paused`. */
  readonly pausedList: () => Effect.Effect<ReadonlyArray<PausedRow>, SqlError>
  /** Pauses a job name; returns `false` when it was already paused. */
  readonly pausedInsert: (name: string, nowUs: number) => Effect.Effect<boolean, SqlError>
  /** Resumes a job name; returns `false` when it was not paused. */
  readonly pausedDelete: (name: string) => Effect.Effect<boolean, SqlError>
  /**
   * Jobs, newest first (by id), optionally of one name and/or state, with ids below `beforeId`
   * (for paging); at most `limit`. Each filter reads one index range in id order (a name alone:
   * one per state); a created-time range is read as the ids between the first jobs created at or
   * after its ends (driver/createdIds.ts).
   */
  readonly jobList: (filter: JobListFilter) => Effect.Effect<ReadonlyArray<JobSummaryRow>, SqlError>
  /**
   * Jobs in `state` counted per job name, reading at most `cap` rows of that state through its index
   * (pending: the pending index; running: the running index; finished states: the finished index).
   * A total of `cap` means the state holds at least that many (the counts are then lower bounds).
   */
  readonly jobCountByState: (
    state: "pending" | "running" | "completed" | "dead" | "cancelled",
    cap: number
  ) => Effect.Effect<ReadonlyArray<{ readonly name: string; readonly count: number }>, SqlError>
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
   * Deletes at most `limit` jobs in `state` finished before `cutoffUs`, oldest first (by `finished_at`;
   * on PostgreSQL completed jobs by id, see `pg/admin.ts`). Returns how many it deleted.
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

  // --- Migrations ------------------------------------------------------------------------------
  /**
   * sqlane's migrations of this database for this prefix, keyed `<id>_<name>` as `Migrator.fromRecord`
   * reads them: versioned and append-only (a shipped one never changes; the next gets the next id).
   * Each runs its statements on the `SqlClient` of its context.
   */
  readonly migrations: Readonly<Record<string, Migration>>
  /** The ids of the migrations applied to this prefix, in order, or `undefined` when its migrations table is missing. */
  readonly migrationList: () => Effect.Effect<ReadonlyArray<number> | undefined, SqlError>
  /** Drops every table of this prefix (those that exist), its jobs with them. */
  readonly migrationDropAll: () => Effect.Effect<void, SqlError>
  /**
   * Runs `migrate` holding this prefix's migration lock, so that one process migrates while the others
   * wait (then find nothing left to do); the migrations table exists when `migrate` starts on
   * PostgreSQL. PostgreSQL: a transaction holding a transaction-level advisory lock. MySQL/MariaDB: a
   * session lock (`GET_LOCK`, waited for up to 10 minutes, then `SetupError`) on a reserved connection
   * while `migrate` runs on another, so the pool needs 2 connections (`SetupError` when it has fewer).
   */
  readonly migrationLocked: <A, E, R>(
    migrate: Effect.Effect<A, E, R>
  ) => Effect.Effect<A, E | SqlError | SetupError, R>

  // --- Notifications between sessions (`capabilities.listenNotify`) ---------------------------
  /**
   * Opens a connection of its own that listens on `channel`: calls `onReady` each time listening is
   * active, then `onPayload` for each notification, until the connection fails (the effect fails
   * with a `ListenError`) or the scope of the caller's fiber ends (it is interrupted; the connection
   * is closed). Fails at once without `capabilities.listenNotify`.
   */
  readonly channelListen: (
    channel: string,
    onReady: () => void,
    onPayload: (payload: string) => void
  ) => Effect.Effect<never, ListenError>
  /**
   * Sends `payload` on `channel` to every session listening on it, when the caller's transaction
   * commits (at once outside one). Does nothing without `capabilities.listenNotify`.
   */
  readonly channelNotify: (channel: string, payload: string) => Effect.Effect<void, SqlError>
}

/**
 * The plans of the probe and of the claims (as the database's EXPLAIN prints them, one string per
 * line or row), for tests that keep them free of full scans and sorts of the backlog. Not part of
 * `Driver`: each driver's `explain` builds them (test/support/explain.ts).
 */
/** What each dialect's jobs module gives the plans: those of its statements, and of any statement. */
export type JobsExplain = Omit<Explain, "explainCountByState" | "explainStatsRead" | "explainJobList" | "explainPrune"> & {
  readonly explainStatement: (statement: Statement.Statement<unknown>) => Effect.Effect<ReadonlyArray<string>, SqlError>
}

export interface Explain {
  /** The plan of `jobList` (after a created-time range is turned into ids). */
  readonly explainJobList: (filter: JobListFilter) => Effect.Effect<ReadonlyArray<string>, SqlError>
  /** The plan of `jobCountByState`. */
  readonly explainCountByState: (
    state: "pending" | "running" | "completed" | "dead" | "cancelled",
    cap: number
  ) => Effect.Effect<ReadonlyArray<string>, SqlError>
  /** The plan of `jobPruneFinished` (on MySQL/MariaDB, of its read of the ids to delete). */
  readonly explainPrune: (
    state: "completed" | "dead" | "cancelled",
    cutoffUs: number,
    limit: number
  ) => Effect.Effect<ReadonlyArray<string>, SqlError>
  /** The plan of `statsRead`. */
  readonly explainStatsRead: (sinceUs: number, limit: number) => Effect.Effect<ReadonlyArray<string>, SqlError>
  readonly explainProbe: (names: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<string>, SqlError>
  readonly explainClaim: (groups: ReadonlyArray<Group>, limit: number, nowUs: number) => Effect.Effect<
    ReadonlyArray<string>,
    SqlError
  >
  readonly explainClaimKeyed: (
    groups: ReadonlyArray<Group>,
    limit: number,
    nowUs: number,
    limits?: ReadonlyMap<string, NameLimits>
  ) => Effect.Effect<
    ReadonlyArray<string>,
    SqlError
  >
}

/** The operations of each area of a driver, as each dialect's modules build them (driver/pg, driver/mysql). */
export type InsertOps = Pick<Driver, "jobInsertMany" | "jobInsertUnique" | "jobNewestId">
export type JobsOps = Pick<
  Driver,
  | "jobProbe"
  | "jobPendingGroups"
  | "jobClaim"
  | "jobClaimKeyed"
  | "jobClaimRated"
  | "rateHold"
  | "jobCountDue"
  | "jobFinishMany"
  | "jobEndsNotHeld"
  | "jobFinishManyAndClaim"
>
export type WorkersOps = Pick<
  Driver,
  | "jobStaleAttempts"
  | "jobListOrphaned"
  | "workerRegister"
  | "workerJobNames"
  | "workerJobLimits"
  | "workerHeartbeat"
  | "workerRelocking"
  | "workerRelocked"
  | "workerRemove"
  | "workerPrune"
  | "workerList"
  | "workerLockStatement"
  | "workerUnlockSql"
  | "workerLockName"
  | "connectionIdStatement"
  | "connectionCheckStatement"
  | "workerLockHolder"
  | "endConnection"
>
export type SchedulesOps = Pick<Driver, "scheduleGet" | "scheduleFire" | "scheduleList" | "scheduleDescribe">
export type AdminOps = Pick<
  Driver,
  | "jobGet"
  | "jobDelete"
  | "jobCancel"
  | "jobRetry"
  | "pausedList"
  | "pausedInsert"
  | "pausedDelete"
  | "jobList"
  | "jobStats"
  | "jobCountByState"
  | "jobRetryByName"
  | "jobKeyedIdsByName"
  | "jobProgressSet"
  | "jobProgressGet"
  | "jobPruneFinished"
  | "prunerLock"
>
export type LimitsOps = Pick<
  Driver,
  "limitList" | "limitSet" | "limitDelete" | "rateHoldsLift" | "limitUse" | "slotsHeld" | "jobCountHeldByKey"
>
export type RatesOps = Pick<Driver, "rateNameList" | "ratePrune">
export type StatsOps = Pick<Driver, "statsAdd" | "statsRead" | "statsPrune">
export type MigrationsOps = Pick<Driver, "migrations" | "migrationList" | "migrationDropAll" | "migrationLocked">
export type NotificationsOps = Pick<Driver, "channelListen" | "channelNotify">
