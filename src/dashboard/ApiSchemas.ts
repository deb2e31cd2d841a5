/**
 * The requests and responses of the dashboard's API (`DashboardApi`): each a `Schema`, shared by the
 * server and any client derived from the API. Times are ISO 8601 strings (UTC), ages milliseconds,
 * job ids decimal strings.
 *
 * @since 0.4.0
 */
import * as Schema from "effect/Schema"

/**
 * The states of a job.
 *
 * @example
 * ```ts
 * const dead = Schema.decodeUnknownSync(DashboardApi.JobState)("dead")
 * ```
 *
 * @since 0.4.0
 * @category schemas
 */
export const JobState = Schema.Literal("pending", "running", "completed", "dead", "cancelled")

/**
 * A job id: a decimal string of 1 to 19 digits.
 *
 * @example
 * ```ts
 * Schema.is(DashboardApi.JobId)("42") // true; "abc" and "-1" are not job ids
 * ```
 *
 * @since 0.4.0
 * @category schemas
 */
export const JobId = Schema.String.pipe(
  Schema.pattern(/^\d{1,19}$/),
  // Ids are 64-bit signed integers in both databases: a larger number is a bad request, not a query.
  Schema.filter((s) => BigInt(s) <= 9_223_372_036_854_775_807n, { message: () => "a job id is at most 9223372036854775807" }),
  Schema.annotations({ identifier: "JobId" })
)

/**
 * The access a request has: `allow` (read and act), `read-only` (read; actions are refused) or
 * `deny` (nothing).
 *
 * @example
 * ```ts
 * const authorize = Effect.succeed<DashboardApi.Access>("read-only")
 * ```
 *
 * @since 0.4.0
 * @category schemas
 */
export const Access = Schema.Literal("allow", "read-only", "deny")

/**
 * What `Access` decodes to.
 *
 * @example
 * ```ts
 * const decide = (admin: boolean): DashboardApi.Access => (admin ? "allow" : "read-only")
 * ```
 *
 * @since 0.4.0
 * @category models
 */
export type Access = typeof Access.Type

/**
 * What `GET /api/session` returns: the access granted, and the token every action must carry in
 * the `x-sqlane-csrf` header.
 *
 * @example
 * ```ts
 * const session = await (await fetch("/sqlane/api/session")).json()
 * await fetch("/sqlane/api/jobs/42/retry", { method: "POST", headers: { "x-sqlane-csrf": session.csrfToken } })
 * ```
 *
 * @since 0.4.0
 * @category schemas
 */
export class Session extends Schema.Class<Session>("sqlane/dashboard/Session")({
  access: Schema.Literal("allow", "read-only"),
  /** Send it back in the `x-sqlane-csrf` header of every action. */
  csrfToken: Schema.String,
  /** The header to send it in (`x-sqlane-csrf`). */
  csrfHeader: Schema.String
}) {}

/**
 * A count that stopped at a cap: `count` jobs were counted; `atLeast` is true when the cap was
 * reached, so there are `count` or more.
 *
 * @example
 * ```ts
 * // { count: 10000, atLeast: true }: 10,000 jobs or more
 * const text = (c: DashboardApi.BoundedCount) => `${c.count}${c.atLeast ? "+" : ""}`
 * ```
 *
 * @since 0.4.0
 * @category schemas
 */
export class BoundedCount extends Schema.Class<BoundedCount>("sqlane/dashboard/BoundedCount")({
  count: Schema.Number,
  atLeast: Schema.Boolean
}) {}

/**
 * One job name in the overview: its counts by state (each read up to `Overview.countCap` jobs of
 * that state), whether it is paused, its concurrency and rate limits where set, and how long its
 * oldest due job has waited.
 *
 * @example
 * ```ts
 * const overview = await (await fetch("/sqlane/api/overview")).json()
 * for (const n of overview.names) console.log(n.name, n.pending.count, n.dead.count, n.paused)
 * ```
 *
 * @since 0.4.0
 * @category schemas
 */
