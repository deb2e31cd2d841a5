/**
 * Typed job definitions: a job name, a payload `Schema`, an optional success and failure
 * `Schema`, a retry `Schedule` and a default priority.
 *
 * A definition is plain data; it is shared by the code that enqueues (`Queue.enqueue`) and
 * the code that runs the job (`Job.handler` given to `Worker.layer`).
 *
 * @since 0.1.0
 */
import type * as Duration from "effect/Duration"
import type * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import { durationMillisNotBigint } from "../internal/options.js"
import { checkJobName, maxIdentifierLength } from "../internal/sanitize.js"
import { InvalidJobDefinition, type RateLimited } from "./Errors.js"
import { checkLimits, type Limits } from "./JobLimits.js"

export { maxLimit, maxRateStarts } from "./JobLimits.js"
export type { Limits, Rate } from "./JobLimits.js"

/**
 * A job definition (from {@link make}): its name, the schemas of its payload, result and typed
 * failure, its retry `Schedule`, default priority, timeout and mutex key.
 *
 * @example
 * ```ts
 * const SendEmail: Job.Job<"send-email", { readonly to: string }, { readonly to: string }> = Job.make("send-email", {
 *   payload: Schema.Struct({ to: Schema.String })
 * })
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface Job<
  out Name extends string = string,
  in out Payload = any,
  in out PayloadEncoded = any,
  in out Success = any,
  in out SuccessEncoded = any,
  in out Failure = any,
  in out FailureEncoded = any
> extends Job.Any {
  readonly _tag: "sqlane/Job"
  /**
   * The job name: the key workers claim by. 1–255 characters (UTF-16 code units), without U+0000
   * or lone surrogates; quotes, `%`, `_` and backslashes are ordinary characters.
   */
  readonly name: Name
  /** Encodes the payload at enqueue, decodes it at claim. */
  readonly payload: Schema.Schema<Payload, PayloadEncoded>
  /** Encodes the handler's result, which is stored on the job row. */
  readonly success: Schema.Schema<Success, SuccessEncoded>
  /** The typed errors the handler may fail with; encoded into the attempt's error record. */
  readonly failure: Schema.Schema<Failure, FailureEncoded>
  /**
   * When to retry a failed attempt. The schedule is stepped once per failed attempt, with the
   * error (a `Failure`, or the defect) as its input; its delay is the wait before the next
   * attempt, and when it is done the job is dead-lettered.
   */
  readonly retry: Schedule.Schedule<unknown, unknown>
  /** Default priority of enqueued jobs: lower runs first. */
  readonly priority: number
  /** Failures for which this returns `true` dead-letter at once, without a retry. */
  readonly isPermanent: (failure: Failure) => boolean
  /** Longest an attempt may run (ms); its handler is then interrupted and the attempt fails. */
  readonly timeoutMillis: number | undefined
  /**
   * The mutex key of a job, from its payload: jobs that share a key never run at the same time,
   * across every worker, process and job name. `undefined` (the function, or its result): no key.
   */
  readonly mutexKey: ((payload: Payload) => string | undefined) | undefined
  /** The job name's concurrency limits (see {@link Limits}), or `undefined` for none. */
  readonly limits: Limits<Payload> | undefined
}


