/**
 * Enqueues jobs and reads them back.
 *
 * `enqueue` and `enqueueMany` join the caller's ambient `sql.withTransaction`: the job rows
 * commit or roll back with the app's own rows. `joinTransaction` does the same for a transaction
 * begun on the app's own node-postgres or mysql2 connection.
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as Context from "effect/Context"
import * as DateTime from "effect/DateTime"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { type CallerConnection, join } from "../internal/callerConnection.js"
import { Database } from "../internal/Database.js"
import { makeEnqueuer } from "../internal/enqueue.js"
import { microsToDate, nowMicros } from "../internal/time.js"
import { InvalidEnqueueOption, type InvalidPayload, JobNotFound, UniqueKeyContended } from "../schema/Errors.js"
import type { Job } from "../schema/Job.js"
import { ErrorHistory, JobInfo, JobState } from "../schema/JobInfo.js"
import { withSpanIfTraced } from "../internal/tracing.js"
import { Notifier } from "./Notifier.js"

/**
 * The options of `enqueue` and `insert`: when the job is due (`runAt` or `delay`), its priority,
 * and its unique key. Any other key (a misspelt `uniqe`, which would leave the job without its
 * key) fails the enqueue with `InvalidEnqueueOption` (path `options`, reason `type`, the option
 * meant in the message) and writes nothing.
 *
 * @example
 * ```ts
 * const queue = yield* Queue.Queue
 * yield* queue.enqueue(SendEmail, payload, { delay: "10 minutes", priority: -1 })
 * yield* queue.enqueue(SendEmail, payload, { runAt: new Date("2026-12-24T18:00:00Z") })
 * yield* queue.enqueue(SendEmail, payload, { unique: `order-email:${payload.orderId}` })
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface EnqueueOptions {
  /** When the job becomes due. Default: now (Effect's `Clock`). */
  readonly runAt?: Date | DateTime.DateTime | undefined
  /**
   * Due after this delay from now (an Effect `DurationInput`: milliseconds, `"5 seconds"`, a
   * `Duration`; not a bigint, which Effect reads as nanoseconds: refused with `InvalidEnqueueOption`,
   * path `delay`, reason `type`). Not with `runAt`: both given fail with `InvalidEnqueueOption`
   * (path `delay`, reason `conflict`).
   */
  readonly delay?: Exclude<Duration.DurationInput, bigint> | undefined
  /** An integer; lower runs first. Default: the job definition's priority. */
  readonly priority?: number | undefined
  /**
   * A unique key (1–255 characters), or {@link UniqueOptions}: the key, the states that guard it,
   * what an enqueue does to a pending job that holds it (`mode`), and a `period`. While a job with
   * this key is in one of the guarded states, enqueueing another writes no new job and returns the
   * existing job's id (`insert` also says `duplicate: true`).
   */
  readonly unique?: string | UniqueOptions | undefined
}

/**
 * What an enqueue does when a job of the same name that holds its unique key is `pending`:
 *
 * - `skip` (the default): nothing; the holder stays as it is.
 * - `replace` (debounce): the holder takes the new payload, priority and due time (`runAt`/`delay`,
 *   later or earlier). Enqueueing with `delay: "30 seconds"` on every change runs the job once,
 *   30 seconds after the last change, with the last payload.
 * - `throttle`: the holder takes the new payload and priority, and keeps the earlier of the two due
 *   times. Enqueueing with `delay: "30 seconds"` on every change runs the job at most every 30
 *   seconds (plus its run time), each time with the last payload.
 *
 * A holder that is `running` (or in another guarded state), or of another job name, is never
 * changed: the enqueue is a duplicate and writes nothing, whatever the mode. A job waiting to retry
 * is pending: it takes the payload and due time too, and keeps its attempts.
 *
 * @example
 * ```ts
 * yield* queue.enqueue(Reindex, { docId }, { delay: "30 seconds", unique: { key: `reindex:${docId}`, mode: "replace" } })
 * ```
 *
 * Source: BullMQ's deduplication modes (debounce: `extend` with `replace`; throttle), pg-boss's
 * `singletonKey` with its debounce and throttle sends.
 *
 * @since 0.2.0
 * @category models
 */
