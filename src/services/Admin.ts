/**
 * Operating a queue: per-name status, listing and inspecting jobs, bulk retry and cancel,
 * pausing and resuming job names, pruning. What the `sqlane` CLI runs; usable from an app too.
 *
 * **Pause**: a paused job name is not claimed by any worker of any process: the claim statements
 * leave paused names out. Once `pause` has returned, no claim that starts afterwards takes a job of
 * that name, and no job enqueued afterwards starts until the resume; a claim already in flight when
 * the pause commits may still take jobs that were pending before it. Attempts already running
 * finish. Jobs of a paused name can still be enqueued; they wait, pending, until it is resumed.
 *
 * @since 0.1.0
 */
import type { SqlError } from "@effect/sql/SqlError"
import type * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { Database } from "../internal/Database.js"
import type { JobSummaryRow } from "../internal/driver/Driver.js"
import * as Limits from "../internal/limits.js"
import * as Pauses from "../internal/pauses.js"
import { microsToDate, nowMicros } from "../internal/time.js"
import { InvalidLimit, JobNotFound } from "../schema/Errors.js"
import type { JobInfo } from "../schema/JobInfo.js"
import type { LimitChanges, LimitStatus, NameLimitStatus, RunTimeLimits } from "../schema/LimitStatus.js"
import { Notifier } from "./Notifier.js"
import * as Pruner from "./Pruner.js"
import { Queue } from "./Queue.js"
import { QueueConfig } from "./QueueConfig.js"

export type {
  LimitChanges,
  LimitStatus,
  NameLimitStatus,
  RateLimit,
  RateWindowStatus,
  RunTimeLimits
} from "../schema/LimitStatus.js"

/**
 * The last progress a handler reported with `Queue.progress`.
 *
 * @example
 * ```ts
 * const { job, progress } = yield* (yield* Admin.Admin).show(id)
 * if (Option.isSome(progress)) yield* Effect.log(`${job.name}: ${progress.value.value} ${progress.value.message ?? ""}`)
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export class Progress extends Schema.Class<Progress>("sqlane/Progress")({
  /** The number the handler reported (its unit is the handler's: a percentage, items done…). */
  value: Schema.Number,
  message: Schema.optional(Schema.String),
  /** The attempt that reported it. */
  attempt: Schema.Number,
  /** When it was reported (ISO 8601, UTC). */
  at: Schema.String
}) {}

const decodeProgress = Schema.decodeUnknownOption(Schema.parseJson(Progress))

/** @internal */
export const progressOf = (json: string | null): Option.Option<Progress> =>
  json === null ? Option.none() : decodeProgress(json)

/**
 * A job as listed: no payload, error history or result (see {@link AdminShape.show} for those).
 *
 * @example
 * ```ts
 * const dead = yield* (yield* Admin.Admin).list({ state: "dead", limit: 20 })
 * for (const job of dead) yield* Effect.log(`${job.id} ${job.name}: ${job.lastError}`)
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface JobSummary {
  readonly id: string
  readonly name: string
  readonly state: string
  readonly attempts: number
  readonly priority: number
  readonly runAt: Date
  readonly createdAt: Date
  readonly claimedAt: Date | undefined
  readonly finishedAt: Date | undefined
  /** The worker running it (running jobs only). */
  readonly workerId: string | undefined
  readonly lastError: string | undefined
  readonly progress: Progress | undefined
}

/**
 * One job name's counts, as {@link AdminShape.status} reports them.
 *
 * @example
 * ```ts
 * const { names } = yield* (yield* Admin.Admin).status
 * for (const n of names) yield* Effect.log(`${n.name}: ${n.pending} pending, ${n.running} running, ${n.dead} dead`)
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface NameStatus {
  readonly name: string
  /** Pending jobs, due or not. */
  readonly pending: number
  /** Pending jobs whose `run_at` has passed. */
  readonly due: number
  readonly running: number
  /** Completed jobs finished within the completed retention window. */
  readonly completed: number
  readonly dead: number
  readonly cancelled: number
  /** How long the oldest due job has been due (ms), if any is. */
  readonly oldestDueMs: number | undefined
  readonly paused: boolean
  /**
   * The name's concurrency limits (set at run time, else those its live workers' definitions
   * publish), with the slots held now, and its rates with their current window; undefined when it
   * has none.
   */
  readonly limits: NameLimitStatus | undefined
}