/**
 * Types derived from a job definition: `Job.Any` (any definition), and the payload, encoded
 * payload, success and failure types of one.
 *
 * @example
 * ```ts
 * const names = (jobs: ReadonlyArray<Job.Job.Any>) => jobs.map((job) => job.name)
 * type SendEmailPayload = Job.Job.Payload<typeof SendEmail> // { readonly to: string }
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export declare namespace Job {
  /**
   * Any job definition.
   *
   * @example
   * ```ts
   * const byName = (jobs: ReadonlyArray<Job.Job.Any>) => new Map(jobs.map((job) => [job.name, job]))
   * ```
   */
  export interface Any {
    readonly _tag: "sqlane/Job"
    readonly name: string
    readonly payload: Schema.Schema.All
    readonly success: Schema.Schema.All
    readonly failure: Schema.Schema.All
    readonly retry: Schedule.Schedule<unknown, unknown>
    readonly priority: number
    readonly isPermanent: (failure: never) => boolean
    readonly timeoutMillis: number | undefined
    readonly mutexKey: ((payload: never) => string | undefined) | undefined
    readonly limits: Limits<never> | undefined
  }
  /**
   * The decoded payload type of a job.
   *
   * @example
   * ```ts
   * const payload: Job.Job.Payload<typeof SendEmail> = { orderId: 1, to: "ada@example.com", placedAt: new Date() }
   * ```
   */
  export type Payload<J extends Any> = Schema.Schema.Type<J["payload"]>
  /**
   * The encoded (stored) payload type of a job.
   *
   * @example
   * ```ts
   * // What `Queue.get(id).payload` holds: `placedAt` as an ISO string
   * const stored: Job.Job.PayloadEncoded<typeof SendEmail> = { orderId: 1, to: "ada@example.com", placedAt: "2026-12-01T00:00:00.000Z" }
   * ```
   */
  export type PayloadEncoded<J extends Any> = Schema.Schema.Encoded<J["payload"]>
  /**
   * The success type of a job's handler.
   *
   * @example
   * ```ts
   * const Resize = Job.make("resize", { payload: Schema.String, success: Schema.Struct({ bytes: Schema.Number }) })
   * const result: Job.Job.Success<typeof Resize> = { bytes: 1024 }
   * ```
   */
  export type Success<J extends Any> = Schema.Schema.Type<J["success"]>
  /**
   * The typed failure of a job's handler.
   *
   * @example
   * ```ts
   * const Charge = Job.make("charge", { payload: Schema.Number, failure: CardDeclined })
   * const onFailure = (error: Job.Job.Failure<typeof Charge>) => Effect.logWarning(error.message)
   * ```
   */
  export type Failure<J extends Any> = Schema.Schema.Type<J["failure"]>
}

/**
 * The default retry policy: exponential backoff from 1 s (doubling), each delay capped at
 * 6 hours, with jitter (each delay multiplied by a random factor in [0.8, 1.2]), for
 * 25 attempts in all (24 retries). Without jitter the delays sum to about 3 days.
 *
 * Source: the shape of Sidekiq's, Oban's and River's defaults (exponential, jittered,
 * about 20–25 attempts).
 *
 * @example
 * ```ts
 * // Keep the default policy but stop after 10 attempts
 * const Sync = Job.make("sync", {
 *   payload: Schema.String,
 *   retry: Job.defaultRetry.pipe(Schedule.intersect(Schedule.recurs(9)))
 * })
 * ```
 *
 * @since 0.1.0
 * @category retry
 */
export const defaultRetry: Schedule.Schedule<unknown, unknown> = Schedule.exponential("1 second").pipe(
  Schedule.union(Schedule.spaced("6 hours")),
  Schedule.jittered,
  Schedule.intersect(Schedule.recurs(24)),
  Schedule.asVoid
)

/** The attempts a schedule made by {@link attempts} (or {@link defaultRetry}) allows. */
const attemptsOfSchedule = new WeakMap<Schedule.Schedule<unknown, unknown>, number>([[defaultRetry, 25]])

/**
 * How many attempts a job's retry schedule allows, when it was made by {@link attempts} or is
 * {@link defaultRetry} (a schedule of one's own does not say: `undefined`). For the worker's logs.
 *
 * @internal
 */
export const maxAttemptsOf = (job: Job.Any): number | undefined => attemptsOfSchedule.get(job.retry)

/**
 * The most attempts a job can have with a schedule that recurs `n` times: `n + 1`.
 * A helper for writing retry policies by attempt count:
 * `retry: Job.attempts(5, Schedule.spaced("10 seconds"))` allows 5 attempts, 10 s apart.
 * `n` must be a whole number, at least 1: anything else (NaN, 2.5, 0) throws an
 * `InvalidJobDefinition` (option `attempts`).
 *
 * @example
 * ```ts
 * const Ping = Job.make("ping", {
 *   payload: Schema.String,
 *   retry: Job.attempts(5, Schedule.spaced("10 seconds")) // 5 attempts, 10 s apart
 * })
 * ```
 *
 * @since 0.1.0
 * @category retry
 */
export const attempts = (
  max: number,
  schedule: Schedule.Schedule<unknown, unknown> = Schedule.exponential("1 second").pipe(Schedule.jittered)
): Schedule.Schedule<unknown, unknown> => {
  if (!Number.isSafeInteger(max) || max < 1) {
    throw new InvalidJobDefinition({
      option: "attempts",
      reason: typeof max === "number" ? "range" : "type",
      message: `Job.attempts takes a whole number of attempts, at least 1; got ${max}`
    })
  }
  const retry = schedule.pipe(Schedule.intersect(Schedule.recurs(max - 1)), Schedule.asVoid)
  attemptsOfSchedule.set(retry, max)
  return retry
}

