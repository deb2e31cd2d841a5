/**
 * Retention: deletes finished jobs older than their state's retention window (`QueueConfig.retention`:
 * completed 1 day, dead 7 days, cancelled 7 days by default, counted from `finished_at`).
 *
 * Each statement deletes at most `pruneBatchSize` jobs, oldest first, through the
 * `(state, finished_at)` index (on PostgreSQL, completed jobs in id order through the ids created
 * before the cutoff), so a pass stays cheap however many finished rows the table holds
 * and never holds locks for long. At most one pruner runs at a time per table prefix across every
 * process: a pass holds a session lock (`pg_try_advisory_lock` / `GET_LOCK`) on a reserved
 * connection, and a pass that finds it taken does nothing. A pass runs its statements on that one
 * connection (each in its own autocommit transaction).
 *
 * A pass also deletes old rows of the rate windows (`<prefix>rates`: one per job name and one per
 * concurrency key a claim of a rated name ever counted or a `RateLimited` ever held): for each name
 * whose rates the workers publish or a run-time limit sets, the rows whose window began more than
 * its longest period plus {@link rateRowGraceMillis} ago and whose hold ended that long ago,
 * `pruneBatchSize` keys of the name read per statement. A deleted row's window was over: the next
 * claim of its key starts a new one.
 *
 * A pass also deletes the rows of the per-minute stats (`<prefix>stats`) whose minute began more than
 * {@link statsRetentionMillis} ago, `pruneBatchSize` rows per statement from the start of its
 * primary key (the oldest minutes).
 *
 * Every `QueueLive` runs {@link background} (unless `prune: false`): one pruning loop per process and
 * prefix, however many workers it runs; `sqlane prune` runs {@link run} once.
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import { Database } from "../internal/Database.js"
import type { Driver, RateWindow } from "../internal/driver/Driver.js"
import { forkScopedBounded } from "../internal/outage.js"
import { nameKey } from "../internal/pauses.js"
import { stepper } from "../internal/schedule.js"
import { nowMicros } from "../internal/time.js"
import { wallSleep } from "../internal/wallClock.js"
import * as QueueConfigModule from "./QueueConfig.js"
import { QueueConfig } from "./QueueConfig.js"

/**
 * The largest `pruneBatchSize` honoured: larger values are lowered to it. On MySQL/MariaDB a batch's
 * delete binds one placeholder per id, and a prepared statement takes at most 65,535.
 *
 * @example
 * ```ts
 * const batchSize = Math.min(requested, Pruner.maxBatchSize)
 * ```
 *
 * @since 0.1.0
 * @category pruning
 */
export const maxBatchSize: number = QueueConfigModule.maxPruneBatchSize

/**
 * How long past its rate's longest period a window row of `<prefix>rates` is kept (1 hour, in ms):
 * a row whose window began more than the name's longest period (`rate` or `ratePerKey`, as the
 * workers publish them or a run-time limit sets them) plus this ago, and whose `RateLimited` hold
 * ended as long ago, is deleted by a pruning pass. The margin covers workers whose clocks run
 * behind (a claim counts into the window of its own clock).
 *
 * @example
 * ```ts
 * // A key whose last start was in the window 12:00:00–12:00:01 (per 1 second) may be pruned after 13:00:01.
 * const keptUntilMs = windowStartMs + perMs + Pruner.rateRowGraceMillis
 * ```
 *
 * @since 0.3.0
 * @category pruning
 */
export const rateRowGraceMillis: number = 3_600_000

/**
 * How long the rows of the per-minute stats (`<prefix>stats`) are kept (24 hours, in ms): a pruning
 * pass deletes the rows whose minute began longer ago than this (by Effect's `Clock`).
 *
 * @example
 * ```ts
 * // The oldest minute a pass keeps
 * const keptFromMs = Date.now() - Pruner.statsRetentionMillis
 * ```
 *
 * @since 0.4.0
 * @category pruning
 */
export const statsRetentionMillis: number = 86_400_000

