/**
 * sqlane's metrics, kept in Effect's metric registry (read them with `Metric.snapshot`, or export
 * them with `@effect/opentelemetry`'s metrics layer; see docs/observability.md). Every metric is
 * tagged `job_name`. Counters count since the process started; histograms are in milliseconds.
 *
 * | Metric | Kind | Counted when |
 * |---|---|---|
 * | `sqlane_jobs_enqueued` | counter | a job is written by `enqueue`/`enqueueMany`/`insert` (not a unique duplicate) |
 * | `sqlane_jobs_claimed` | counter | a worker of this process claims a job |
 * | `sqlane_jobs_completed` | counter | an attempt's success is written |
 * | `sqlane_jobs_failed` | counter | an attempt's failure is written (typed failure, defect, bad payload, timeout, lost worker) |
 * | `sqlane_jobs_retried` | counter | a failed attempt is rescheduled |
 * | `sqlane_jobs_dead` | counter | a job is dead-lettered |
 * | `sqlane_job_pickup_latency_ms` | histogram | an attempt starts: start time − the job's `run_at` (or its creation, if later) |
 * | `sqlane_job_run_duration_ms` | histogram | an attempt's handler ends: its run time |
 * | `sqlane_jobs_due` | gauge | every `heartbeatInterval`, per job name a worker handles: its due jobs (counted up to 10,000) |
 * | `sqlane_limit_running` | gauge | every `heartbeatInterval`, per job name under a concurrency limit a worker handles: the limit |
 * | `sqlane_limit_in_use` | gauge | the same: the attempts of the name that hold a slot of its limit, in every process |
 * | `sqlane_jobs_held_back` | gauge | the same: its due jobs while every slot of its limit is in use (else 0) |
 * | `sqlane_jobs_held_back_by_key` | gauge | every `heartbeatInterval`, per job name under a per-key concurrency limit (`runningPerKey`) a worker handles: of its due jobs (the first 10,000 read), those whose key has every slot of that limit in use |
 * | `sqlane_jobs_held_back_by_rate` | gauge | every `heartbeatInterval`, per job name under a rate limit a worker handles: its due jobs while its current window of `rate` is used up or a `RateLimited` holds the name (else 0) |
 *
 * The names are Prometheus-style (the `sqlane_` namespace, the unit in the name); the histograms also
 * carry a `unit` tag (`ms`), which `@effect/opentelemetry` exports as the instrument's unit. River and
 * Oban report the same events through telemetry hooks.
 *
 * @since 0.1.0
 */
import * as Metric from "effect/Metric"
import * as MetricBoundaries from "effect/MetricBoundaries"
import * as MetricKey from "effect/MetricKey"
import type * as MetricKeyType from "effect/MetricKeyType"
import * as MetricLabel from "effect/MetricLabel"

/**
 * The tag every sqlane metric carries: the job name.
 *
 * @example
 * ```ts
 * // Read one job name's counter from a snapshot of the metric registry
 * const completed = Metric.value(Metrics.jobsCompleted.pipe(Metric.tagged(Metrics.jobNameTag, "send-email")))
 * ```
 *
 * @since 0.1.0
 * @category tags
 */
export const jobNameTag = "job_name"

const millis = MetricBoundaries.exponential({ start: 0.5, factor: 2, count: 24 })
const unitMs = MetricLabel.make("unit", "ms")

/** The metric keys, untagged by job name. */
const keys = {
  enqueued: MetricKey.counter("sqlane_jobs_enqueued", {
    description: "Jobs written by enqueue, enqueueMany or insert",
    incremental: true
  }),
  claimed: MetricKey.counter("sqlane_jobs_claimed", {
    description: "Jobs claimed by the workers of this process",
    incremental: true
  }),
  completed: MetricKey.counter("sqlane_jobs_completed", { description: "Attempts that succeeded", incremental: true }),
  failed: MetricKey.counter("sqlane_jobs_failed", {
    description: "Attempts that failed (typed failure, defect, bad payload, timeout, lost worker)",
    incremental: true
  }),
  retried: MetricKey.counter("sqlane_jobs_retried", {
    description: "Failed attempts rescheduled by the retry schedule",
    incremental: true
  }),
  dead: MetricKey.counter("sqlane_jobs_dead", { description: "Jobs dead-lettered", incremental: true }),
  pickupLatency: MetricKey.taggedWithLabels(
    MetricKey.histogram(
      "sqlane_job_pickup_latency_ms",
      millis,
      "From a job's run_at (or its creation, if later) to its claim, in ms"
    ),
    [unitMs]
  ),
  runDuration: MetricKey.taggedWithLabels(
    MetricKey.histogram("sqlane_job_run_duration_ms", millis, "Run time of an attempt's handler, in ms"),
    [unitMs]
  ),
  due: MetricKey.gauge("sqlane_jobs_due", {
    description: "Due jobs waiting to be claimed, per job name (counted up to 10,000)"
  }),
  limitRunning: MetricKey.gauge("sqlane_limit_running", {
    description: "The concurrency limit of a job name: attempts of it at once, in every process"
  }),
  limitInUse: MetricKey.gauge("sqlane_limit_in_use", {
    description: "Attempts of a job name holding a slot of its concurrency limit, in every process"
  }),
  heldBack: MetricKey.gauge("sqlane_jobs_held_back", {
    description: "Due jobs of a job name waiting while every slot of its concurrency limit is in use"
  }),
  heldBackByKey: MetricKey.gauge("sqlane_jobs_held_back_by_key", {
    description: "Due jobs of a job name waiting while their key has every slot of its per-key concurrency limit in use"
  }),
  heldBackByRate: MetricKey.gauge("sqlane_jobs_held_back_by_rate", {
    description: "Due jobs of a job name waiting while its rate window is used up or a RateLimited holds the name"
  })
}