export class NameOverview extends Schema.Class<NameOverview>("sqlane/dashboard/NameOverview")({
  name: Schema.String,
  pending: BoundedCount,
  running: BoundedCount,
  completed: BoundedCount,
  dead: BoundedCount,
  cancelled: BoundedCount,
  paused: Schema.Boolean,
  /** When the oldest due job became due (ISO 8601), or null when none is due. */
  oldestDueAt: Schema.NullOr(Schema.String),
  /** How long the oldest due job has been due (ms), or null. */
  oldestDueMs: Schema.NullOr(Schema.Number),
  /**
   * The name's limits as `sqlane status --json` shows them (running, runningPerKey, rate, slots in
   * use…), or null when it has none.
   */
  limits: Schema.NullOr(Schema.Unknown)
}) {}

/**
 * What `GET /api/overview` returns: every job name found among the counted jobs, the paused names
 * and the names workers handle, sorted by name.
 *
 * @example
 * ```ts
 * const client = yield* HttpApiClient.make(DashboardApi.api, { baseUrl: "http://127.0.0.1:7070" })
 * const { names } = yield* client.reads.overview()
 * ```
 *
 * @since 0.4.0
 * @category schemas
 */
export class Overview extends Schema.Class<Overview>("sqlane/dashboard/Overview")({
  names: Schema.Array(NameOverview),
  /** The most jobs of one state that were read to count them (so the counts are bounded). */
  countCap: Schema.Number,
  /** When the overview was read (ISO 8601). */
  at: Schema.String
}) {}

/**
 * A job as listed (no payload, result or error history: see `JobDetail`).
 *
 * @example
 * ```ts
 * const page = await (await fetch("/sqlane/api/jobs?state=running")).json()
 * for (const job of page.jobs) console.log(job.id, job.name, job.claimedAt, job.workerId)
 * ```
 *
 * @since 0.4.0
 * @category schemas
 */
export class JobSummary extends Schema.Class<JobSummary>("sqlane/dashboard/JobSummary")({
  id: Schema.String,
  name: Schema.String,
  state: Schema.String,
  attempts: Schema.Number,
  priority: Schema.Number,
  runAt: Schema.String,
  createdAt: Schema.String,
  claimedAt: Schema.NullOr(Schema.String),
  finishedAt: Schema.NullOr(Schema.String),
  workerId: Schema.NullOr(Schema.String),
  lastError: Schema.NullOr(Schema.String)
}) {}

/**
 * A page of jobs, newest first; `nextCursor` fetches the next page (null: this is the last).
 *
 * @example
 * ```ts
 * let cursor: string | null = null
 * do {
 *   const page = await (await fetch(`/sqlane/api/jobs?limit=100${cursor ? `&cursor=${cursor}` : ""}`)).json()
 *   cursor = page.nextCursor
 * } while (cursor !== null)
 * ```
 *
 * @since 0.4.0
 * @category schemas
 */
export class JobPage extends Schema.Class<JobPage>("sqlane/dashboard/JobPage")({
  jobs: Schema.Array(JobSummary),
  nextCursor: Schema.NullOr(Schema.String)
}) {}

/**
 * The filters of `GET /api/jobs` (URL parameters): job name, state, id, unique key, creation time
 * range (`createdFrom` inclusive, `createdBefore` exclusive, ISO 8601; read as the range of ids
 * between the first jobs created at its ends, so a job whose `created_at` is more than a minute out
 * of order with its id may be left out at the ends), and the page: `cursor` (a page's `nextCursor`)
 * and `limit` (1–500, default 50). Each filter reads one range of its index (see docs/dashboard.md).
 *
 * @example
 * ```ts
 * const filter: typeof DashboardApi.JobFilter.Type = { name: "send-email", state: "dead", createdFrom: "2026-01-01T00:00:00Z" }
 * ```
 *
 * @since 0.4.0
 * @category schemas
 */