/**
 * What one pruning pass did.
 *
 * @example
 * ```ts
 * const result = yield* Pruner.run
 * if (result.ran) yield* Effect.log(`pruned ${result.deleted.completed} completed job(s) in ${result.batches} batch(es)`)
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface PruneResult {
  /** `false` when another pruner held the lock: this pass deleted nothing. */
  readonly ran: boolean
  /** Jobs deleted, per state. */
  readonly deleted: { readonly completed: number; readonly dead: number; readonly cancelled: number }
  /** Delete statements run. */
  readonly batches: number
  /** The most jobs one statement deleted (at most `pruneBatchSize`). */
  readonly largestBatch: number
  /** Rows of the rate windows (`<prefix>rates`) deleted (see {@link rateRowGraceMillis}). */
  readonly rateRows: number
  /** Rows of the per-minute stats (`<prefix>stats`) deleted (see {@link statsRetentionMillis}). */
  readonly statsRows: number
}

/**
 * One pruning pass: for each finished state, deletes in batches every job finished before
 * now (Effect's `Clock`) minus its retention, until none is left. Returns at once with
 * `ran: false` when another process (or fiber) is pruning the same tables.
 *
 * @example
 * ```ts
 * // One pass now, with the retention of the QueueLive in scope (QueueLive({ prune: false }) turns the background one off)
 * const result = yield* Pruner.run
 * ```
 *
 * @since 0.1.0
 * @category pruning
 */
export const run: Effect.Effect<PruneResult, SqlError, SqlClient.SqlClient | Database | QueueConfig> = Effect.gen(
  function*() {
    const sql = yield* SqlClient.SqlClient
    const config = yield* QueueConfig
    const { driver } = yield* Database
    const { lock, unlock } = driver.prunerLock
    const conn = yield* sql.reserve
    // Taking the lock and registering its release are one uninterruptible step: interrupted in
    // between (a worker shutting down), the connection would go back to the pool still holding
    // the session lock, and no process would prune again while that connection lives. The release
    // is a finalizer of this scope, added after the reserve's, so it runs before the connection
    // goes back to the pool.
    const got = yield* Effect.uninterruptible(Effect.gen(function*() {
      const rows = yield* conn.executeValues(lock[0], lock[1])
      const value = rows[0]?.[0]
      const taken = value === true || Number(value) === 1
      if (taken) yield* Effect.addFinalizer(() => Effect.ignore(conn.executeRaw(unlock[0], unlock[1])))
      return taken
    }))
    if (!got) {
      return {
        ran: false,
        deleted: { completed: 0, dead: 0, cancelled: 0 },
        batches: 0,
        largestBatch: 0,
        rateRows: 0,
        statsRows: 0
      }
    }
    return yield* Effect.gen(function*() {
      const nowUs = yield* nowMicros
      const deleted = { completed: 0, dead: 0, cancelled: 0 }
      let batches = 0
      let largestBatch = 0
      for (const state of ["completed", "dead", "cancelled"] as const) {
        const keepMs = Duration.toMillis(config.retention[state])
        if (!Number.isFinite(keepMs)) continue
        const cutoffUs = nowUs - Math.round(keepMs * 1000)
        while (true) {
          const n = yield* driver.jobPruneFinished(state, cutoffUs, config.pruneBatchSize)
          batches++
          largestBatch = Math.max(largestBatch, n)
          deleted[state] += n
          if (n < config.pruneBatchSize) break
          yield* Effect.yieldNow()
        }
      }
      const rateRows = yield* pruneRates(driver, nowUs, config.pruneBatchSize)
      const statsRows = yield* pruneStats(driver, nowUs - statsRetentionMillis * 1000, config.pruneBatchSize)
      return { ran: true, deleted, batches, largestBatch, rateRows, statsRows }
    }).pipe(
      // Every statement of the pass runs on the lock's connection (autocommit, one statement or two
      // per batch): a pass uses one connection of the pool, never waits for a second one.
      Effect.provideService(SqlClient.TransactionConnection, [conn, 0] as const)
    )
  }
).pipe(Effect.scoped)

/**
 * Deletes the old window rows of every name whose rates the workers' rows publish or a run-time
 * limit sets (see {@link rateRowGraceMillis}; the longest of their periods), reading `batchSize`
 * keys of a name per statement, in key order; returns how many it deleted. The rows of a name with
 * neither are kept: their period is not known.
 */