export type UniqueMode = "skip" | "replace" | "throttle"

/**
 * A unique key, the states in which a job holds it, what an enqueue does to a pending holder
 * (`mode`), and a `period` the key is unique within.
 *
 * Backed by a unique index (PostgreSQL: a partial index; MySQL/MariaDB: a generated column that is
 * NULL outside the guarded states), so it holds under concurrent enqueues from any number of
 * processes and under rollbacks: an enqueue that meets an uncommitted job with the same key waits
 * for that transaction, then inserts (it rolled back) or meets that job (it committed). Checked
 * before any SQL: a `mode` that is not one of {@link UniqueMode}, a `period` that is not a duration
 * of at least 1 ms in whole milliseconds, or a key with a period longer than 200 characters fail
 * with `InvalidEnqueueOption` (path `unique.mode`, `unique.period`, `unique.key`) and write nothing.
 *
 * Source: River's unique jobs (`UniqueOpts`: `ByArgs`/`ByPeriod`, states as a bit mask under a
 * unique index), pg-boss's `singletonKey` and `singletonSeconds`, Oban's `unique: [states: …]`,
 * BullMQ's deduplication modes.
 *
 * @example
 * ```ts
 * // At most one welcome email per user, also once it completed (while the completed job is kept)
 * yield* queue.enqueue(Welcome, { userId: 7 }, { unique: { key: "welcome:7", states: ["completed"] } })
 * // At most one digest per user and hour (UTC hours: buckets start at multiples of the period)
 * yield* queue.enqueue(Digest, { userId: 7 }, { unique: { key: "digest:7", period: "1 hour" } })
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface UniqueOptions {
  /**
   * 1–255 characters (1–200 with a `period`). Keys are shared by every job name: prefix them with
   * the name if that matters.
   */
  readonly key: string
  /**
   * The states in which an existing job with the key blocks a new one. `pending` and `running` are
   * always included (a job can go back to pending from running, so they cannot be left out); add
   * `completed`, `dead` or `cancelled` for "at most once while such a job is kept". Default
   * `["pending", "running"]`, and `["pending", "running", "completed"]` with a `period`. The states
   * are stored with the job: a later enqueue of the key is refused while *this* job is in one of
   * *its* states, whatever states the later enqueue gives.
   */
  readonly states?: ReadonlyArray<JobState> | undefined
  /** What an enqueue does to a pending holder of the key: see {@link UniqueMode}. Default `"skip"`. @since 0.2.0 */
  readonly mode?: UniqueMode | undefined
  /**
   * The key is unique within buckets of this length (an Effect `DurationInput`, whole milliseconds,
   * at least 1 ms; not a bigint, which Effect reads as nanoseconds): the enqueue's time (Effect's
   * `Clock`, not `runAt`) rounded down to a multiple of the period since the Unix epoch picks the
   * bucket. A second enqueue in the same bucket meets the first job (as `mode` says); one in the
   * next bucket writes a new job. The key is stored as `<key>` U+001F `<period ms>:<bucket start
   * ms>`. A completed job holds its key (see `states`) until it is pruned (`retention.completed`;
   * with 0, at the next prune pass).
   * @since 0.2.0
   */
  readonly period?: Exclude<Duration.DurationInput, bigint> | undefined
}

