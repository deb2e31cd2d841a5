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
 * | `sqlane_job_pickup_latency_ms` | histogram | a job is claimed: claim time − the job's `run_at` (or its creation, if later) |
 * | `sqlane_job_run_duration_ms` | histogram | an attempt's handler ends: its run time |
 * | `sqlane_jobs_due` | gauge | every `heartbeatInterval`, per job name a worker handles: its due jobs (counted up to 10,000) |
 *
 * The names are Prometheus-style (the `sqlane_` namespace, the unit in the name); the histograms also
 * carry a `unit` tag (`ms`), which `@effect/opentelemetry` exports as the instrument's unit. River and
 * Oban report the same events through telemetry hooks.
 *
 * @since 0.1.0
 */
import * as Metric from "effect/Metric"
import * as MetricBoundaries from "effect/MetricBoundaries"

/**
 * The tag every sqlane metric carries: the job name.
 *
 * @since 0.1.0
 * @category tags
 */
export const jobNameTag = "job_name"

/**
 * @since 0.1.0
 * @category metrics
 */
export const jobsEnqueued = Metric.counter("sqlane_jobs_enqueued", {
  description: "Jobs written by enqueue, enqueueMany or insert",
  incremental: true
})

/**
 * @since 0.1.0
 * @category metrics
 */
export const jobsClaimed = Metric.counter("sqlane_jobs_claimed", {
  description: "Jobs claimed by the workers of this process",
  incremental: true
})

/**
 * @since 0.1.0
 * @category metrics
 */
export const jobsCompleted = Metric.counter("sqlane_jobs_completed", {
  description: "Attempts that succeeded",
  incremental: true
})

/**
 * @since 0.1.0
 * @category metrics
 */
export const jobsFailed = Metric.counter("sqlane_jobs_failed", {
  description: "Attempts that failed (typed failure, defect, bad payload, timeout, lost worker)",
  incremental: true
})

/**
 * @since 0.1.0
 * @category metrics
 */
export const jobsRetried = Metric.counter("sqlane_jobs_retried", {
  description: "Failed attempts rescheduled by the retry schedule",
  incremental: true
})

/**
 * @since 0.1.0
 * @category metrics
 */
export const jobsDead = Metric.counter("sqlane_jobs_dead", {
  description: "Jobs dead-lettered",
  incremental: true
})

const millis = MetricBoundaries.exponential({ start: 0.5, factor: 2, count: 24 })

/**
 * @since 0.1.0
 * @category metrics
 */
export const pickupLatency = Metric.histogram(
  "sqlane_job_pickup_latency_ms",
  millis,
  "From a job's run_at (or its creation, if later) to its claim, in ms"
).pipe(Metric.tagged("unit", "ms"))

/**
 * @since 0.1.0
 * @category metrics
 */
export const runDuration = Metric.histogram(
  "sqlane_job_run_duration_ms",
  millis,
  "Run time of an attempt's handler, in ms"
).pipe(Metric.tagged("unit", "ms"))

/**
 * @since 0.1.0
 * @category metrics
 */
export const jobsDue = Metric.gauge("sqlane_jobs_due", {
  description: "Due jobs waiting to be claimed, per job name (counted up to 10,000)"
})

/**
 * The metrics of one job name, tagged once (the worker's hot path updates them without effects).
 *
 * @internal
 */
export const forJobName = (name: string) => {
  const tag = <Type, In, Out>(metric: Metric.Metric<Type, In, Out>) => Metric.tagged(metric, jobNameTag, name)
  return {
    enqueued: tag(jobsEnqueued),
    claimed: tag(jobsClaimed),
    completed: tag(jobsCompleted),
    failed: tag(jobsFailed),
    retried: tag(jobsRetried),
    dead: tag(jobsDead),
    pickupLatency: tag(pickupLatency),
    runDuration: tag(runDuration),
    due: tag(jobsDue)
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