/**
 * A job name or unique key as a request gives it: 1–255 characters without U+0000 (no job has one;
 * PostgreSQL refuses the character in text).
 *
 * @example
 * ```ts
 * Schema.decodeUnknownSync(DashboardApi.KeyText)("send-email")
 * ```
 *
 * @since 0.4.0
 * @category schemas
 */
export const KeyText = Schema.String.pipe(
  Schema.minLength(1),
  Schema.maxLength(255),
  Schema.filter((s) => !s.includes("\u0000"), { message: () => "must not contain U+0000" })
)

export const JobFilter = Schema.Struct({
  name: Schema.optional(KeyText),
  state: Schema.optional(JobState),
  id: Schema.optional(JobId),
  uniqueKey: Schema.optional(KeyText),
  createdFrom: Schema.optional(Schema.String),
  createdBefore: Schema.optional(Schema.String)
})

/** The page of a job list: `cursor` (a page's `nextCursor`) and `limit` (1–500, default 50). @internal */
export const PageParams = {
  cursor: Schema.optional(JobId),
  limit: Schema.optional(Schema.NumberFromString.pipe(Schema.int(), Schema.between(1, 500)))
}

/**
 * One attempt's error, as the job stores it.
 *
 * @example
 * ```ts
 * const { errors } = await (await fetch("/sqlane/api/jobs/42")).json()
 * for (const e of errors) console.log(`#${e.attempt} ${e.kind}: ${e.message}`)
 * ```
 *
 * @since 0.4.0
 * @category schemas
 */
export class AttemptErrorView extends Schema.Class<AttemptErrorView>("sqlane/dashboard/AttemptError")({
  attempt: Schema.Number,
  at: Schema.String,
  kind: Schema.String,
  tag: Schema.NullOr(Schema.String),
  message: Schema.String,
  stack: Schema.NullOr(Schema.String)
}) {}

/**
 * What `GET /api/jobs/:id` returns: the job with its payload and result as JSON text, every
 * attempt's error, its progress and the trace id of the span that enqueued it.
 *
 * @example
 * ```ts
 * const detail = await (await fetch("/sqlane/api/jobs/42")).json()
 * const payload = JSON.parse(detail.payload) // data: show it as text, never as markup
 * ```
 *
 * @since 0.4.0
 * @category schemas
 */
export class JobDetail extends Schema.Class<JobDetail>("sqlane/dashboard/JobDetail")({
  job: JobSummary,
  /** The payload as JSON text. */
  payload: Schema.String,
  /** The result as JSON text, or null. */
  result: Schema.NullOr(Schema.String),
  errors: Schema.Array(AttemptErrorView),
  progress: Schema.NullOr(Schema.Struct({
    value: Schema.Number,
    message: Schema.NullOr(Schema.String),
    attempt: Schema.Number,
    at: Schema.String
  })),
  /** The trace id (32 hex digits) of the span that enqueued the job, when a tracer was installed. */
  traceId: Schema.NullOr(Schema.String)
}) {}

/**
 * A periodic job that has enqueued a tick: its name and latest tick. The expression and time zone
 * live in the app's code (`PeriodicJob.make`), not in the database, so they are not shown.
 *
 * @example
 * ```ts
 * const { periodicJobs } = await (await fetch("/sqlane/api/periodic-jobs")).json()
 * for (const p of periodicJobs) console.log(p.name, p.lastTickAt)
 * ```
 *
 * @since 0.4.0
 * @category schemas
 */
export class PeriodicJobView extends Schema.Class<PeriodicJobView>("sqlane/dashboard/PeriodicJob")({
  name: Schema.String,
  lastTickAt: Schema.NullOr(Schema.String),
  updatedAt: Schema.String,
  /** The job each tick enqueues, the cron expression and its time zone as given, and the next tick a scheduler waits for: as the latest scheduler of the name wrote them (null before one did). */
  jobName: Schema.NullOr(Schema.String),
  expression: Schema.NullOr(Schema.String),
  timeZone: Schema.NullOr(Schema.String),
  nextTickAt: Schema.NullOr(Schema.String)
}) {}