/**
 * @example
 * ```ts
 * const n = yield* Metric.value(Metrics.jobsEnqueued.pipe(Metric.tagged(Metrics.jobNameTag, "send-email")))
 * yield* Effect.log(`jobs enqueued: ${n.count}`)
 * ```
 *
 * @since 0.1.0
 * @category metrics
 */
export const jobsEnqueued: Metric.Metric.Counter<number> = Metric.fromMetricKey(keys.enqueued)

/**
 * @example
 * ```ts
 * const n = yield* Metric.value(Metrics.jobsClaimed.pipe(Metric.tagged(Metrics.jobNameTag, "send-email")))
 * yield* Effect.log(`attempts claimed: ${n.count}`)
 * ```
 *
 * @since 0.1.0
 * @category metrics
 */
export const jobsClaimed: Metric.Metric.Counter<number> = Metric.fromMetricKey(keys.claimed)

/**
 * @example
 * ```ts
 * const n = yield* Metric.value(Metrics.jobsCompleted.pipe(Metric.tagged(Metrics.jobNameTag, "send-email")))
 * yield* Effect.log(`jobs completed: ${n.count}`)
 * ```
 *
 * @since 0.1.0
 * @category metrics
 */
export const jobsCompleted: Metric.Metric.Counter<number> = Metric.fromMetricKey(keys.completed)

/**
 * @example
 * ```ts
 * const n = yield* Metric.value(Metrics.jobsFailed.pipe(Metric.tagged(Metrics.jobNameTag, "send-email")))
 * yield* Effect.log(`attempts failed: ${n.count}`)
 * ```
 *
 * @since 0.1.0
 * @category metrics
 */
export const jobsFailed: Metric.Metric.Counter<number> = Metric.fromMetricKey(keys.failed)

/**
 * @example
 * ```ts
 * const n = yield* Metric.value(Metrics.jobsRetried.pipe(Metric.tagged(Metrics.jobNameTag, "send-email")))
 * yield* Effect.log(`failed attempts retried: ${n.count}`)
 * ```
 *
 * @since 0.1.0
 * @category metrics
 */
export const jobsRetried: Metric.Metric.Counter<number> = Metric.fromMetricKey(keys.retried)

/**
 * @example
 * ```ts
 * const n = yield* Metric.value(Metrics.jobsDead.pipe(Metric.tagged(Metrics.jobNameTag, "send-email")))
 * yield* Effect.log(`jobs dead-lettered: ${n.count}`)
 * ```
 *
 * @since 0.1.0
 * @category metrics
 */
export const jobsDead: Metric.Metric.Counter<number> = Metric.fromMetricKey(keys.dead)

/**
 * Tagged `unit=ms`.
 *
 * @example
 * ```ts
 * const state = yield* Metric.value(Metrics.pickupLatency.pipe(Metric.tagged(Metrics.jobNameTag, "send-email")))
 * yield* Effect.log(`${state.count} pickups, ${state.sum / state.count} ms on average`)
 * ```
 *
 * @since 0.1.0
 * @category metrics
 */
export const pickupLatency: Metric.Metric.Histogram<number> = Metric.fromMetricKey(keys.pickupLatency)

/**
 * Tagged `unit=ms`.
 *
 * @example
 * ```ts
 * const state = yield* Metric.value(Metrics.runDuration.pipe(Metric.tagged(Metrics.jobNameTag, "send-email")))
 * yield* Effect.log(`slowest attempt: ${state.max} ms`)
 * ```
 *
 * @since 0.1.0
 * @category metrics
 */
export const runDuration: Metric.Metric.Histogram<number> = Metric.fromMetricKey(keys.runDuration)

/**
 * @example
 * ```ts
 * const due = yield* Metric.value(Metrics.jobsDue.pipe(Metric.tagged(Metrics.jobNameTag, "send-email")))
 * yield* Effect.log(`${due.value} send-email job(s) due`)
 * ```
 *
 * @since 0.1.0
 * @category metrics
 */
export const jobsDue: Metric.Metric.Gauge<number> = Metric.fromMetricKey(keys.due)