/**
 * What {@link QueueShape.insert} did.
 *
 * @example
 * ```ts
 * const { id, duplicate } = yield* queue.insert(Invoice, { id: 42 }, { unique: "invoice:42" })
 * if (duplicate) yield* Effect.log(`invoice 42 is already queued as job ${id}`)
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface InsertResult {
  /** The id of the job written, or of the existing job that holds the unique key. */
  readonly id: string
  /**
   * `true` when no new job was written because a job with the same unique key was in a guarded state
   * (River's `UniqueSkippedAsDuplicate`): `id` is that job's. With `unique.mode` `replace` or
   * `throttle` that job may have taken this enqueue's payload (see `replaced`); with `skip` nothing
   * was written. Always `false` without a unique key.
   */
  readonly duplicate: boolean
  /**
   * Only for a duplicate whose `unique.mode` is `replace` or `throttle`: `true` when the job holding
   * the key was pending and took this enqueue's payload (and due time), `false` when it was left as
   * it is (running, in another guarded state, or of another job name). Absent otherwise.
   * @since 0.2.0
   */
  readonly replaced?: boolean
}

/**
 * The options of `enqueueMany` and `insertMany`: as {@link EnqueueOptions} (for every payload),
 * with `unique` a function of each payload (and its index) that gives its unique key, its
 * {@link UniqueOptions}, or `undefined` for none.
 *
 * Each payload with a key is enqueued as `insert` would, one after the other in input order (two
 * payloads of one batch with one key: the second meets the first as a pending holder, as its mode
 * says), in one transaction with the payloads without a key. Duplicates give the holder's id.
 *
 * @example
 * ```ts
 * const ids = yield* queue.enqueueMany(SendEmail, payloads, { delay: "1 minute" }) // ids in input order
 * const results = yield* queue.insertMany(Reindex, docs, {
 *   delay: "30 seconds",
 *   unique: (doc) => ({ key: `reindex:${doc.id}`, mode: "replace" })
 * })
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface EnqueueManyOptions<P = any> extends Omit<EnqueueOptions, "unique"> {
  /**
   * Each payload's unique key (a string or {@link UniqueOptions}), or `undefined` for none. Called
   * once per payload, before any SQL; a key refused, or a function that throws, fails the whole
   * call with `InvalidEnqueueOption` (path `unique…`, the message names `payloads[i]`) and writes
   * nothing.
   * @since 0.2.0
   */
  readonly unique?: ((payload: P, index: number) => string | UniqueOptions | undefined) | undefined
}

