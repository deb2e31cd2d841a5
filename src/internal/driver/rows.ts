/**
 * The rows and values the driver's operations take and give (see `Driver.ts`). Times are integer
 * microseconds since the Unix epoch.
 *
 * @internal
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type * as Effect from "effect/Effect"

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
  /**
   * The slot of its name's concurrency limit the claim wrote into the row (`limits.running`), if
   * any; a job of a limited name claimed ahead without one (see {@link Ahead}) starts only in a
   * slot an ended attempt of this worker hands over (`Finish.handTo`).
   */
  readonly nameSlot?: number | null | undefined
  /**
   * The job's concurrency key where its name has fair shares (`limits.key`) and the claim took it
   * in its key's turn: the worker starts the jobs it claimed ahead in turns by this key too
   * (`worker/turns.ts`).
   */
  readonly fairKey?: string | undefined
}

/** A running job the rescuer looks at (`Driver.jobListOrphaned`), with what it knows of its worker. */
export interface OrphanedRow extends ClaimedRow {
  readonly workerId: string | null
  readonly claimedAtUs: number
  /** Its worker has no row, or a heartbeat older than the lease's cutoff (not just a free lock). */
  readonly expired: boolean
  /** Its worker's row says it is taking its lock again (see {@link Driver.workerRelocking}). */
  readonly relocking: boolean
  /** How many times its worker took its lock again (see {@link Driver.workerRelocked}). */
  readonly relocks: number
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
  /** The job's concurrency key (its job's `limits.key`; null: none). */
  readonly limitKey: string | null
  /** The enqueueing span, `<trace id>:<span id>:<sampled 1|0>` (null: none). */
  readonly traceContext: string | null
}

/** A row inserted unless another job holds its unique key. */
export interface UniqueInsertRow extends InsertRow {
  readonly uniqueKey: string
  /** Bit mask of the states in which a job holds its key: pending 1, running 2, completed 4, dead 8, cancelled 16. */
  readonly uniqueStates: number
  /**
   * What happens to a pending job of the same name that holds the key: `skip` leaves it; `replace`
   * gives it this row's payload, priority, mutex key, trace context and `run_at`; `throttle` the same
   * but keeps the earlier of the two `run_at`s. A holder in another state or of another name is left.
   * Default `skip`.
   */
  readonly mode?: "skip" | "replace" | "throttle" | undefined
  /**
   * Take the key before writing, as a replacing mode does: set by a batch on the first row of a key
   * whose rows include one that replaces. On MySQL/MariaDB the insert's duplicate check takes a
   * shared lock on the holder, which a later replace of the key would have to upgrade — two
   * concurrent batches doing that deadlock.
   */
  readonly lockKey?: boolean | undefined
}

/** What `jobInsertUnique` did: inserted a job, gave the holder this row (`replaced`), or found the holder. */
export interface UniqueInsertResult {
  readonly id: string
  readonly inserted: boolean
  readonly replaced: boolean
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
  /**
   * The attempt this attempt's name slot passes to (`slot`: its number), written in the same
   * transaction as the end: a job of the same name, claimed ahead without a slot by the same worker
   * and started in this one when this attempt ended. It passes only if this end is written, the
   * row held that slot and the receiving attempt is still running without one; a write reports each
   * end whose slot did not pass (`handKey` in its `StaleEnds`). Within one write, a receiver whose
   * own end is written too passes the slot on to its own receiver (or frees it).
   */
  readonly handTo?: { readonly id: string; readonly attempt: number; readonly slot: number } | undefined
}

/**
 * The ends of a write that changed nothing, by `endKey`: their attempt was stale (the job was
 * cancelled, or rescued from a worker taken for lost, while the attempt ran). Usually empty. Also,
 * by `handKey`, the ends (written or not) whose name slot did not pass to their `Finish.handTo`.
 */
export type StaleEnds = ReadonlySet<string>

