/**
 * Enqueues jobs and reads them back.
 *
 * `enqueue` and `enqueueMany` join the caller's ambient `sql.withTransaction`: the job rows
 * commit or roll back with the app's own rows.
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
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { Database } from "../internal/Database.js"
import type { InsertRow } from "../internal/statements.js"
import { microsToDate, nowMicros } from "../internal/time.js"
import { InvalidPayload, JobNotFound } from "../schema/Errors.js"
import { type Job, schemasOf } from "../schema/Job.js"
import { ErrorHistory, JobInfo, JobState } from "../schema/JobInfo.js"
import { Notifier } from "./Notifier.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface EnqueueOptions {
  /** When the job becomes due. Default: now (Effect's `Clock`). */
  readonly runAt?: Date | DateTime.DateTime | undefined
  /** Due after this delay from now; ignored when `runAt` is given. */
  readonly delay?: Duration.DurationInput | undefined
  /** An integer; lower runs first. Default: the job definition's priority. */
  readonly priority?: number | undefined
}

/**
 * @since 0.1.0
 * @category models
 */
export interface QueueShape {
  /**
   * Encodes `payload` with the job's schema and inserts one job. Returns the job id.
   * Fails with `InvalidPayload` (nothing written) when the payload does not encode.
   */
  readonly enqueue: <J extends Job.Any>(
    job: J,
    payload: Job.Payload<J>,
    options?: EnqueueOptions
  ) => Effect.Effect<string, InvalidPayload | SqlError>
  /**
   * Inserts many jobs of one job name with multi-row inserts (in one transaction). Returns their
   * ids in input order. If any payload fails to encode, nothing is written.
   */
  readonly enqueueMany: <J extends Job.Any>(
    job: J,
    payloads: Iterable<Job.Payload<J>>,
    options?: EnqueueOptions
  ) => Effect.Effect<ReadonlyArray<string>, InvalidPayload | SqlError>
  /** A job's state, attempts, timestamps, error history and result. */
  readonly get: (id: string) => Effect.Effect<JobInfo, JobNotFound | SqlError>
  /**
   * Cancels a job. A pending job never runs; a running job's handler is interrupted wherever it runs
   * (at once in this process, by `NOTIFY` on PostgreSQL, within the worker's `rescueInterval` on
   * MySQL/MariaDB). Returns `true` when the job was pending or running and is now `cancelled`,
   * `false` when it had already ended.
   */
  readonly cancel: (id: string) => Effect.Effect<boolean, JobNotFound | SqlError>
  /**
   * Puts a `dead` or `cancelled` job back to `pending`, due now, with a fresh set of attempts (its
   * error history is kept). Returns `false` when the job was in another state.
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
 * @since 0.1.0
 * @category tags
 */
export class Queue extends Context.Tag("sqlane/Queue")<Queue, QueueShape>() {}

/**
 * Encodes a payload to the JSON text stored in the row.
 *
 * @internal
 */
export const encodePayload = <J extends Job.Any>(job: J, payload: Job.Payload<J>) =>
  Schema.encode(schemasOf(job).payload)(payload).pipe(
    Effect.mapError((e) => new InvalidPayload({ job: job.name, message: ParseResult.TreeFormatter.formatErrorSync(e) })),
    Effect.flatMap((encoded) =>
      Effect.try({
        try: () => {
          const json = JSON.stringify(encoded, (_key, value) => {
            // JSON would store these as null, and the payload would no longer decode at claim.
            if (typeof value === "number" && !Number.isFinite(value)) {
              throw new Error(`${value} is not a JSON number`)
            }
            return value
          })
          if (json === undefined) throw new Error("the encoded payload is not JSON (undefined or a function)")
          return json
        },
        catch: (e) =>
          new InvalidPayload({
            job: job.name,
            message: `the encoded payload is not JSON-serializable: ${e instanceof Error ? e.message : String(e)}`
          })
      })
    )
  )

const parseJson = (text: string | null): unknown => {
  if (text === null) return null
  try {
    return JSON.parse(text)
  } catch {
    return text
  }
}

const decodeErrors = Schema.decodeUnknownOption(ErrorHistory)

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = Effect.gen(function*() {
  const { statements } = yield* Database
  const notifier = yield* Notifier

  const resolve = (job: Job.Any, options: EnqueueOptions | undefined) =>
    Effect.gen(function*() {
      const now = yield* nowMicros
      const priority = options?.priority ?? job.priority
      if (!Number.isSafeInteger(priority) || priority < -2147483648 || priority > 2147483647) {
        return yield* new InvalidPayload({
          job: job.name,
          message: `priority must be a 32-bit integer, got ${priority}`
        })
      }
      let runAtUs = now
      if (options?.runAt !== undefined) {
        runAtUs = (options.runAt instanceof Date ? options.runAt.getTime() : DateTime.toEpochMillis(options.runAt)) *
          1000
      } else if (options?.delay !== undefined) {
        runAtUs = now + Math.round(Duration.toMillis(Duration.decode(options.delay)) * 1000)
      }
      // DATETIME and timestamptz both hold years 1000–9999.
      if (!Number.isFinite(runAtUs) || runAtUs < -30610224000000000 || runAtUs >= 253402300800000000) {
        return yield* new InvalidPayload({ job: job.name, message: "runAt (or now + delay) is not a date in years 1000–9999" })
      }
      return { now, priority, runAtUs }
    })

  const insert = (job: Job.Any, rows: ReadonlyArray<InsertRow>, nowUs: number) =>
    Effect.gen(function*() {
      const inTransaction = Option.isSome(yield* Effect.serviceOption(SqlClient.TransactionConnection))
      const ids = yield* statements.jobInsertMany(rows, nowUs, yield* notifier.notifyPayload([job.name]))
      yield* notifier.enqueued([job.name], !inTransaction)
      return ids
    })

  const service: QueueShape = {
    enqueue: (job, payload, options) =>
      Effect.gen(function*() {
        const json = yield* encodePayload(job, payload)
        const { now, priority, runAtUs } = yield* resolve(job, options)
        const ids = yield* insert(job, [{ name: job.name, payload: json, priority, runAtUs }], now)
        return ids[0]
      }).pipe(Effect.withSpan("sqlane.enqueue", { attributes: { "sqlane.job.name": job.name }, captureStackTrace: false })),
    enqueueMany: (job, payloads, options) =>
      Effect.gen(function*() {
        const json = yield* Effect.forEach(payloads, (p) => encodePayload(job, p))
        if (json.length === 0) return []
        const { now, priority, runAtUs } = yield* resolve(job, options)
        return yield* insert(job, json.map((payload) => ({ name: job.name, payload, priority, runAtUs })), now)
      }).pipe(Effect.withSpan("sqlane.enqueueMany", {
        attributes: { "sqlane.job.name": job.name },
        captureStackTrace: false
      })),
    cancel: (id) =>
      Effect.gen(function*() {
        const info = yield* service.get(id)
        const cancelled = yield* statements.jobCancel(id, yield* nowMicros)
        if (cancelled && info.state === "running") yield* notifier.cancelled([id])
        return cancelled
      }),
    retry: (id) =>
      Effect.gen(function*() {
        const info = yield* service.get(id)
        const retried = yield* statements.jobRetry(id, yield* nowMicros)
        if (retried) {
          const inTransaction = Option.isSome(yield* Effect.serviceOption(SqlClient.TransactionConnection))
          yield* notifier.enqueued([info.name], !inTransaction)
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
        yield* statements.jobProgressSet(attempt.id, attempt.attempt, json)
      }).pipe(
        Effect.catchAllCause((cause) => Effect.logWarning("sqlane: cannot record progress", cause)),
        Effect.annotateLogs({ package: "sqlane", "sqlane.job.id": attempt.id })
      ),
    get: (id) =>
      Effect.gen(function*() {
        if (!/^\d{1,19}$/.test(id) || BigInt(id) > 9223372036854775807n) return yield* new JobNotFound({ id })
        const row = yield* statements.jobGet(id)
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
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<Queue, never, Database | Notifier> = Layer.effect(Queue, make)