/**
 * @example
 * ```ts
 * const used = yield* Metric.value(Metrics.limitInUse.pipe(Metric.tagged(Metrics.jobNameTag, "report")))
 * const limit = yield* Metric.value(Metrics.limitRunning.pipe(Metric.tagged(Metrics.jobNameTag, "report")))
 * yield* Effect.log(`report: ${used.value} of ${limit.value} slots in use`)
 * ```
 *
 * @since 0.3.0
 * @category metrics
 */
export const limitInUse: Metric.Metric.Gauge<number> = Metric.fromMetricKey(keys.limitInUse)

/**
 * @example
 * ```ts
 * const limit = yield* Metric.value(Metrics.limitRunning.pipe(Metric.tagged(Metrics.jobNameTag, "report")))
 * ```
 *
 * @since 0.3.0
 * @category metrics
 */
export const limitRunning: Metric.Metric.Gauge<number> = Metric.fromMetricKey(keys.limitRunning)

/**
 * @example
 * ```ts
 * const held = yield* Metric.value(Metrics.jobsHeldBack.pipe(Metric.tagged(Metrics.jobNameTag, "report")))
 * if (held.value > 0) yield* Effect.logWarning(`${held.value} report job(s) wait for a slot`)
 * ```
 *
 * @since 0.3.0
 * @category metrics
 */
export const jobsHeldBack: Metric.Metric.Gauge<number> = Metric.fromMetricKey(keys.heldBack)

/**
 * Per job name under a per-key concurrency limit (`limits.runningPerKey`) that a worker of this
 * process handles, set every `heartbeatInterval`: of the name's due jobs (the first 10,000 read, as
 * `sqlane_jobs_due` counts them), those whose concurrency key has every slot of that limit in use,
 * in every process; the name's other keys' jobs are not counted (they start meanwhile).
 *
 * @example
 * ```ts
 * const held = yield* Metric.value(Metrics.jobsHeldBackByKey.pipe(Metric.tagged(Metrics.jobNameTag, "sync")))
 * if (held.value > 0) yield* Effect.logWarning(`${held.value} sync job(s) wait for a slot of their tenant`)
 * ```
 *
 * @since 0.3.0
 * @category metrics
 */
export const jobsHeldBackByKey: Metric.Metric.Gauge<number> = Metric.fromMetricKey(keys.heldBackByKey)

/**
 * Per job name under a rate limit (`limits.rate` or `ratePerKey`) that a worker of this process
 * handles, set every `heartbeatInterval` from the name's window row (`<prefix>rates`, as every
 * process's claims counted it): the name's due jobs (counted up to 10,000) while its current window of
 * `rate` has no start left or a `RateLimited` with scope "name" holds it, else 0. Jobs waiting for a
 * used-up key of `ratePerKey` (or a key's hold) are not counted: the name's other keys start meanwhile.
 *
 * @example
 * ```ts
 * const held = yield* Metric.value(Metrics.jobsHeldBackByRate.pipe(Metric.tagged(Metrics.jobNameTag, "sync")))
 * if (held.value > 0) yield* Effect.logWarning(`${held.value} sync job(s) wait for the next rate window`)
 * ```
 *
 * @since 0.3.0
 * @category metrics
 */
export const jobsHeldBackByRate: Metric.Metric.Gauge<number> = Metric.fromMetricKey(keys.heldBackByRate)

/**
 * The metrics of one job name, built once per name from keys with the `job_name` tag baked in (the
 * worker's hot path updates them without effects). `Metric.tagged` would instead build a new
 * metric key, hash it and look it up in the registry on every update.
 *
 * @internal
 */
export const forJobName = (name: string) => {
  const label = MetricLabel.make(jobNameTag, name)
  const tag = <Type extends MetricKeyType.MetricKeyType<any, any>>(key: MetricKey.MetricKey<Type>) =>
    Metric.fromMetricKey(MetricKey.taggedWithLabels(key, [label]))
  return {
    enqueued: tag(keys.enqueued),
    claimed: tag(keys.claimed),
    completed: tag(keys.completed),
    failed: tag(keys.failed),
    retried: tag(keys.retried),
    dead: tag(keys.dead),
    pickupLatency: tag(keys.pickupLatency),
    runDuration: tag(keys.runDuration),
    due: tag(keys.due),
    limitRunning: tag(keys.limitRunning),
    limitInUse: tag(keys.limitInUse),
    heldBack: tag(keys.heldBack),
    heldBackByKey: tag(keys.heldBackByKey),
    heldBackByRate: tag(keys.heldBackByRate)
  }
}

/**
 * @internal
 */
export type JobNameMetrics = ReturnType<typeof forJobName>

const cache = new Map<string, JobNameMetrics>()

/**
 * The cached metrics of a job name.
 *
 * @internal
 */
export const ofJobName = (name: string): JobNameMetrics => {
  let m = cache.get(name)
  if (m === undefined) {
    if (cache.size > 10_000) cache.clear()
    m = forJobName(name)
    cache.set(name, m)
  }
  return m
}