/**
 * A job name and a priority: the unit the probe reports and the claim reads.
 *
 * @example
 * ```ts
 * const claimer = yield* Claimer.Claimer
 * const groups: ReadonlyArray<Claimer.Group> = [{ name: "send-email", priority: 0 }]
 * const jobs = yield* claimer.claim(groups, 10, Date.now() * 1000, "worker-1")
 * ```
 */
export interface Group {
  readonly name: string
  readonly priority: number
}

/**
 * Jobs a keyed claim may take beyond the free slots of their names' concurrency limits, without a
 * slot, to wait in the worker until an attempt of the same name that ends hands its slot over
 * (`Finish.handTo`): only of `names` (limited by `running` alone), at most `waiting` of them; and at
 * most `slots` of the jobs a claim takes get a slot (they start at once: the worker has that many
 * free).
 */
export interface Ahead {
  readonly slots: number
  readonly waiting: number
  readonly names: ReadonlySet<string>
}

/** A keyed claim made with the write of ends: the limits of its names, and what it may take ahead. */
export interface KeyedClaim {
  readonly limits: ReadonlyMap<string, NameLimits>
  readonly ahead?: Ahead | undefined
}

/** The earliest pending `run_at` of a job name at one priority. */
export interface ProbeRow extends Group {
  readonly nextUs: number
}

/** One migration: statements run on the `SqlClient` of its context. */
export type Migration = Effect.Effect<void, unknown, SqlClient.SqlClient>

/** A paused job name. */
/** The concurrency limits a claim applies to one job name (undefined: no such limit). */
export interface NameLimits {
  /** At most this many attempts of the name running, everywhere. */
  readonly running: number | undefined
  /** At most this many attempts of one concurrency key of the name running, everywhere. */
  readonly runningPerKey: number | undefined
  /** At most this many attempts of the name start per window, everywhere. */
  readonly rate?: RateWindow | undefined
  /** At most this many attempts of one concurrency key of the name start per window, everywhere. */
  readonly ratePerKey?: RateWindow | undefined
  /**
   * The name's jobs carry a concurrency key (`limits.key`): its claims take them round-robin
   * across the keys (`driver/fairShares.ts`).
   */
  readonly fair?: boolean | undefined
}

/** A rate limit as a claim applies it: `starts` per fixed window of `perMs` ms, aligned to the epoch. */
export interface RateWindow {
  readonly starts: number
  readonly perMs: number
}

/**
 * What a claim of names under a rate limit took, and what it held back: each name that may start
 * no attempt before an instant (µs since the epoch: its window is used up, or a `RateLimited` holds
 * it), and the earliest instant a concurrency key it left out is admitted again.
 */
export interface RatedClaim {
  readonly claimed: ReadonlyArray<ClaimedRow>
  readonly heldUntilUs: ReadonlyMap<string, number>
  readonly keyWakeUs: number | undefined
  /**
   * The earliest instant a key the claim knows to be held back is admitted again: a key's hold, or
   * the end of a key's window the claim used up (`keyWakeUs` may be earlier: it also wakes for keys
   * the claim's reads may have left out).
   */
  readonly keyAdmitsUs: number | undefined
}

/**
 * A job name's own window row of `<prefix>rates` (key ''), as `sqlane status` reads it: the window
 * a claim last counted in (µs since the epoch; 0 when no claim of a `rate` counted yet), the starts
 * counted in it, and the end of a hold of the name (`RateLimited` scope "name"), if any.
 */
export interface RateNameRow {
  readonly name: string
  readonly windowUs: number
  readonly starts: number
  readonly blockedUntilUs: number | null
}

/** What one batch of `ratePrune` did: rows read (in key order), rows deleted, and the last key read. */
export interface RatePruneBatch {
  readonly scanned: number
  readonly deleted: number
  /** The greatest key read, where the next batch starts (undefined when none was read). */
  readonly lastKey: string | undefined
}