const pruneRates = (driver: Driver, nowUs: number, batchSize: number): Effect.Effect<number, SqlError> =>
  Effect.gen(function*() {
    // Names compared as the rates table compares them (PAD SPACE on MySQL/MariaDB).
    const key = nameKey(driver.capabilities.padSpaceKeys)
    const periods = new Map<string, { name: string; periodMs: number }>()
    type Rates = { readonly rate?: RateWindow | null | undefined; readonly ratePerKey?: RateWindow | null | undefined }
    const add = (name: string, limits: Rates) => {
      const seen = periods.get(key(name))
      const periodMs = Math.max(limits.rate?.perMs ?? 0, limits.ratePerKey?.perMs ?? 0, seen?.periodMs ?? 0)
      periods.set(key(name), { name: seen?.name ?? name, periodMs })
    }
    for (const [name, limits] of yield* driver.workerJobLimits(0)) add(name, limits)
    for (const row of yield* driver.limitList()) add(row.name, row)
    let deleted = 0
    for (const { name, periodMs } of periods.values()) {
      if (periodMs === 0) continue
      const cutoffUs = nowUs - (periodMs + rateRowGraceMillis) * 1000
      let afterKey: string | undefined
      while (true) {
        const batch = yield* driver.ratePrune(name, cutoffUs, afterKey, batchSize)
        deleted += batch.deleted
        if (batch.scanned < batchSize || batch.lastKey === undefined) break
        afterKey = batch.lastKey
        yield* Effect.yieldNow()
      }
    }
    return deleted
  })

/** Deletes the stats rows of the minutes before `cutoffUs`, `batchSize` per statement; returns how many it deleted. */
const pruneStats = (driver: Driver, cutoffUs: number, batchSize: number): Effect.Effect<number, SqlError> =>
  Effect.gen(function*() {
    let deleted = 0
    while (true) {
      const n = yield* driver.statsPrune(cutoffUs, batchSize)
      deleted += n
      if (n < batchSize) return deleted
      yield* Effect.yieldNow()
    }
  })

/**
 * Runs {@link run} every `pruneInterval` (jittered ±20 %) of wall-clock time, forever; failures are
 * logged and the next pass runs on schedule. Started by `QueueLive` ({@link layer}) unless `prune: false`.
 *
 * @example
 * ```ts
 * // What Pruner.layer runs: a pass every pruneInterval, forever
 * const pruning = Effect.forkScoped(Pruner.background)
 * ```
 *
 * @since 0.1.0
 * @category pruning
 */
export const background: Effect.Effect<never, never, SqlClient.SqlClient | Database | QueueConfig> = Effect.gen(
  function*() {
    const config = yield* QueueConfig
    const { reachability } = yield* Database
    const delay = stepper(Schedule.spaced(config.pruneInterval).pipe(Schedule.jittered))
    while (true) {
      const ms = Option.getOrElse(yield* delay(Date.now()), () => Duration.toMillis(config.pruneInterval))
      // Wall-clock time: under TestClock, `adjust` does not replay pruning passes (the cutoffs
      // still follow Effect's Clock).
      yield* wallSleep(Math.max(1, Math.round(ms)))
      const result = yield* run.pipe(
        Effect.catchAllCause((cause) => Effect.as(reachability.failed("pruner", "sqlane: pruning failed", cause), undefined))
      )
      const total = result === undefined ? 0 : result.deleted.completed + result.deleted.dead + result.deleted.cancelled
      if (total > 0) {
        yield* Effect.logDebug(
          `sqlane: pruned ${total} finished job(s) in ${result!.batches} batch(es)`
        )
      }
      if (result !== undefined && result.rateRows > 0) {
        yield* Effect.logDebug(`sqlane: pruned ${result.rateRows} rate window row(s)`)
      }
      if (result !== undefined && result.statsRows > 0) {
        yield* Effect.logDebug(`sqlane: pruned ${result.statsRows} per-minute stats row(s)`)
      }
    }
  }
).pipe(Effect.annotateLogs({ package: "sqlane", module: "Pruner" }))

/**
 * {@link background} for the life of the layer, when `prune` is on; stops within 100 ms at close.
 *
 * @example
 * ```ts
 * // QueueLive includes it unless `prune: false`
 * const AppLive = QueueLive({ retention: { completed: "1 hour" } }).pipe(Layer.provideMerge(ClientLive))
 * ```
 *
 * @since 0.1.0
 * @category pruning
 */
export const layer: Layer.Layer<never, never, SqlClient.SqlClient | Database | QueueConfig> = Layer.scopedDiscard(
  Effect.flatMap(QueueConfig, (config) => config.prune ? forkScopedBounded(background, 100) : Effect.void)
)