/**
 * What the `Queue` service does: enqueue jobs (`enqueue`, `insert`, `enqueueMany`), read one
 * (`get`), cancel or retry one, and report a running attempt's progress.
 *
 * @example
 * ```ts
 * const queue = yield* Queue.Queue
 * const id = yield* queue.enqueue(SendEmail, { orderId: 1, to: "ada@example.com", placedAt: new Date() })
 * const info = yield* queue.get(id)
 * if (info.state === "pending") yield* queue.cancel(id)
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface QueueShape {
  /**
   * Encodes `payload` with the job's schema and inserts one job. Returns the job id — with a
   * `unique` key that a job already holds, that job's id (no new job is written; by `unique.mode`
   * a pending holder may take the payload; use `insert` to know which). Nothing is written, and no SQL sent, when it fails with `InvalidPayload` (the
   * payload does not encode with its schema, is not JSON as it is, or is too large: `reason` and
   * the `path` in the payload say which and where) or `InvalidEnqueueOption` (`runAt`, `delay`,
   * `priority`, the unique key or states, or the mutex key is refused: `path` names it).
   * `UniqueKeyContended`: see that error; `SqlError`: the database's.
   *
   * @example
   * ```ts
   * const id = yield* queue.enqueue(SendEmail, { to: "bob@example.com" }, { delay: "10 minutes" })
   * ```
   */
  readonly enqueue: <J extends Job.Any>(
    job: J,
    payload: Job.Payload<J>,
    options?: EnqueueOptions
  ) => Effect.Effect<string, InvalidPayload | InvalidEnqueueOption | UniqueKeyContended | SqlError>
  /**
   * As `enqueue`, and says whether a job was written: `{ id, duplicate, replaced? }`, where
   * `duplicate: true` means a job with the same unique key was in a guarded state and no new job was
   * written, and `replaced` (with `unique.mode` `replace` or `throttle`) whether that job took the
   * payload. Fails as `enqueue`.
   */
  readonly insert: <J extends Job.Any>(
    job: J,
    payload: Job.Payload<J>,
    options?: EnqueueOptions
  ) => Effect.Effect<InsertResult, InvalidPayload | InvalidEnqueueOption | UniqueKeyContended | SqlError>
  /**
   * Inserts many jobs of one job name with multi-row inserts (in one transaction). Returns their
   * ids in input order (for a payload whose unique key a job holds, that job's id). If any payload
   * fails to encode, or any unique key is refused, nothing is written. Payloads with unique keys
   * (the `unique` function) cost a statement each (see {@link EnqueueManyOptions}). Fails as
   * `enqueue` (the first payload refused gives the `InvalidPayload`); payloads that are not an
   * iterable, or a `unique` that is not a function, fail with `InvalidEnqueueOption` (path
   * `payloads`, `unique`).
   */
  readonly enqueueMany: <J extends Job.Any>(
    job: J,
    payloads: Iterable<Job.Payload<J>>,
    options?: EnqueueManyOptions<Job.Payload<J>>
  ) => Effect.Effect<ReadonlyArray<string>, InvalidPayload | InvalidEnqueueOption | UniqueKeyContended | SqlError>
  /**
   * As `enqueueMany`, and says for each payload what `insert` says: `{ id, duplicate, replaced? }`
   * in input order.
   *
   * @example
   * ```ts
   * const results = yield* queue.insertMany(Invoice, invoices, { unique: (i) => `invoice:${i.id}` })
   * const written = results.filter((r) => !r.duplicate).length
   * ```
   * @since 0.2.0
   */
  readonly insertMany: <J extends Job.Any>(
    job: J,
    payloads: Iterable<Job.Payload<J>>,
    options?: EnqueueManyOptions<Job.Payload<J>>
  ) => Effect.Effect<ReadonlyArray<InsertResult>, InvalidPayload | InvalidEnqueueOption | UniqueKeyContended | SqlError>
  /** A job's state, attempts, timestamps, error history and result. */
  readonly get: (id: string) => Effect.Effect<JobInfo, JobNotFound | SqlError>
  /**
   * Cancels a job. A pending job never runs; a running job's handler is interrupted wherever it runs
   * (at once in this process, by `NOTIFY` on PostgreSQL, within the worker's `rescueInterval` on
   * MySQL/MariaDB). Returns `true` when the job was pending or running and is now `cancelled`,
   * `false` when it had already ended. Fails with `JobNotFound` when there is no such row: never
   * written, pruned, or completed with `retention.completed` 0 (its row is deleted by its end).
   */
  readonly cancel: (id: string) => Effect.Effect<boolean, JobNotFound | SqlError>
  /**
   * Puts a `dead` or `cancelled` job back to `pending`, due now, with a fresh set of attempts (its
   * error history is kept). Returns `false` when the job was in another state, or when another job
   * now holds its unique key.
   */
  readonly retry: (id: string) => Effect.Effect<boolean, JobNotFound | SqlError>
  /**
   * Records the progress of a running attempt, shown by `sqlane jobs show` and `sqlane status`:
   * `value` is any finite number (e.g. a percentage, or items done) and `message` a short text.
   * Call it from a handler with its context: `queue.progress(ctx, 40, "resizing images")`. Each call
   * replaces the previous one. Best effort: it never fails the attempt (a failed write is logged),
   * and does nothing once the attempt is no longer running.
   */
  readonly progress: (
    attempt: { readonly id: string; readonly attempt: number },
    value: number,
    message?: string
  ) => Effect.Effect<void>
}