/**
 * What `GET /api/periodic-jobs` returns.
 *
 * @example
 * ```ts
 * const { periodicJobs } = yield* client.reads.periodicJobs()
 * ```
 *
 * @since 0.4.0
 * @category schemas
 */
export class PeriodicJobList extends Schema.Class<PeriodicJobList>("sqlane/dashboard/PeriodicJobList")({
  periodicJobs: Schema.Array(PeriodicJobView)
}) {}

/**
 * A worker's row: id, host, pid, when it started, its heartbeat's age (ms), the job names it
 * handles and its running jobs.
 *
 * @example
 * ```ts
 * const { workers } = await (await fetch("/sqlane/api/workers")).json()
 * const stale = workers.filter((w) => w.heartbeatAgeMs > 30_000)
 * ```
 *
 * @since 0.4.0
 * @category schemas
 */
export class WorkerView extends Schema.Class<WorkerView>("sqlane/dashboard/Worker")({
  id: Schema.String,
  host: Schema.String,
  pid: Schema.Number,
  startedAt: Schema.String,
  heartbeatAgeMs: Schema.Number,
  jobNames: Schema.Array(Schema.String),
  /** Ids of its running jobs (at most 1,000 running jobs are read over all workers). */
  runningJobs: Schema.Array(Schema.String)
}) {}

/**
 * What `GET /api/workers` returns.
 *
 * @example
 * ```ts
 * const { workers } = yield* client.reads.workers()
 * ```
 *
 * @since 0.4.0
 * @category schemas
 */
export class WorkerList extends Schema.Class<WorkerList>("sqlane/dashboard/WorkerList")({
  workers: Schema.Array(WorkerView)
}) {}

/**
 * What an action on one job or job name did: `changed` false when there was nothing to do (a job
 * not dead or cancelled for a retry, a name already paused…); `state` is the job's state before.
 *
 * @example
 * ```ts
 * const headers = { "x-sqlane-csrf": session.csrfToken }
 * const outcome = await (await fetch("/sqlane/api/jobs/42/retry", { method: "POST", headers })).json()
 * // { changed: true, state: "dead" }
 * ```
 *
 * @since 0.4.0
 * @category schemas
 */
export class ActionOutcome extends Schema.Class<ActionOutcome>("sqlane/dashboard/ActionOutcome")({
  changed: Schema.Boolean,
  state: Schema.NullOr(Schema.String)
}) {}

/**
 * The body of a bulk action: the jobs a filter selects (`JobFilter`, with a job name, a state, an id
 * or a unique key; an unknown key is refused), and `confirm`: the count a first call (without it)
 * returned. At most `maxBulk` jobs are selected. A confirmed action runs to its end even when the
 * client goes away (each job is one statement: about 1 ms a job).
 *
 * @example
 * ```ts
 * const body = { filter: { name: "send-email", state: "dead" } }
 * const { count } = await post("/sqlane/api/bulk/retry", body) // nothing changes yet
 * await post("/sqlane/api/bulk/retry", { ...body, confirm: count }) // retries them
 * ```
 *
 * @since 0.4.0
 * @category schemas
 */
export class BulkRequest extends Schema.Class<BulkRequest>("sqlane/dashboard/BulkRequest")({
  // An unknown filter key (a typo) is refused, not dropped: dropped, it would select every job.
  filter: JobFilter.annotations({ parseOptions: { onExcessProperty: "error" } }),
  confirm: Schema.optional(Schema.Number)
}) {}

/**
 * What a bulk action returns: without `confirm`, `count` (the jobs selected) and `done: false`;
 * with the right `confirm`, `done: true` and `changed` (the jobs it retried, cancelled or deleted).
 *
 * @example
 * ```ts
 * // first { count: 12, done: false, changed: 0 }, then { count: 12, done: true, changed: 12 }
 * const summary = (o: DashboardApi.BulkOutcome) => (o.done ? `${o.changed} of ${o.count}` : `${o.count} selected`)
 * ```
 *
 * @since 0.4.0
 * @category schemas
 */