/**
 * What `status` returns: per job name the counts by state, and the running jobs.
 *
 * @example
 * ```ts
 * const status = yield* (yield* Admin.Admin).status // what `sqlane status` prints
 * yield* Effect.log(`${status.running.length} job(s) running`)
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface Status {
  /** Every job name that has jobs or is paused, sorted by name. */
  readonly names: ReadonlyArray<NameStatus>
  /** Running jobs (newest first, at most 50), with their progress. */
  readonly running: ReadonlyArray<JobSummary>
}

/**
 * The filters and page of `list`: a job name, a state, at most `limit` jobs with ids below
 * `beforeId`, newest first.
 *
 * @example
 * ```ts
 * const page = yield* admin.list({ name: "send-email", state: "dead", limit: 50 })
 * const next = yield* admin.list({ name: "send-email", state: "dead", limit: 50, beforeId: page.at(-1)?.id })
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface ListOptions {
  readonly name?: string | undefined
  readonly state?: "pending" | "running" | "completed" | "dead" | "cancelled" | undefined
  /** Only jobs with a smaller id (for paging: pass the last id of the previous page). */
  readonly beforeId?: string | undefined
  /** Only the job of this id (a decimal string; another text selects none). */
  readonly id?: string | undefined
  /** Only jobs holding this unique key. */
  readonly uniqueKey?: string | undefined
  /** Only jobs created at or after this time. */
  readonly createdFrom?: Date | undefined
  /** Only jobs created before this time. */
  readonly createdBefore?: Date | undefined
  /** Default 50, at most 10,000. */
  readonly limit?: number | undefined
}

/**
 * What a bulk action did to one job.
 *
 * @example
 * ```ts
 * const results = yield* (yield* Admin.Admin).retry(["42", "43"])
 * for (const r of results) yield* Effect.log(`${r.id}: ${r.changed ? "retried" : `left ${r.state}`}`)
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface ActionResult {
  readonly id: string
  /** Whether the job changed (retried / cancelled). */
  readonly changed: boolean
  /** The job's state before the action. */
  readonly state: string
}