/**
 * The queue: enqueue jobs, read, cancel and retry them. Provided by `QueueLive`; an enqueue inside
 * your `sql.withTransaction` commits or rolls back with it.
 *
 * @example
 * ```ts
 * const placeOrder = (to: string) =>
 *   Effect.gen(function*() {
 *     const sql = yield* SqlClient.SqlClient
 *     const queue = yield* Queue.Queue
 *     return yield* sql.withTransaction(Effect.gen(function*() {
 *       const [order] = yield* sql<{ id: number }>`INSERT INTO orders (email) VALUES (${to}) RETURNING id`
 *       return yield* queue.enqueue(SendEmail, { orderId: order!.id, to, placedAt: new Date() })
 *     }))
 *   })
 * ```
 *
 * @since 0.1.0
 * @category tags
 */
export class Queue extends Context.Tag("sqlane/Queue")<Queue, QueueShape>() {}

const parseJson = (text: string | null): unknown => {
  if (text === null) return null
  try {
    return JSON.parse(text)
  } catch {
    return text
  }
}

const decodeErrors = Schema.decodeUnknownOption(ErrorHistory)

/** A producer span around an enqueue, when a tracer is installed (see `withSpanIfTraced`). */
const traced = <A, E, R>(self: Effect.Effect<A, E, R>, name: string, jobName: string): Effect.Effect<A, E, R> =>
  withSpanIfTraced(name, { kind: "producer", attributes: { "sqlane.job.name": jobName }, captureStackTrace: false })(self)

/**
 * Builds the `Queue` service (used by {@link layer}; apps use `QueueLive`).
 *
 * @example
 * ```ts
 * // QueueLive provides Queue; to build it on its own requirements:
 * const QueueOnly = Layer.effect(Queue.Queue, Queue.make)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = Effect.gen(function*() {
  const { driver } = yield* Database
  const notifier = yield* Notifier
  const enqueuer = makeEnqueuer(driver, notifier, yield* SqlClient.SqlClient)
  const service: QueueShape = {
    enqueue: (job, payload, options) =>
      traced(Effect.map(enqueuer.insert(job, payload, options), (r) => r.id), "sqlane.enqueue", job.name),
    insert: (job, payload, options) => traced(enqueuer.insert(job, payload, options), "sqlane.enqueue", job.name),
    enqueueMany: (job, payloads, options) =>
      traced(enqueuer.insertMany(job, payloads, options), "sqlane.enqueueMany", job.name),
    insertMany: (job, payloads, options) =>
      traced(enqueuer.insertManyResults(job, payloads, options), "sqlane.enqueueMany", job.name),
    cancel: (id) =>
      Effect.gen(function*() {
        const info = yield* service.get(id)
        const cancelled = yield* driver.jobCancel(id, yield* nowMicros)
        if (cancelled && info.state === "running") yield* notifier.cancelled([id])
        return cancelled
      }),
    retry: (id) =>
      Effect.gen(function*() {
        const info = yield* service.get(id)
        const retried = yield* driver.jobRetry(id, yield* nowMicros)
        if (retried) {
          const inTransaction = Option.isSome(yield* Effect.serviceOption(SqlClient.TransactionConnection))
          // The retry's UPDATE sends no NOTIFY: other processes get the trailing one.
          yield* notifier.enqueued([info.name], !inTransaction, false)
        }
        return retried
      }),
    progress: (attempt, value, message) =>
      Effect.gen(function*() {
        if (!Number.isFinite(value)) {
          return yield* Effect.logWarning(`sqlane: progress must be a finite number, got ${value}; ignored`)
        }
        const nowUs = yield* nowMicros
        const json = JSON.stringify({
          value,
          ...(message === undefined ? {} : { message: message.replaceAll("\u0000", "\uFFFD") }),
          attempt: attempt.attempt,
          at: microsToDate(nowUs).toISOString()
        })
        yield* driver.jobProgressSet(attempt.id, attempt.attempt, json)
      }).pipe(
        Effect.catchAllCause((cause) => Effect.logWarning("sqlane: cannot record progress", cause)),
        Effect.annotateLogs({ package: "sqlane", "sqlane.job.id": attempt.id })
      ),
    get: (id) =>
      Effect.gen(function*() {
        if (!/^\d{1,19}$/.test(id) || BigInt(id) > 9223372036854775807n) return yield* new JobNotFound({ id })
        const row = yield* driver.jobGet(id)
        if (row === undefined) return yield* new JobNotFound({ id })
        return new JobInfo({
          id: row.id,
          name: row.name,
          state: Schema.is(JobState)(row.state) ? row.state : "dead",
          payload: parseJson(row.payload),
          priority: row.priority,
          attempts: row.attempts,
          runAt: microsToDate(row.runAtUs),
          createdAt: microsToDate(row.createdAtUs),
          claimedAt: Option.map(Option.fromNullable(row.claimedAtUs), microsToDate),
          finishedAt: Option.map(Option.fromNullable(row.finishedAtUs), microsToDate),
          lastError: Option.fromNullable(row.lastError),
          errors: Option.getOrElse(decodeErrors(row.errors ?? "[]"), () => []),
          result: Option.map(Option.fromNullable(row.result), parseJson)
        })
      })
  }
  return service
})

/**
 * The `Queue` service as a layer, on sqlane's internal `Database` and the `Notifier`; `QueueLive`
 * provides it with everything it needs.
 *
 * @example
 * ```ts
 * // QueueLive includes it; an app provides QueueLive rather than this layer
 * const AppLive = QueueLive().pipe(Layer.provideMerge(PgClient.layerConfig({ url: Config.redacted("DATABASE_URL") })))
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<Queue, never, Database | Notifier | SqlClient.SqlClient> = Layer.effect(Queue, make)

/**
 * A connection in a transaction your app began itself (see {@link joinTransaction}): a node-postgres
 * `Client` or `PoolClient`, or a mysql2 `Connection` or `PoolConnection` (callback or promise API).
 *
 * @since 0.2.0
 * @category models
 */