/** A row of `<prefix>limits`: limits set at run time (null: the job definition's). */
export interface LimitRow {
  readonly name: string
  readonly running: number | null
  readonly runningPerKey: number | null
  readonly rate: RateWindow | null
  readonly ratePerKey: RateWindow | null
  readonly updatedAtUs: number
}

/**
 * What `limitSet` changes in a name's run-time limits: a value sets it, `null` removes it (the
 * definition's applies), `undefined` keeps the row's.
 */
export interface LimitChanges {
  readonly running?: number | null | undefined
  readonly runningPerKey?: number | null | undefined
  readonly rate?: RateWindow | null | undefined
  readonly ratePerKey?: RateWindow | null | undefined
}

/** The slots of a job name's limits held now: by its running attempts, and by how many keys. */
export interface LimitUseRow {
  readonly name: string
  /** Running attempts that hold a slot of the name's limit. */
  readonly running: number
  /** Running attempts that hold a slot of their key's limit. */
  readonly runningKeyed: number
  /** Keys with at least one of those. */
  readonly keys: number
  /** The key with the most of those, and how many (undefined: none). */
  readonly busiestKey: string | undefined
  readonly busiestKeyRunning: number
}

export interface PausedRow {
  readonly name: string
  readonly pausedAtUs: number
}

/** Filters of `jobList`. */
export interface JobListFilter {
  readonly name?: string | undefined
  readonly state?: string | undefined
  readonly beforeId?: string | undefined
  /** Only the job of this id. */
  readonly id?: string | undefined
  /** Only jobs holding this unique key (`unique_key`). */
  readonly uniqueKey?: string | undefined
  /** Only jobs created at or after this time (µs). */
  readonly createdFromUs?: number | undefined
  /** Only jobs created before this time (µs). */
  readonly createdBeforeUs?: number | undefined
  readonly limit: number
}

/** A row of `<prefix>workers`, as `workerList` reads it. Times are µs. */
export interface WorkerRow {
  readonly id: string
  readonly host: string
  readonly pid: number
  readonly startedAtUs: number
  readonly heartbeatAtUs: number
  /** The job names it has handlers for (JSON text of an array), if it published them. */
  readonly jobNames: string | null
}

/** What a worker's row says of it from its start (`workerRegister`); `startedAtUs` in µs. */
export interface WorkerStart {
  readonly startedAtUs: number
  readonly host: string
  readonly pid: number
  readonly jobNames: ReadonlyArray<string>
  readonly jobLimits: ReadonlyMap<string, NameLimits>
}

/** A row of `<prefix>schedules`, as `scheduleList` reads it. Times are µs. */
export interface ScheduleRow {
  readonly name: string
  /** The latest tick enqueued; `null` when none was yet (the row of a first tick being written). */
  readonly lastTickUs: number | null
  readonly updatedAtUs: number
  /** What the latest scheduler of the name described (`scheduleDescribe`); null before any did. */
  readonly jobName: string | null
  readonly expression: string | null
  readonly timeZone: string | null
  readonly nextTickUs: number | null
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
 * One row of `<prefix>stats`: what the workers of every process counted for a job name in one UTC
 * minute. Written by adding (`statsAdd`: each process adds what it counted since its last flush).
 */
export interface StatsMinuteRow {
  readonly name: string
  /** The start of the minute (µs since the epoch, a multiple of 60,000,000). */
  readonly minuteUs: number
  /** Attempts whose success was written. */
  readonly completed: number
  /** Attempts whose failure was written (retried or dead-lettered). */
  readonly failed: number
  /**
   * Attempts started, by pickup latency: `pickup[i]` counts those of at most `pickupBoundsMs[i]` ms
   * (and more than the bound before it); the last entry, one past the bounds, those above the last
   * bound (driver/shared.ts).
   */
  readonly pickup: ReadonlyArray<number>
}
