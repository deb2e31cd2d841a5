/**
 * Settings shared by every sqlane service of one `QueueLive`.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Option from "effect/Option"
import { durationMillis } from "../internal/options.js"
import * as Layer from "effect/Layer"

/**
 * The settings of a `QueueLive`: its `QueueOptions` with the defaults filled in.
 *
 * @example
 * ```ts
 * const config = yield* QueueConfig.QueueConfig
 * yield* Effect.log(`jobs table: ${config.prefix}jobs, polled every ${Duration.format(config.pollInterval)}`)
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface QueueConfigShape {
  /** Prefix of sqlane's tables, e.g. `sqlane_` gives `sqlane_jobs` and `sqlane_migrations`. */
  readonly prefix: string
  /** How often an idle worker probes for due jobs when nothing woke it (jittered ±20 %). */
  readonly pollInterval: Duration.Duration
  /**
   * After an enqueue inside a caller's transaction, whose commit sqlane cannot observe,
   * workers in this process re-probe after this delay.
   */
  readonly hintDelay: Duration.Duration
  /** Whether `QueueLive` runs sqlane's migrations when it starts. */
  readonly migrate: boolean
  /** How often a worker writes its heartbeat. */
  readonly heartbeatInterval: Duration.Duration
  /**
   * A worker whose heartbeat is older than this is presumed lost (a frozen host, a partition) and
   * its running jobs are rescued. The backstop behind the session-lock check.
   */
  readonly leaseTimeout: Duration.Duration
  /** How often a worker looks for jobs of lost workers (and, on MySQL/MariaDB, for cancellations). */
  readonly rescueInterval: Duration.Duration
  /** How long finished jobs are kept, per state, before the pruner deletes them (by `finished_at`). */
  readonly retention: Retention
  /** Whether `QueueLive` prunes finished jobs in the background. */
  readonly prune: boolean
  /** How often the pruner runs (jittered ±20 %). */
  readonly pruneInterval: Duration.Duration
  /** The most jobs one pruning statement deletes. */
  readonly pruneBatchSize: number
  /** PostgreSQL: whether a claim waits for its WAL flush (see `QueueOptions.durableClaims`). */
  readonly durableClaims: boolean
  /**
   * MySQL/MariaDB: how often the notifier reads the newest job id to learn of other processes'
   * enqueues (see `QueueOptions.insertCheckInterval`); infinite: never.
   */
  readonly insertCheckInterval: Duration.Duration
  /**
   * How often this process adds what its workers counted to the per-minute stats (`<prefix>stats`,
   * see `QueueOptions.statsInterval`); infinite: never (nothing is counted).
   */
  readonly statsInterval: Duration.Duration
}

/**
 * How long finished jobs are kept, per state.
 *
 * @example
 * ```ts
 * const { retention } = yield* QueueConfig.QueueConfig
 * const keepsCompleted = Duration.greaterThan(retention.completed, Duration.zero)
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface Retention {
  readonly completed: Duration.Duration
  readonly dead: Duration.Duration
  readonly cancelled: Duration.Duration
}

/**
 * The settings of the `QueueLive` in scope. Provided by `QueueLive`.
 *
 * @example
 * ```ts
 * const prefix = Effect.map(QueueConfig.QueueConfig, (config) => config.prefix) // "sqlane_" by default
 * ```
 *
 * @since 0.1.0
 * @category tags
 */
export class QueueConfig extends Context.Tag("sqlane/QueueConfig")<QueueConfig, QueueConfigShape>() {}