/**
 * Defines a job. A definition out of range throws an `InvalidJobDefinition` (`Errors`) here, when
 * it is made — a programming error, found at start-up — naming the `option` (`name`, `priority`,
 * `timeout`) and the `reason`.
 *
 * @example
 * ```ts
 * const SendEmail = Job.make("send-email", {
 *   payload: Schema.Struct({ orderId: Schema.Number, to: Schema.String }),
 *   failure: Schema.Union(MailboxFull, InvalidAddress),
 *   isPermanent: (e) => e._tag === "InvalidAddress"
 * })
 * ```
 *
 * @param name job name, 1–255 characters (UTF-16 code units) without U+0000 or lone surrogates;
 *   any other character, quotes, `%`, `_` and backslashes included, is stored and matched as it is.
 *   A name out of range throws `InvalidJobDefinition` here, at definition; a definition that
 *   bypasses this check is refused at enqueue with `InvalidEnqueueOption` (path `name`).
 * @param options.payload schema of the payload (required)
 * @param options.success schema of the handler's result (default: `Schema.Void`, nothing stored)
 * @param options.failure schema of the handler's typed errors (default: `Schema.Never`)
 * @param options.retry retry `Schedule` (default: {@link defaultRetry})
 * @param options.priority default priority, an integer; lower runs first (default 0); anything else throws
 *   `InvalidJobDefinition`
 * @param options.isPermanent failures that dead-letter at once (default: none)
 * @param options.timeout longest an attempt may run; then its handler is interrupted and the attempt
 *   fails with `JobTimeout` (default: none). A duration that does not decode, is not finite (NaN,
 *   ±Infinity, `Duration.infinity`), is not longer than 0 or is a bigint (Effect reads one as
 *   nanoseconds) throws `InvalidJobDefinition` here, at definition.
 * @param options.mutexKey the job's mutex key, computed from the (decoded) payload at enqueue, 1–255
 *   characters, or `undefined` for none: jobs that share a key — of any job names — never run at the
 *   same time, across all workers and processes (a unique index over running keys guarantees it). A
 *   job waiting to retry holds no key. Workers claim jobs of a name with a `mutexKey` by a second,
 *   slower claim statement, so give it only to jobs that need it, and give every process the same
 *   definition: a worker whose definition has no `mutexKey` never claims jobs that carry a key.
 *   Jobs of one key run one at a time in claim order (priority, `run_at`, id) but a failed job that
 *   waits to retry lets the next one run. Source: graphile-worker's named queues (`queue_name`: its
 *   jobs run one at a time), Oban Pro's partitioned global limit of 1, BullMQ Pro's groups.
 *   (default: none)
 * @param options.limits concurrency limits of the job name, across every worker and process: `running`
 *   (attempts of the name at once), `key` (the job's concurrency key, from its payload) and
 *   `runningPerKey` (attempts of one key at once), `rate` and `ratePerKey` (starts per window, see
 *   {@link Rate}); see {@link Limits}. A limit that is not an integer from 1 to {@link maxLimit}, a
 *   bad rate (a `per` given as a bigint included), `runningPerKey` / `ratePerKey` without `key`, or
 *   an unknown option (`runing`), throws `InvalidJobDefinition`. Give
 *   every process the same definition (a worker whose definition has no limits, and that no run-time
 *   limit reached, would claim the name's jobs without slots). (default: none)
 * @since 0.1.0
 * @category constructors
 */
export const make = <
  const Name extends string,
  P,
  PI,
  S = void,
  SI = void,
  E = never,
  EI = never