/**
 * What the `Admin` service does, the same as the `sqlane` CLI: status, list and show jobs, retry,
 * cancel, pause and resume job names, prune.
 *
 * @example
 * ```ts
 * const admin = yield* Admin.Admin
 * yield* admin.pause("send-email")
 * const retried = yield* admin.retryAll("send-email", "dead")
 * yield* admin.resume("send-email")
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface AdminShape {
  /** Per job name: pending, due, running, completed (within retention), dead, cancelled, oldest due age, paused. */
  readonly status: Effect.Effect<Status, SqlError>
  /** Jobs, newest first. */
  readonly list: (options?: ListOptions) => Effect.Effect<ReadonlyArray<JobSummary>, SqlError>
  /** One job: `Queue.get`'s `JobInfo` (payload, attempts, each error, result) plus its progress. */
  readonly show: (
    id: string
  ) => Effect.Effect<{ readonly job: JobInfo; readonly progress: Option.Option<Progress> }, JobNotFound | SqlError>
  /**
   * `Queue.retry` for each id. Fails with `JobNotFound` (changing nothing) when any id is unknown;
   * jobs not dead or cancelled are left as they are (`changed: false`).
   */
  readonly retry: (ids: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<ActionResult>, JobNotFound | SqlError>
  /**
   * Retries every job of `name` in `state` (dead or cancelled) that finished before this call, in
   * batches of 1,000; jobs with a unique key one by one, skipping those whose key another job now
   * holds (as `Queue.retry`). Returns how many it put back to pending.
   */
  readonly retryAll: (name: string, state: "dead" | "cancelled") => Effect.Effect<number, SqlError>
  /**
   * `Queue.cancel` for each id. Fails with `JobNotFound` (changing nothing) when any id is unknown;
   * jobs already finished are left as they are (`changed: false`).
   */
  readonly cancel: (ids: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<ActionResult>, JobNotFound | SqlError>
  /** Pauses a job name in every process. Returns `false` when it was already paused. */
  readonly pause: (name: string) => Effect.Effect<boolean, SqlError>
  /** Resumes a paused job name. Returns `false` when it was not paused. */
  readonly resume: (name: string) => Effect.Effect<boolean, SqlError>
  /**
   * The job names that workers have handlers for, in any process: every worker with a row in
   * `<prefix>workers` (live ones, and ones that ended without closing, until pruned).
   */
  readonly handledNames: Effect.Effect<ReadonlySet<string>, SqlError>
  /**
   * Of `handledNames`, those for which some worker's definition (`Job.make`'s `limits.key`) gives
   * jobs a concurrency key, as the workers' rows publish it. A job's key is computed at enqueue, by
   * the enqueuing code's definition; per-key limits (`runningPerKey`, `ratePerKey`) hold back only
   * jobs enqueued with a key.
   */
  readonly keyedNames: Effect.Effect<ReadonlySet<string>, SqlError>
  /** The paused job names and since when. */
  readonly paused: Effect.Effect<ReadonlyArray<{ readonly name: string; readonly pausedAt: Date }>, SqlError>
  /** One pruning pass now (see `Pruner.run`). */
  readonly prune: Effect.Effect<Pruner.PruneResult, SqlError>
  /**
   * Changes a job name's concurrency and rate limits at run time, over its definition's (`Job.make`'s
   * `limits`), for every worker: at once in this process, by `NOTIFY` on PostgreSQL, and within
   * one `rescueInterval` everywhere. Limit by limit ({@link LimitChanges}): a value sets it, `null`
   * removes it (the definition's applies again), and one left out keeps what it was (a value set
   * earlier, else the definition's). So `setLimits("report", { running: 5 })` then
   * `setLimits("report", { rate: { starts: 100, per: "1 minute" } })` leaves both. `clearLimits`
   * removes them all. Works for any job name, also one no worker handles yet, and one whose
   * definition has no limits: its workers then claim it under the new limits. A lowered limit starts
   * no new attempt until the running ones are below it; they are not stopped.
   *
   * Returns the name's run-time limits as they are now (`undefined`: none, the definition's apply;
   * a rate as `{ starts, perMs }`). Fails with `InvalidLimit` (changing nothing, `option` naming the
   * limit) for a number that is not an integer from 1 to `Job.maxLimit`, a rate that `Job.make`
   * would refuse (`starts` 1–1,000,000, `per` 1 ms to 366 days in whole milliseconds, not a bigint),
   * a key other than `running`, `runningPerKey`, `rate` and `ratePerKey`, nothing given, or a bad name.
   *
   * @example
   * ```ts
   * const admin = yield* Admin.Admin
   * yield* admin.setLimits("report", { running: 5 })
   * const now = yield* admin.setLimits("report", { rate: { starts: 100, per: "1 minute" } })
   * // { running: 5, runningPerKey: undefined, rate: { starts: 100, perMs: 60000 }, ratePerKey: undefined }
   * yield* admin.setLimits("report", { rate: null }) // the definition's rate again; running 5 kept
   * ```
   */
  readonly setLimits: (name: string, limits: LimitChanges) => Effect.Effect<RunTimeLimits, InvalidLimit | SqlError>
  /** Removes a job name's run-time limits: its definition's apply again. Returns `false` when it had none. */
  readonly clearLimits: (name: string) => Effect.Effect<boolean, SqlError>
  /** The run-time limits (concurrency and rates), by name, with the slots their names' running attempts hold now. */
  readonly limits: Effect.Effect<ReadonlyArray<LimitStatus>, SqlError>
  /**
   * Lifts the holds of a job name and of its concurrency keys that handlers asked for with
   * `RateLimited` (scope `name` or `key`): its jobs may start again at once, as their rates allow,
   * in every process (this one at once, others by `NOTIFY` on PostgreSQL, and within one
   * `pollInterval` everywhere: a worker reads a hold again at least that often). Returns how many holds were lifted: those still in force (0: none; a hold whose time has passed holds nothing and is not counted). The jobs whose attempts
   * ended with `RateLimited` keep the later `run_at` it gave them; the others of the name or key start.
   *
   * @example
   * ```ts
   * const admin = yield* Admin.Admin
   * const lifted = yield* admin.liftHolds("sync-crm") // 1: the name's hold; more with keys held
   * ```
   */
  readonly liftHolds: (name: string) => Effect.Effect<number, SqlError>
}

/**
 * Operations on the queue from code (the CLI runs on it). Provided by `QueueLive`.
 *
 * @example
 * ```ts
 * const pauseEmails = Effect.flatMap(Admin.Admin, (admin) => admin.pause("send-email"))
 * ```
 *
 * @since 0.1.0
 * @category tags
 */
export class Admin extends Context.Tag("sqlane/Admin")<Admin, AdminShape>() {}

const toSummary = (r: JobSummaryRow): JobSummary => ({
  id: r.id,
  name: r.name,
  state: r.state,
  attempts: r.attempts,
  priority: r.priority,
  runAt: microsToDate(r.runAtUs),
  createdAt: microsToDate(r.createdAtUs),
  claimedAt: r.claimedAtUs === null ? undefined : microsToDate(r.claimedAtUs),
  finishedAt: r.finishedAtUs === null ? undefined : microsToDate(r.finishedAtUs),
  workerId: r.workerId ?? undefined,
  lastError: r.lastError ?? undefined,
  progress: Option.getOrUndefined(progressOf(r.progress))
})

/**
 * Builds the `Admin` service (used by {@link layer}).
 *
 * @example
 * ```ts
 * // QueueLive provides Admin; this is how it builds it
 * const AdminLive = Layer.effect(Admin.Admin, Admin.make)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make: Effect.Effect<AdminShape, never, Database | Notifier | Queue | QueueConfig | SqlClient.SqlClient> =
  Effect.gen(function*() {
    const database = yield* Database
    const { driver } = database
    const notifier = yield* Notifier
    const nameKey = Pauses.nameKey(driver.capabilities.padSpaceKeys)
    const queue = yield* Queue
    const config = yield* QueueConfig
    const context = yield* Effect.context<Database | QueueConfig | SqlClient.SqlClient>()

    const getAll = (ids: ReadonlyArray<string>) => Effect.forEach(ids, (id) => queue.get(id))

    const service: AdminShape = {
      status: Effect.gen(function*() {
        const nowUs = yield* nowMicros
        const sinceUs = nowUs - Math.round(Duration.toMillis(config.retention.completed) * 1000)
        const rows = yield* driver.jobStats(nowUs, Number.isFinite(sinceUs) ? sinceUs : -62135596800000000)
        const pausedRows = yield* driver.pausedList()
        const pausedKeys = new Set(pausedRows.map((p) => nameKey(p.name)))
        const byName = new Map<string, { -readonly [K in keyof NameStatus]: NameStatus[K] }>()
        const entry = (name: string) => {
          let e = byName.get(name)
          if (e === undefined) {
            e = {
              name,
              pending: 0,
              due: 0,
              running: 0,
              completed: 0,
              dead: 0,
              cancelled: 0,
              oldestDueMs: undefined,
              paused: pausedKeys.has(nameKey(name)),
              limits: undefined
            }
            byName.set(name, e)
          }
          return e
        }
        for (const row of rows) {
          const e = entry(row.name)
          switch (row.state) {
            case "pending":
              e.pending += row.count
              e.due += row.due
              if (row.oldestDueUs !== null) e.oldestDueMs = Math.max(0, Math.floor((nowUs - row.oldestDueUs) / 1000))
              break
            case "running":
              e.running += row.count
              break
            case "completed":
              e.completed += row.recent
              break
            case "dead":
              e.dead += row.count
              break
            case "cancelled":
              e.cancelled += row.count
              break
          }
        }
        // A paused name without jobs gets a row of its own (unless it is one of those names, as the
        // database compares them).
        const listed = new Set(Array.from(byName.keys(), nameKey))
        for (const p of pausedRows) if (!listed.has(nameKey(p.name))) entry(p.name)
        const limits = yield* Limits.ofNames(driver, Array.from(byName.keys()), nameKey, nowUs)
        for (const [name, l] of limits) entry(name).limits = l
        const running = yield* driver.jobList({ state: "running", limit: 50 })
        return {
          names: Array.from(byName.values()).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)),
          running: running.map(toSummary)
        }
      }),
      list: (options = {}) =>
        Effect.map(
          driver.jobList({
            name: options.name,
            state: options.state,
            beforeId: options.beforeId !== undefined && /^\d{1,19}$/.test(options.beforeId) ? options.beforeId : undefined,
            // An id that is not one selects no job (the id column could not compare it).
            id: options.id === undefined ? undefined : /^\d{1,19}$/.test(options.id) ? options.id : "0",
            uniqueKey: options.uniqueKey,
            createdFromUs: options.createdFrom === undefined ? undefined : options.createdFrom.getTime() * 1000,
            createdBeforeUs: options.createdBefore === undefined ? undefined : options.createdBefore.getTime() * 1000,
            limit: Math.min(10_000, Math.max(1, Math.floor(options.limit ?? 50)))
          }),
          (rows) => rows.map(toSummary)
        ),
      show: (id) =>
        Effect.gen(function*() {
          const job = yield* queue.get(id)
          const progress = progressOf(yield* driver.jobProgressGet(id))
          return { job, progress }
        }),
      retry: (ids) =>
        Effect.gen(function*() {
          const before = yield* getAll(ids)
          // `Queue.retry` wakes the workers of the job's name: this process's at once, others' by NOTIFY.
          return yield* Effect.forEach(before, (job) =>
            Effect.map(queue.retry(job.id), (changed) => ({ id: job.id, changed, state: job.state })))
        }),
      retryAll: (name, state) =>
        Effect.gen(function*() {
          // Only jobs finished before this call: a job retried here that fails again meanwhile is
          // not retried a second time (and the loop ends however fast workers dead-letter them).
          const startUs = yield* nowMicros
          let total = 0
          while (true) {
            const n = yield* driver.jobRetryByName(name, state, yield* nowMicros, 1000, startUs)
            total += n
            if (n < 1000) break
          }
          // Jobs with a unique key one by one, as `Queue.retry`: one whose key another job now holds
          // stays (the unique index would refuse a bulk update as a whole).
          let afterId = "0"
          while (true) {
            const ids = yield* driver.jobKeyedIdsByName(name, state, afterId, startUs, 1000)
            for (const id of ids) {
              if (yield* driver.jobRetry(id, yield* nowMicros)) total++
            }
            if (ids.length < 1000) break
            afterId = ids[ids.length - 1]
          }
          if (total > 0) yield* notifier.announce([name])
          return total
        }),
      cancel: (ids) =>
        Effect.gen(function*() {
          const before = yield* getAll(ids)
          return yield* Effect.forEach(before, (job) =>
            Effect.map(queue.cancel(job.id), (changed) => ({ id: job.id, changed, state: job.state })))
        }),
      pause: (name) =>
        Effect.gen(function*() {
          const changed = yield* driver.pausedInsert(name, yield* nowMicros)
          yield* notifier.namePaused(name)
          return changed
        }),
      resume: (name) =>
        Effect.gen(function*() {
          const changed = yield* driver.pausedDelete(name)
          yield* notifier.pausesChanged
          if (changed) yield* notifier.announce([name])
          return changed
        }),
      // Every worker row, whatever its heartbeat's age: the heartbeat interval and lease are the
      // workers' own options, which this process may not share.
      handledNames: driver.workerJobNames(0),
      keyedNames: Effect.map(
        driver.workerJobLimits(0),
        (limits) => new Set(Array.from(limits).filter(([, l]) => l.fair === true).map(([name]) => name))
      ),
      paused: Effect.map(
        driver.pausedList(),
        (rows) => rows.map((r) => ({ name: r.name, pausedAt: microsToDate(r.pausedAtUs) }))
      ),
      prune: Effect.provide(Pruner.run, context),
      setLimits: (name, limits) =>
        Effect.gen(function*() {
          const changes = Limits.changesOf(name, limits)
          if (changes instanceof InvalidLimit) return yield* changes
          const row = yield* driver.limitSet(name, changes, yield* nowMicros)
          yield* notifier.limitsChanged
          // A raised limit may let waiting jobs start now.
          yield* notifier.announce([name])
          return Limits.runTimeLimits(row)
        }),
      clearLimits: (name) =>
        Effect.gen(function*() {
          const changed = yield* driver.limitDelete(name)
          yield* notifier.limitsChanged
          if (changed) yield* notifier.announce([name])
          return changed
        }),
      limits: Limits.statuses(driver),
      liftHolds: (name) =>
        Effect.gen(function*() {
          const lifted = yield* driver.rateHoldsLift(name, yield* nowMicros)
          if (lifted > 0) {
            // Workers forget the holds they read (as after a change of the limits) and claim again.
            yield* notifier.limitsChanged
            yield* notifier.announce([name])
          }
          return lifted
        })
    }
    return service
  })

/**
 * The `Admin` service as a layer; `QueueLive` includes it.
 *
 * @example
 * ```ts
 * // Part of QueueLive; an app provides QueueLive instead
 * const AppLive = QueueLive().pipe(Layer.provideMerge(ClientLive))
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<Admin, never, Database | Notifier | Queue | QueueConfig | SqlClient.SqlClient> = Layer
  .effect(Admin, make)