/**
 * Options accepted by `QueueLive` and {@link make}. Durations take any `Duration.DurationInput`
 * (`"5 seconds"`, `Duration.millis(20)`, a number of milliseconds).
 *
 * @example
 * ```ts
 * const AppLive = QueueLive({
 *   prefix: "jobs_",
 *   pollInterval: "10 seconds",
 *   retention: { completed: "1 hour", dead: "30 days" },
 *   migrate: false // run `sqlane migrate` at deploy time instead
 * }).pipe(Layer.provideMerge(ClientLive))
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface QueueOptions {
  /**
   * Table prefix, a plain identifier: lowercase letters, digits and `_`, at most 40 characters
   * (PostgreSQL folds unquoted names to lowercase, and the migrator looks its table up unquoted).
   * Default `"sqlane_"`.
   */
  readonly prefix?: string | undefined
  /** Default 5 seconds. */
  readonly pollInterval?: Duration.DurationInput | undefined
  /** Default 20 ms. */
  readonly hintDelay?: Duration.DurationInput | undefined
  /**
   * Whether `QueueLive` runs sqlane's migrations when it starts. Default `true`. With `false` (tables
   * migrated by `sqlane migrate` or `Migrations.run`), `QueueLive` fails with `SchemaNotMigrated` when
   * a migration this version knows is not applied.
   */
  readonly migrate?: boolean | undefined
  /** Default 5 seconds. */
  readonly heartbeatInterval?: Duration.DurationInput | undefined
  /** Default 30 seconds. */
  readonly leaseTimeout?: Duration.DurationInput | undefined
  /** Default 500 ms. */
  readonly rescueInterval?: Duration.DurationInput | undefined
  /**
   * How long finished jobs are kept after `finished_at`. Defaults: completed 1 day, dead 7 days,
   * cancelled 7 days. `completed: 0` deletes a completed job's row with the write of its end
   * (BullMQ's `removeOnComplete: true`): less write work per job, no completed rows (`Queue.get`
   * fails with `JobNotFound`, the result is not kept), except for a job whose unique key is guarded
   * while completed, which is kept until the next prune pass (within `pruneInterval`).
   */
  readonly retention?: {
    readonly completed?: Duration.DurationInput | undefined
    readonly dead?: Duration.DurationInput | undefined
    readonly cancelled?: Duration.DurationInput | undefined
  } | undefined
  /** Whether `QueueLive` prunes finished jobs in the background (one pruner per process). Default `true`. */
  readonly prune?: boolean | undefined
  /** Default 1 minute (jittered ±20 %). */
  readonly pruneInterval?: Duration.DurationInput | undefined
  /** A positive integer, at most 50,000 (larger values are lowered to it). Default 1000. */
  readonly pruneBatchSize?: number | undefined
  /**
   * PostgreSQL: whether a claim's commit waits for the WAL flush, as every other write does.
   * Default `false`: a claim commits with `synchronous_commit = off` (for its own transaction
   * only), so a job's round — claim, run, end written — waits for one flush instead of two
   * (a flush takes 1–2 ms on the machine of docs/performance.md). The cost: if the database server crashes
   * (a crash, not a clean shutdown or restart) within about 3 × `wal_writer_delay` (600 ms by
   * default) of a claim, that claim may be lost, and the job is pending again and runs again — the
   * at-least-once outcome of a worker crash. A later synchronous commit — the attempt's end, or any
   * write the handler commits in the same database — flushes the claim with it, so a job whose
   * handler wrote to the database is never run again this way. MySQL/MariaDB have no per-transaction
   * setting: their claims always follow `innodb_flush_log_at_trx_commit`.
   */
  readonly durableClaims?: boolean | undefined
  /**
   * MySQL/MariaDB only (PostgreSQL is woken by `LISTEN/NOTIFY`). Default 100 ms, at least 10 ms;
   * `Duration.infinity` turns the check off. MySQL and MariaDB have no `LISTEN/NOTIFY`, so a worker
   * learns of a job enqueued by another process from its poll (`pollInterval`). With this check, one
   * fiber per `QueueLive` that runs workers reads the newest job id (`SELECT MAX(id)`) this often, and
   * when it changed wakes every worker of this `QueueLive` to probe: such a job starts within about
   * this long. Costs:
   * - one query per interval per `QueueLive` with workers (10 per second by default), busy or idle;
   * - while jobs are being enqueued (by any process, this one too), up to one extra probe per worker
   *   per interval, whatever job names the worker handles;
   * - `MAX(id)` is usually one read of the primary key's last entry, but while another transaction
   *   holds many uncommitted inserted rows it walks back over them (about 20 ms per reading with
   *   200,000 such rows on MariaDB 10.11).
   *
   * A job whose id is below one already seen when its transaction commits (a long transaction, or two
   * enqueues committing out of id order) is found by the poll instead.
   *
   * Source: Solid Queue's workers poll every 0.1 s by default (`polling_interval`).
   */
  readonly insertCheckInterval?: Duration.DurationInput | undefined
  /**
   * Default 5 seconds, at least 100 ms; `Duration.infinity` turns the stats off. The workers of a
   * `QueueLive` count, per job name and UTC minute, the attempts completed, the attempts failed, and
   * the pickup latency of the attempts started (the value of `sqlane_job_pickup_latency_ms`, in
   * fixed buckets), in memory; this often (and when the `QueueLive` closes) the counts are added to
   * the table `<prefix>stats` in one statement, which every process adds to (the dashboard's
   * `GET /api/stats` reads it). A process that crashes loses what it counted since its last flush.
   * A flush that fails is logged, and its counts are kept for the next (the newest 10,000 (name,
   * minute) rows at most). The Pruner deletes rows older than 24 hours.
   */
  readonly statsInterval?: Duration.DurationInput | undefined
}

/**
 * The largest `pruneBatchSize` honoured (larger values are lowered to it): on MySQL/MariaDB a
 * batch's delete binds one placeholder per id, and a prepared statement takes at most 65,535.
 *
 * @example
 * ```ts
 * const batch = Math.min(wanted, QueueConfig.maxPruneBatchSize)
 * ```
 *
 * @since 0.1.0
 * @category constants
 */
export const maxPruneBatchSize = 50_000