export class BulkOutcome extends Schema.Class<BulkOutcome>("sqlane/dashboard/BulkOutcome")({
  count: Schema.Number,
  done: Schema.Boolean,
  changed: Schema.Number
}) {}

/**
 * The most jobs one bulk action selects: 10,000 (narrow the filter for more).
 *
 * @example
 * ```ts
 * if (count > DashboardApi.maxBulk) console.log("narrow the filter")
 * ```
 *
 * @since 0.4.0
 * @category constants
 */
export const maxBulk = 10_000

/**
 * One minute of a job name in `GET /api/stats`: the attempts of the name whose success (`completed`)
 * or failure (`failed`: retried or dead-lettered) was written in that UTC minute, by every process.
 *
 * @example
 * ```ts
 * // { minute: "2026-12-06T04:10:00.000Z", completed: 1520, failed: 3 }
 * const errorRate = (p: DashboardApi.StatsPoint) => p.failed / Math.max(1, p.completed + p.failed)
 * ```
 *
 * @since 0.4.0
 * @category schemas
 */
export class StatsPoint extends Schema.Class<StatsPoint>("sqlane/dashboard/StatsPoint")({
  /** The start of the minute (ISO 8601, UTC). */
  minute: Schema.String,
  completed: Schema.Number,
  failed: Schema.Number
}) {}

/**
 * Pickup-latency percentiles of a job name over the last hour (ms from a job becoming due to its
 * attempt starting), bucket-bounded: each is the upper bound of the bucket it falls in (1, 2, 5, 10,
 * 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 300000, 900000, 3600000 ms), so the
 * true value is at most that; above the last bound it reads 3600000 (an hour or more). `count`: the
 * attempts started in the hour; the percentiles are null when it is 0.
 *
 * @example
 * ```ts
 * const text = (p: DashboardApi.PickupPercentiles) => (p.p95 === null ? "–" : `p95 ≤ ${p.p95} ms`)
 * ```
 *
 * @since 0.4.0
 * @category schemas
 */
export class PickupPercentiles extends Schema.Class<PickupPercentiles>("sqlane/dashboard/PickupPercentiles")({
  p50: Schema.NullOr(Schema.Number),
  p95: Schema.NullOr(Schema.Number),
  p99: Schema.NullOr(Schema.Number),
  count: Schema.Number
}) {}

/**
 * One job name in `GET /api/stats`: a point per minute of the last hour (60, oldest first, minutes
 * without any counted as 0, the last one the current minute), and its pickup-latency percentiles
 * over the hour.
 *
 * @example
 * ```ts
 * const stats = await (await fetch("/sqlane/api/stats")).json()
 * for (const n of stats.names) console.log(n.name, n.points.at(-1).completed, n.pickupMs.p99)
 * ```
 *
 * @since 0.4.0
 * @category schemas
 */
export class NameStats extends Schema.Class<NameStats>("sqlane/dashboard/NameStats")({
  name: Schema.String,
  points: Schema.Array(StatsPoint),
  pickupMs: PickupPercentiles
}) {}

/**
 * What `GET /api/stats` returns: per job name with counts in the last hour (sorted by name), what
 * the workers of every process did in each minute, from the table `<prefix>stats`. `since` is the
 * start of the first minute (ISO 8601, UTC). The workers add their counts every `statsInterval` (5 s
 * by default), so the current minute fills as they do.
 *
 * @example
 * ```ts
 * const { since, names } = await (await fetch("/sqlane/api/stats")).json()
 * const completedInHour = names.map((n) => n.points.reduce((sum, p) => sum + p.completed, 0))
 * ```
 *
 * @since 0.4.0
 * @category schemas
 */
export class StatsView extends Schema.Class<StatsView>("sqlane/dashboard/Stats")({
  since: Schema.String,
  /** Whether the hour held more rows than are read (120,000: an hour of 2,000 names): the oldest minutes are then left out. */
  truncated: Schema.Boolean,
  names: Schema.Array(NameStats)
}) {}