export type { CallerConnection } from "../internal/callerConnection.js"

/**
 * Runs `effect` with every statement of the `SqlClient` — sqlane's enqueue and your own — on
 * `connection`, inside the transaction you began on it with another client than `@effect/sql`
 * (node-postgres or mysql2 directly, or under an ORM). The jobs commit or roll back with that
 * transaction: sqlane sends neither `BEGIN` nor `COMMIT` (a large `enqueueMany` takes a savepoint).
 * The statements are compiled by the queue's client and sent on `connection`, one at a time: do not
 * use the connection for anything else until the effect is done. On PostgreSQL the enqueue's
 * `NOTIFY` is delivered at your `COMMIT`; this process's workers are hinted `hintDelay` after the
 * enqueue (sqlane cannot see your commit). Not a pool: the effect dies when `connection` is a pool, or
 * a connection of the other database. On MySQL/MariaDB any connection works, with or without
 * `multipleStatements`.
 *
 * @example
 * ```ts
 * const client = await pool.connect() // node-postgres
 * await client.query("BEGIN")
 * await client.query("INSERT INTO orders (id, email) VALUES ($1, $2)", [42, "bob@example.com"])
 * await runtime.runPromise(
 *   Effect.flatMap(Queue.Queue, (queue) => queue.enqueue(SendEmail, { orderId: 42, to: "bob@example.com" }))
 *     .pipe(Queue.joinTransaction(client))
 * )
 * await client.query("COMMIT") // the job is pending from here on; ROLLBACK: it never existed
 * client.release()
 * ```
 * Source: pg-boss's `db` option of `send` (an object with `executeSql` run in the caller's
 * transaction), River's `InsertTx` (an insert on the caller's `pgx.Tx`).
 *
 * @since 0.2.0
 * @category transactions
 */
export const joinTransaction: (
  connection: CallerConnection
) => <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R | SqlClient.SqlClient> = join
