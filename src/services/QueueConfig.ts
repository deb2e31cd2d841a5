/**
 * Settings shared by every sqlane service of one `QueueLive`.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Layer from "effect/Layer"

/**
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
}

/**
 * @since 0.1.0
 * @category tags
 */
export class QueueConfig extends Context.Tag("sqlane/QueueConfig")<QueueConfig, QueueConfigShape>() {}

/**
 * Options accepted by `QueueLive` and {@link make}. Durations take any `Duration.DurationInput`
 * (`"5 seconds"`, `Duration.millis(20)`, a number of milliseconds).
 *
 * @since 0.1.0
 * @category models
 */
export interface QueueOptions {
  /** Table prefix, a plain identifier: letters, digits and `_`, at most 40 characters. Default `"sqlane_"`. */
  readonly prefix?: string | undefined
  /** Default 5 seconds. */
  readonly pollInterval?: Duration.DurationInput | undefined
  /** Default 20 ms. */
  readonly hintDelay?: Duration.DurationInput | undefined
  /** Default `true`. */
  readonly migrate?: boolean | undefined
  /** Default 5 seconds. */
  readonly heartbeatInterval?: Duration.DurationInput | undefined
  /** Default 30 seconds. */
  readonly leaseTimeout?: Duration.DurationInput | undefined
  /** Default 500 ms. */
  readonly rescueInterval?: Duration.DurationInput | undefined
}

/**
 * Fills in the defaults. Throws on a prefix that is not a plain identifier (checked again,
 * as a typed `SetupError`, when `QueueLive` is built).
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
  rescueInterval: Duration.decode(options.rescueInterval ?? "500 millis")
})

/**
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: QueueOptions = {}): Layer.Layer<QueueConfig> =>
  Layer.succeed(QueueConfig, make(options))

/** @internal */
export const isValidPrefix = (prefix: string): boolean => /^[A-Za-z_][A-Za-z0-9_]{0,39}$/.test(prefix)