/**
 * Fills in the defaults. Throws on a prefix that is not a plain identifier (checked again,
 * as a typed `SetupError`, when `QueueLive` is built).
 *
 * @example
 * ```ts
 * const config = QueueConfig.make({ prefix: "jobs_" })
 * config.pollInterval // Duration of 5 seconds: the default
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: QueueOptions = {}): QueueConfigShape => ({
  prefix: options.prefix ?? "sqlane_",
  pollInterval: Duration.decode(options.pollInterval ?? "5 seconds"),
  hintDelay: Duration.decode(options.hintDelay ?? "20 millis"),
  migrate: options.migrate ?? true,
  heartbeatInterval: Duration.decode(options.heartbeatInterval ?? "5 seconds"),
  leaseTimeout: Duration.decode(options.leaseTimeout ?? "30 seconds"),
  rescueInterval: Duration.decode(options.rescueInterval ?? "500 millis"),
  retention: {
    completed: Duration.decode(options.retention?.completed ?? "1 day"),
    dead: Duration.decode(options.retention?.dead ?? "7 days"),
    cancelled: Duration.decode(options.retention?.cancelled ?? "7 days")
  },
  prune: options.prune ?? true,
  pruneInterval: Duration.decode(options.pruneInterval ?? "1 minute"),
  pruneBatchSize: Number.isFinite(options.pruneBatchSize) ? Math.min(maxPruneBatchSize, Math.max(1, Math.floor(options.pruneBatchSize!)))
    : 1000,
  durableClaims: options.durableClaims ?? false,
  insertCheckInterval: Duration.decode(options.insertCheckInterval ?? "100 millis"),
  statsInterval: Duration.decode(options.statsInterval ?? "5 seconds")
})

/**
 * The `QueueConfig` service as a layer, from options (defaults filled in); `QueueLive` includes it.
 *
 * @example
 * ```ts
 * // What QueueLive does with its options; a test can provide settings alone
 * const ConfigLive = QueueConfig.layer({ prefix: "test_", pollInterval: "1 hour" })
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: QueueOptions = {}): Layer.Layer<QueueConfig> =>
  Layer.succeed(QueueConfig, make(options))

/**
 * Why `options` cannot run, or `undefined`: every duration must decode and be finite (retention,
 * `insertCheckInterval` and `statsInterval` may be infinite), the intervals longer than 0
 * (`insertCheckInterval` at least 10 ms, `statsInterval` at least 100 ms), and `leaseTimeout` longer than twice `heartbeatInterval` — a lease shorter than the
 * heartbeat makes live workers look lost between heartbeats, and their running jobs are taken and run
 * again while they still run. `QueueLive` fails with a `SetupError` carrying this message.
 *
 * @internal
 */
export const optionsProblem = (options: QueueOptions): string | undefined => {
  const millis: Record<string, number> = {}
  // Retention may be infinite ("keep forever"); the intervals and the lease must be finite.
  const durations: Array<readonly [string, unknown, "positive" | "non-negative" | "retention" | "positive-or-off"]> = [
    ["pollInterval", options.pollInterval ?? "5 seconds", "positive"],
    ["hintDelay", options.hintDelay ?? "20 millis", "non-negative"],
    ["heartbeatInterval", options.heartbeatInterval ?? "5 seconds", "positive"],
    ["leaseTimeout", options.leaseTimeout ?? "30 seconds", "positive"],
    ["rescueInterval", options.rescueInterval ?? "500 millis", "positive"],
    ["pruneInterval", options.pruneInterval ?? "1 minute", "positive"],
    ["insertCheckInterval", options.insertCheckInterval ?? "100 millis", "positive-or-off"],
    ["statsInterval", options.statsInterval ?? "5 seconds", "positive-or-off"],
    ["retention.completed", options.retention?.completed ?? "1 day", "retention"],
    ["retention.dead", options.retention?.dead ?? "7 days", "retention"],
    ["retention.cancelled", options.retention?.cancelled ?? "7 days", "retention"]
  ]
  for (const [name, input, sign] of durations) {
    // A negative number of milliseconds would be read as 0 by Effect: refused as written.
    if ((sign === "retention" || sign === "positive-or-off") && Option.exists(Duration.decodeUnknown(input), (d) => !Duration.isFinite(d))) continue
    const d = typeof input === "number" && input < 0 ? { problem: `must not be negative, got ${input}` } : durationMillis(input)
    if ("problem" in d) return `${name} ${d.problem}`
    if ((sign === "positive" || sign === "positive-or-off") && d.millis <= 0) return `${name} must be longer than 0`
    millis[name] = d.millis
  }
  if (millis.insertCheckInterval !== undefined && millis.insertCheckInterval < 10) {
    return `insertCheckInterval must be at least 10 ms (or Duration.infinity: off), got ${millis.insertCheckInterval} ms`
  }
  if (millis.statsInterval !== undefined && millis.statsInterval < 100) {
    return `statsInterval must be at least 100 ms (or Duration.infinity: off), got ${millis.statsInterval} ms`
  }
  if (millis.leaseTimeout <= 2 * millis.heartbeatInterval) {
    return `leaseTimeout (${millis.leaseTimeout} ms) must be longer than twice heartbeatInterval ` +
      `(${millis.heartbeatInterval} ms): live workers would look lost between heartbeats`
  }
  return undefined
}

/** @internal */
export const isValidPrefix = (prefix: string): boolean => /^[a-z_][a-z0-9_]{0,39}$/.test(prefix)