>(
  name: Name,
  options: {
    readonly payload: Schema.Schema<P, PI>
    readonly success?: Schema.Schema<S, SI> | undefined
    readonly failure?: Schema.Schema<E, EI> | undefined
    readonly retry?: Schedule.Schedule<unknown, any> | undefined
    readonly priority?: number | undefined
    readonly isPermanent?: ((failure: E) => boolean) | undefined
    readonly timeout?: Exclude<Duration.DurationInput, bigint> | undefined
    readonly mutexKey?: ((payload: P) => string | undefined) | undefined
    readonly limits?: Limits<P> | undefined
  }
): Job<Name, P, PI, S, SI, E, EI> => {
  const problem = checkJobName(name)
  if (problem !== undefined) {
    throw new InvalidJobDefinition({
      ...(typeof name === "string" ? { job: name.slice(0, 300) } : {}),
      option: "name",
      reason: typeof name !== "string"
        ? "type"
        : name.length === 0 || name.length > maxIdentifierLength
        ? "range"
        : "characters",
      message: `a job name must be 1 to 255 UTF-16 code units without U+0000 or a trailing space; this one ${problem}`
    })
  }
  const priority = options.priority ?? 0
  if (!Number.isSafeInteger(priority)) {
    throw new InvalidJobDefinition({
      job: name,
      option: "priority",
      reason: typeof priority === "number" ? "range" : "type",
      message: `priority must be an integer, got ${priority}`
    })
  }
  let timeoutMillis: number | undefined
  if (options.timeout !== undefined) {
    const timeout = durationMillisNotBigint(options.timeout)
    if ("problem" in timeout || timeout.millis <= 0) {
      throw new InvalidJobDefinition({
        job: name,
        option: "timeout",
        reason: "problem" in timeout ? timeout.reason : "range",
        message: `timeout ${"problem" in timeout ? timeout.problem : `must be longer than 0, got ${String(options.timeout)}`}`
      })
    }
    timeoutMillis = timeout.millis
  }
  const limits = options.limits
  checkLimits(name, limits)
  return {
    _tag: "sqlane/Job",
    name,
    payload: options.payload,
    success: (options.success ?? Schema.Void) as Schema.Schema<S, SI>,
    failure: (options.failure ?? Schema.Never) as unknown as Schema.Schema<E, EI>,
    retry: options.retry ?? defaultRetry,
    priority,
    isPermanent: options.isPermanent ?? (() => false),
    timeoutMillis,
    mutexKey: options.mutexKey,
    limits
  }
}

/**
 * What a handler knows about the attempt it runs.
 *
 * @example
 * ```ts
 * Job.handler(SendEmail, (payload, ctx) =>
 *   Effect.log(`attempt ${ctx.attempt} of job ${ctx.id}, due at ${ctx.runAt.toISOString()}`))
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface JobContext {
  /** The job id. */
  readonly id: string
  /** The job name. */
  readonly name: string
  /** This attempt's number, from 1. */
  readonly attempt: number
  /** When the job was enqueued. */
  readonly createdAt: Date
  /** When the job was due (its `run_at`). */
  readonly runAt: Date
}

/**
 * A job definition with the function that runs it; give a list of these to `Worker.layer`.
 *
 * @example
 * ```ts
 * const handlers: ReadonlyArray<Job.Handler> = [
 *   Job.handler(SendEmail, ({ to }) => Effect.log(`emailing ${to}`))
 * ]
 * const WorkerLive = Worker.layer({ handlers })
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface Handler<R = never> {
  readonly _tag: "sqlane/Handler"
  readonly job: Job.Any
  readonly run: (payload: any, context: JobContext) => Effect.Effect<unknown, unknown, R>
}

/**
 * Attaches the function that runs a job. The handler gets the decoded payload and the
 * attempt's {@link JobContext}; it may fail with the job's `failure` type (a typed failure,
 * retried by the job's schedule unless `isPermanent`) and its result is encoded with the
 * job's `success` schema and stored.
 *
 * @example
 * ```ts
 * const Resize = Job.make("resize", {
 *   payload: Schema.Struct({ url: Schema.String }),
 *   success: Schema.Struct({ bytes: Schema.Number })
 * })
 * const ResizeHandler = Job.handler(Resize, ({ url }, ctx) =>
 *   Effect.gen(function*() {
 *     yield* Effect.log(`resizing ${url}, attempt ${ctx.attempt}`)
 *     return { bytes: 1024 }
 *   }))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const handler = <J extends Job.Any, R>(
  job: J,
  run: (payload: Job.Payload<J>, context: JobContext) => Effect.Effect<Job.Success<J>, Job.Failure<J> | RateLimited, R>
): Handler<R> => ({ _tag: "sqlane/Handler", job, run })

/**
 * A job's schemas, typed for internal use (every `Job.make` schema has no context).
 *
 * @internal
 */
export const schemasOf = (job: Job.Any): {
  readonly payload: Schema.Schema<any, any>
  readonly success: Schema.Schema<any, any>
  readonly failure: Schema.Schema<any, any>
} => job as any
