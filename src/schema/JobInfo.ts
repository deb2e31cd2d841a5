/**
 * What `Queue.get` returns about a job: its state, attempts, timestamps, errors and result.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"

/**
 * A job's state.
 *
 * - `pending`: waiting for its `run_at` (new, delayed, or waiting to retry);
 * - `running`: claimed by a worker, attempt counted;
 * - `completed`: the handler succeeded;
 * - `dead`: dead-lettered — retries exhausted, a permanent failure, a payload that failed to decode, or
 *   its worker was lost on the last attempt;
 * - `cancelled`: cancelled by `Queue.cancel`; `Queue.retry` puts it back to pending.
 *
 * @example
 * ```ts
 * // A state from a query string, checked before it reaches your code
 * const state = Schema.decodeUnknownSync(JobInfo.JobState)("dead") // "dead"; "done" throws
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export const JobState = Schema.Literal("pending", "running", "completed", "dead", "cancelled")

/**
 * A job's state: `pending`, `running`, `completed`, `dead` or `cancelled`.
 *
 * @example
 * ```ts
 * const finished = (state: JobInfo.JobState) => state === "completed" || state === "dead" || state === "cancelled"
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export type JobState = typeof JobState.Type

/**
 * One failed attempt, as stored in the job's error history.
 *
 * @example
 * ```ts
 * const info = yield* queue.get(id)
 * for (const e of info.errors) yield* Effect.log(`attempt ${e.attempt} (${e.kind}): ${e.message}`)
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export class AttemptError extends Schema.Class<AttemptError>("sqlane/AttemptError")({
  /** The attempt's number, from 1. */
  attempt: Schema.Number,
  /** When the failure was recorded (ISO 8601, UTC). */
  at: Schema.String,
  /**
   * `failure`: the handler failed with a typed error; `defect`: it died or threw;
   * `decode`: the stored payload did not match the job's schema; `timeout`: it ran longer than the
   * job's `timeout`; `lost`: its worker died or stopped heartbeating (the message is "worker lost");
   * `interrupted`: the attempt was interrupted.
   */
  kind: Schema.Literal("failure", "defect", "decode", "timeout", "lost", "interrupted"),
  /** A one-line description. */
  message: Schema.String,
  /** The `_tag` of a tagged error, when there is one. */
  tag: Schema.optional(Schema.String),
  /** The typed failure encoded with the job's `failure` schema, when it encodes. */
  error: Schema.optional(Schema.Unknown),
  /** A defect's stack, when it has one, cut at 4,096 characters (records written by earlier versions have none). */
  stack: Schema.optional(Schema.String),
  /**
   * A defect's own enumerable properties (an error's `code`, `errno`, `syscall`…) as JSON values, when
   * it has any: a value JSON cannot hold as its description, a long one cut; at most 4,096 characters
   * of JSON in all, the key `"…"` saying how many were left out.
   */
  properties: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Unknown }))
}) {}

/**
 * A job's error history as stored in its `errors` column: a JSON array of {@link AttemptError}.
 *
 * @example
 * ```ts
 * // The `errors` column of a job row, read with your own SQL
 * const history = Schema.decodeUnknownSync(JobInfo.ErrorHistory)(row.errors)
 * const kinds = history.map((e) => e.kind) // e.g. ["failure", "timeout"]
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export const ErrorHistory = Schema.parseJson(Schema.Array(AttemptError))

/**
 * A job as `Queue.get` returns it: its state, payload (as stored), attempts, times, error history
 * and result.
 *
 * @example
 * ```ts
 * const queue = yield* Queue.Queue
 * const info = yield* queue.get(id)
 * if (info.state === "dead") yield* Effect.log(`${info.name} ${info.id} died after ${info.attempts} attempts: ${Option.getOrElse(info.lastError, () => "")}`)
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export class JobInfo extends Schema.Class<JobInfo>("sqlane/JobInfo")({
  id: Schema.String,
  name: Schema.String,
  state: JobState,
  /** The payload as stored (encoded by the job's payload schema). */
  payload: Schema.Unknown,
  priority: Schema.Number,
  /** Attempts started so far; counted at claim. */
  attempts: Schema.Number,
  runAt: Schema.DateFromSelf,
  createdAt: Schema.DateFromSelf,
  claimedAt: Schema.OptionFromSelf(Schema.DateFromSelf),
  finishedAt: Schema.OptionFromSelf(Schema.DateFromSelf),
  lastError: Schema.OptionFromSelf(Schema.String),
  /** Every failed attempt, oldest first. */
  errors: Schema.Array(AttemptError),
  /** The handler's result as stored (encoded by the job's success schema). */
  result: Schema.OptionFromSelf(Schema.Unknown)
}) {}
