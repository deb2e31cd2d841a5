/**
 * The typed errors a caller of sqlane can handle.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"

export {
  /** @since 0.2.0 */
  DrainIncomplete,
  /** @since 0.2.0 */
  ExpectationFailed,
  /** @since 0.2.0 */
  WaitTimedOut
} from "./TestingErrors.js"

/**
 * Why a payload was refused (the `reason` of {@link InvalidPayload}):
 *
 * - `schema`: the payload does not encode with its job's payload `Schema`, or the schema threw
 *   (a recursive schema on a payload nested too deeply overflows the stack);
 * - `json`: the encoded payload is not JSON as it is — NaN or ±Infinity or an invalid `Date` (JSON
 *   would store `null`), a `Map` or `Set` (`{}`), an array hole or an array element that is
 *   `undefined`, a function or a symbol (`null`), a bigint (use `Schema.BigInt`), a cycle, nesting
 *   too deep to serialize, `undefined`;
 * - `size`: the payload's JSON is larger than the database takes in one statement (MySQL/MariaDB:
 *   `max_allowed_packet` less 64 KiB; see docs/limits.md);
 * - `threw`: the function that makes the payload threw (a periodic job's `payload`).
 *
 * @example
 * ```ts
 * queue.enqueue(SendEmail, payload).pipe(
 *   Effect.catchTag("InvalidPayload", (e) =>
 *     e.reason === "size" ? Effect.fail("payload too large") : Effect.die(e)))
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export const InvalidPayloadReason = Schema.Literal("schema", "json", "size", "threw")

/**
 * Why an enqueue was refused: `schema`, `json`, `size`, `name`, `key` or `option`.
 *
 * @example
 * ```ts
 * const tooLarge = (reason: Errors.InvalidPayloadReason | undefined) => reason === "size"
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export type InvalidPayloadReason = typeof InvalidPayloadReason.Type

/**
 * A payload was refused and nothing was written (no SQL was sent): it did not encode with its
 * job's payload `Schema`, is not JSON as it is, or is too large for the database. `reason` says
 * which (see {@link InvalidPayloadReason}), `path` where in the payload, and `message` what, with
 * the limit when one was passed. Enqueueing the same payload again fails the same way: fix the
 * payload (or the schema). Options of the enqueue are refused with {@link InvalidEnqueueOption}.
 *
 * @example
 * ```ts
 * queue.enqueue(Order, { items: [{ qty: 1 }, { qty: 2 }, { qty: -1 }] }).pipe(
 *   Effect.catchTag("InvalidPayload", (e) => Effect.log(`${e.reason} at ${e.path}: ${e.message}`))
 * ) // schema at $.items[2].qty: …
 * ```
 *
 * @example
 * ```ts
 * const id = yield* queue.enqueue(SendEmail, { orderId: 1, to: "ada@example.com", placedAt: new Date(NaN) }).pipe(
 *   Effect.catchTag("InvalidPayload", (e) => Effect.logError(`${e.job}: ${e.reason} ${e.message}`))
 * )
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidPayload extends Schema.TaggedError<InvalidPayload>("sqlane/InvalidPayload")(
  "InvalidPayload",
  {
    /** The job name the payload was meant for. */
    job: Schema.String,
    /** What was refused: for `schema`, the schema's parse error formatted as a tree. */
    message: Schema.String,
    /** Why, as a closed set of cases. */
    reason: InvalidPayloadReason,
    /**
     * Where in the payload the offending value is, as a JSON path: `$` is the payload itself,
     * `$.items[2].qty` the `qty` of the third item, `$["b c"]` a key that is not an identifier.
     * For `schema`, the path of the schema's first issue (as `ParseResult.ArrayFormatter` gives
     * it; `$` when the issue is the payload as a whole); for `json`, the first value JSON would
     * change; for a problem of the whole payload (`size`, `threw`, a schema that threw) always `$`.
     */
    path: Schema.String
  }
) {}

/**
 * Why an enqueue option was refused (the `reason` of {@link InvalidEnqueueOption}), and of a
 * worker's or a job definition's option ({@link InvalidWorkerOptions}, {@link InvalidJobDefinition}):
 *
 * - `type`: not of its type — `runAt` not a `Date` or `DateTime`, `delay` not a duration, `unique`
 *   neither a key nor `{ key, states, mode, period }`, a key that is not a string, an unknown job
 *   state or unique `mode`, a unique `period` that is not a duration, the payloads of `enqueueMany`
 *   not an iterable, its `unique` not a function;
 * - `range`: a number or length out of range — `priority` not a 32-bit integer, `runAt` (or now +
 *   `delay`) outside years 1000–9999, a `delay` that is not finite, a key or job name empty or longer
 *   than 255 characters (a unique key with a `period`: 200), a unique `period` under 1 ms or not in
 *   whole milliseconds, `concurrency` not a positive integer, a worker id over 55 characters;
 * - `characters`: a string holds what cannot be stored the same on every database — U+0000, a lone
 *   surrogate, a job name's trailing space;
 * - `conflict`: options that exclude each other — `runAt` with `delay`, two handlers for one job name;
 * - `threw`: a function given threw (the job definition's `mutexKey`, `enqueueMany`'s `unique`).
 *
 * @example
 * ```ts
 * const error = yield* Effect.flip(queue.enqueue(SendEmail, payload, { priority: 2.5 }))
 * if (error._tag === "InvalidEnqueueOption" && error.reason === "range") console.log(error.path) // "priority"
 * ```
 *
 * @since 0.2.0
 * @category errors
 */
export const InvalidOptionReason = Schema.Literal("type", "range", "characters", "conflict", "threw")

/**
 * The reasons of {@link InvalidOptionReason}, as a type: `"type" | "range" | "characters" | "conflict" | "threw"`.
 *
 * @example
 * ```ts
 * const retryable = (reason: InvalidOptionReason) => reason !== "conflict"
 * ```
 *
 * @since 0.2.0
 * @category errors
 */
export type InvalidOptionReason = typeof InvalidOptionReason.Type

/**
 * An option of an enqueue (`enqueue`, `insert`, `enqueueMany`) was refused and nothing was written
 * (no SQL was sent): `runAt`, `delay`, `priority`, the `unique` key, its states, mode or period, the
 * mutex key the job's `mutexKey` gave, the job name of a definition that bypassed `Job.make`, or the
 * payloads argument of `enqueueMany`. `path` names the option (`"runAt"`, `"delay"`, `"priority"`,
 * `"unique"`, `"unique.key"`, `"unique.states"`, `"unique.mode"`, `"unique.period"`, `"mutexKey"`,
 * `"name"`, `"payloads"`, `"options"` for an unknown option such as a misspelt `uniqe`; for
 * `enqueueMany`'s `unique`, the message names the payload), `reason`
 * says what is wrong with it (see {@link InvalidOptionReason}) and `message` what it got. A
 * programming error: enqueueing again with the same options fails the same way.
 *
 * @example
 * ```ts
 * queue.enqueue(SendEmail, payload, { delay: "banana" as any }).pipe(
 *   Effect.catchTag("InvalidEnqueueOption", (e) => Effect.die(e)) // path "delay", reason "type"
 * )
 * ```
 *
 * @since 0.2.0
 * @category errors
 */
export class InvalidEnqueueOption extends Schema.TaggedError<InvalidEnqueueOption>("sqlane/InvalidEnqueueOption")(
  "InvalidEnqueueOption",
  {
    /** The job name of the enqueue. */
    job: Schema.String,
    /** The option refused, e.g. `"runAt"` or `"unique.key"` (see the class's description). */
    path: Schema.String,
    /** What is wrong with it. */
    reason: InvalidOptionReason,
    /** What was refused and what was got, e.g. `priority must be a 32-bit integer, got 1.5`. */
    message: Schema.String
  }
) {}

/**
 * Why a worker's options were refused (the `reason` of {@link InvalidWorkerOptions}): those of
 * {@link InvalidOptionReason}, and
 *
 * - `pool`: the SQL client's pool is too small for the workers on it — each worker's lock holds one
 *   connection for its whole life, so a pool needs at least one connection more than its workers;
 * - `inUse`: another live worker of this queue holds the worker's `id`.
 *
 * @example
 * ```ts
 * const error = yield* Effect.flip(Worker.make({ handlers, id: "mailer-1" }))
 * if (error.reason === "inUse") yield* Effect.logError(`another live worker is ${error.message}`)
 * ```
 *
 * @since 0.2.0
 * @category errors
 */
export const InvalidWorkerOptionsReason = Schema.Literal(
  "type",
  "range",
  "characters",
  "conflict",
  "pool",
  "inUse"
)

/**
 * The reasons of {@link InvalidWorkerOptionsReason}, as a type.
 *
 * @example
 * ```ts
 * const fixable = (reason: InvalidWorkerOptionsReason) => reason === "pool" // raise maxConnections
 * ```
 *
 * @since 0.2.0
 * @category errors
 */
export type InvalidWorkerOptionsReason = typeof InvalidWorkerOptionsReason.Type

/**
 * `Worker.make` (and `Worker.layer`, at layer build) refused its options before the worker
 * started: `concurrency` not a positive integer, two handlers for one job name, an `id` that is not
 * 1–55 characters or that another live worker holds, a `shutdownTimeout` that is not a finite
 * duration, a `logs` that is not `"default"` or `"quiet"`, or a pool too small for its workers
 * (`maxConnections`). `option` names it, `reason` says what is wrong (see
 * {@link InvalidWorkerOptionsReason}). A configuration mistake: only `inUse` can clear by itself
 * (once the other worker with that id stops).
 *
 * @example
 * ```ts
 * Worker.make({ handlers, concurrency: 0 }) // fails: option "concurrency", reason "range"
 * ```
 *
 * @since 0.2.0
 * @category errors
 */
export class InvalidWorkerOptions extends Schema.TaggedError<InvalidWorkerOptions>("sqlane/InvalidWorkerOptions")(
  "InvalidWorkerOptions",
  {
    /** The option refused: `"concurrency"`, `"prefetch"`, `"handlers"`, `"id"`, `"shutdownTimeout"`, `"logs"` or `"maxConnections"`. */
    option: Schema.String,
    /** What is wrong with it. */
    reason: InvalidWorkerOptionsReason,
    /** What was refused and what was got. */
    message: Schema.String
  }
) {}

/**
 * A job definition was refused where it is made: `Job.make` throws it for a job name that is not
 * 1–255 UTF-16 code units without U+0000, lone surrogates and a trailing space, a `priority` that is
 * not an integer, a `timeout` that is not a finite duration longer than 0, or `limits` it cannot take
 * (an option it does not know, such as a misspelt `runing`; a limit out of range; a bad rate, a `per`
 * given as a bigint included); `Job.attempts(n)` throws it unless `n` is a whole number ≥ 1. Thrown (not returned): a definition is made once, at
 * start-up, and a bad one is a programming error. Recognise it with `instanceof` or its `_tag`.
 *
 * @example
 * ```ts
 * try {
 *   Job.make("", { payload: Schema.Struct({}) })
 * } catch (e) {
 *   if (e instanceof Errors.InvalidJobDefinition) console.error(e.option, e.reason, e.message)
 * }
 * ```
 *
 * @since 0.2.0
 * @category errors
 */
export class InvalidJobDefinition extends Schema.TaggedError<InvalidJobDefinition>("sqlane/InvalidJobDefinition")(
  "InvalidJobDefinition",
  {
    /** The job name, when the definition has one that is a string (`Job.attempts` has none). */
    job: Schema.optional(Schema.String),
    /**
     * The option refused: `"name"`, `"priority"`, `"timeout"`, `"attempts"`, `"limits"` (not an
     * object, or a key it does not take: the message names it and the keys taken),
     * `"limits.running"`, `"limits.runningPerKey"`, `"limits.key"`, `"limits.rate"` or
     * `"limits.ratePerKey"`.
     */
    option: Schema.String,
    /** What is wrong with it. */
    reason: InvalidOptionReason,
    /** What was refused and what was got. */
    message: Schema.String
  }
) {}

/**
 * A concurrency or rate limit set at run time (`Admin.setLimits`, `sqlane limit`) was refused and
 * nothing changed: `option` names it (`"name"`, `"running"`, `"runningPerKey"`, `"rate"`,
 * `"ratePerKey"`, or `"limits"` for an object with another key, e.g. a misspelt `runing`), `reason`
 * says what is wrong (`range`: not an integer from 1 to `Job.maxLimit`, a rate's `starts` not 1 to
 * 1,000,000 or its `per` not 1 ms to 366 days in whole milliseconds, or a name not 1–255 UTF-16 code
 * units; `type`: not a number, a rate or `null`, a bigint `per`, or an unknown key; `characters`;
 * `conflict`: no limit given) and `message` what it got. The `sqlane limit` command names the flag
 * typed instead (`--per-key must be an integer from 1 to 10000, got 0`).
 *
 * @example
 * ```ts
 * admin.setLimits("report", { running: 0 }).pipe(
 *   Effect.catchTag("InvalidLimit", (e) => Effect.logWarning(e.message)) // option "running", reason "range"
 * )
 * ```
 *
 * @since 0.3.0
 * @category errors
 */
export class InvalidLimit extends Schema.TaggedError<InvalidLimit>("sqlane/InvalidLimit")(
  "InvalidLimit",
  {
    name: Schema.String,
    option: Schema.String,
    reason: InvalidOptionReason,
    message: Schema.String
  }
) {}

/**
 * What a handler fails with when the service it calls says "slow down": the attempt ends without
 * counting (as a release: the job is back to `pending`, its `attempts` as before the attempt) and
 * runs again `delay` milliseconds later; nothing is recorded in its errors. With `scope`:
 *
 * - `"job"` (the default): only this job waits.
 * - `"name"`: no job of this name starts before then, in any process — for a name under a rate
 *   limit (`limits.rate` or `limits.ratePerKey`), whose claims read the hold from `<prefix>rates`;
 *   for another name it acts as `"job"`.
 * - `"key"`: no job of this job's concurrency key (`limits.key`) starts before then, in any
 *   process, under the same condition; other keys of the name go on. A job without a key: as `"job"`.
 *
 * `delay` is in milliseconds, from 0 to 366 days (31,622,400,000): a negative one or NaN counts as
 * 0, a longer one or `Infinity` as 366 days (check the unit of a `Retry-After` you pass on: seconds
 * read as milliseconds are short, milliseconds read as microseconds long). A handler that keeps
 * failing with it keeps its job pending: give it a bound of its own if the service may never
 * recover. A hold of a name or key is lifted early by `Admin.liftHolds` (`sqlane limit NAME --lift-holds`).
 *
 * Source: BullMQ's `RateLimitError` with `Worker.rateLimit(ms)` (there the job's attempt is moved
 * back to wait), done here so that it never counts as a failed attempt.
 *
 * @example
 * ```ts
 * Job.handler(Sync, (p) =>
 *   callApi(p).pipe(
 *     Effect.catchTag("TooManyRequests", (e) =>
 *       Effect.fail(new Errors.RateLimited({ delay: e.retryAfterMs, scope: "key" })))
 *   ))
 * ```
 *
 * @since 0.3.0
 * @category errors
 */
export class RateLimited extends Schema.TaggedError<RateLimited>("sqlane/RateLimited")(
  "RateLimited",
  {
    /** How long to wait before the job (and, with `scope`, its name or key) may start again, in ms. */
    delay: Schema.Number,
    /** What waits: the job alone (default), its concurrency key, or its job name. */
    scope: Schema.optional(Schema.Literal("job", "key", "name"))
  }
) {}

/**
 * An enqueue with a `unique` key found the key held, and then free, ten times in a row: each time it
 * read the job holding the key, that job had just left the guarded states (it completed, or was
 * cancelled or retried, by other processes at that very moment). Nothing was written; enqueueing again
 * is safe.
 *
 * @example
 * ```ts
 * const id = yield* queue.enqueue(Invoice, { id: 42 }, { unique: "invoice:42" }).pipe(
 *   Effect.retry({ while: (e) => e._tag === "UniqueKeyContended", times: 3 })
 * )
 * ```
 *
 * @since 0.2.0
 * @category errors
 */
export class UniqueKeyContended extends Schema.TaggedError<UniqueKeyContended>("sqlane/UniqueKeyContended")(
  "UniqueKeyContended",
  {
    /** The job name of the enqueue. */
    job: Schema.String,
    /** The unique key. */
    key: Schema.String
  }
) {
  get message() {
    return `the unique key ${JSON.stringify(this.key)} of "${this.job}" kept changing hands; nothing was written`
  }
}

/**
 * `Queue.get` found no job with this id.
 *
 * @example
 * ```ts
 * const state = yield* queue.get(id).pipe(
 *   Effect.map((job) => job.state),
 *   Effect.catchTag("JobNotFound", () => Effect.succeed("pruned" as const))
 * )
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class JobNotFound extends Schema.TaggedError<JobNotFound>("sqlane/JobNotFound")("JobNotFound", {
  id: Schema.String
}) {
  get message() {
    return `No job with id ${this.id}`
  }
}

/**
 * The database cannot run sqlane: it lacks `FOR UPDATE SKIP LOCKED`
 * (PostgreSQL < 9.5, MySQL < 8.0.1, MariaDB < 10.6), or is not a dialect sqlane supports.
 *
 * @example
 * ```ts
 * const AppLive = QueueLive().pipe(Layer.provideMerge(PgClient.layerConfig({ url: Config.redacted("DATABASE_URL") })))
 * const program = main.pipe(
 *   Effect.provide(AppLive),
 *   Effect.catchTag("UnsupportedDatabase", (e) => Effect.logError(e.message))
 * )
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class UnsupportedDatabase extends Schema.TaggedError<UnsupportedDatabase>("sqlane/UnsupportedDatabase")(
  "UnsupportedDatabase",
  {
    /** The server version string the database reported, e.g. `"10.5.2-MariaDB"`. */
    found: Schema.String,
    /** The oldest version sqlane accepts for this server, e.g. `"MariaDB 10.6"`. */
    needed: Schema.String
  }
) {
  get message() {
    return `sqlane needs FOR UPDATE SKIP LOCKED: found ${this.found}, need ${this.needed} or newer`
  }
}

/**
 * A migration of sqlane's own tables failed, sqlane's configuration is invalid (for example a table
 * prefix that is not a plain SQL identifier), or a package the database needs is not installed
 * (e.g. `sqlane: PostgreSQL needs @effect/sql-pg and pg: npm install @effect/sql-pg@^0.53 pg`;
 * they are optional peer dependencies, see docs/install.md).
 *
 * @example
 * ```ts
 * // A leaseTimeout not longer than twice heartbeatInterval fails the layer with a SetupError
 * const program = main.pipe(
 *   Effect.provide(QueueLive({ heartbeatInterval: "10 seconds", leaseTimeout: "15 seconds" }).pipe(Layer.provideMerge(ClientLive))),
 *   Effect.catchTag("SetupError", (e) => Effect.logError(e.message))
 * )
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class SetupError extends Schema.TaggedError<SetupError>("sqlane/SetupError")("SetupError", {
  message: Schema.String,
  cause: Schema.optional(Schema.Defect)
}) {}

/**
 * An attempt ran longer than its job's `timeout`: its handler was interrupted and the attempt
 * failed with this error (retried by the job's schedule like any failure).
 *
 * @example
 * ```ts
 * const Export = Job.make("export", { payload: Schema.String, timeout: "2 minutes" })
 * // An attempt that runs longer is interrupted; its error record has kind "timeout"
 * const timedOut = (yield* queue.get(id)).errors.some((e) => e.kind === "timeout")
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class JobTimeout extends Schema.TaggedError<JobTimeout>("sqlane/JobTimeout")("JobTimeout", {
  /** The timeout in milliseconds. */
  millis: Schema.Number
}) {
  get message() {
    return `the attempt timed out after ${this.millis} ms`
  }
}

/**
 * A periodic job's declaration was refused: its cron expression does not parse or never fires,
 * its time zone is unknown (IANA names such as `"Europe/Berlin"`, or offsets such as `"+02:00"`),
 * its name is out of range, or its constant payload does not encode with the job's schema.
 *
 * @example
 * ```ts
 * const result = PeriodicJob.make("report", { cron: "0 25 * * *", job: Report, payload: {} })
 * if (Either.isLeft(result)) console.error(result.left.message) // the hour 25 does not parse
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidSchedule extends Schema.TaggedError<InvalidSchedule>("sqlane/InvalidSchedule")(
  "InvalidSchedule",
  {
    /** The periodic job's name. */
    schedule: Schema.String,
    /** What is wrong, e.g. `Invalid time zone in cron expression: Europe/Berln`. */
    message: Schema.String
  }
) {}

/**
 * sqlane's tables under this prefix are missing or behind this version of sqlane: some migrations
 * are not applied. Run `sqlane migrate` (or start a `QueueLive` with `migrate: true`).
 *
 * @example
 * ```ts
 * // Deploy runs `sqlane migrate`; the app only checks
 * const AppLive = QueueLive({ migrate: false }).pipe(Layer.provideMerge(ClientLive))
 * const program = main.pipe(
 *   Effect.provide(AppLive),
 *   Effect.catchTag("SchemaNotMigrated", (e) => Effect.logError(e.message)) // "… run `sqlane migrate`"
 * )
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class SchemaNotMigrated extends Schema.TaggedError<SchemaNotMigrated>("sqlane/SchemaNotMigrated")(
  "SchemaNotMigrated",
  {
    /** The table prefix, e.g. `"sqlane_"`. */
    prefix: Schema.String,
    /** Migrations applied (0 when the migrations table does not exist). */
    applied: Schema.Number,
    /** Migrations this version of sqlane has. */
    known: Schema.Number
  }
) {
  get message() {
    return this.applied === 0
      ? `sqlane's tables with prefix "${this.prefix}" do not exist: run \`sqlane migrate\``
      : `sqlane's tables with prefix "${this.prefix}" are not migrated (${this.applied} of ${this.known} migrations applied): run \`sqlane migrate\``
  }
}

/**
 * A call on a queue of `sqlane/promise` after its `close()` began: nothing was done.
 *
 * @example
 * ```ts
 * await queue.close()
 * await queue.enqueue(SendEmail, { to }) // rejects: QueueClosed { method: "enqueue" }
 * ```
 *
 * @since 0.2.0
 * @category errors
 */
export class QueueClosed extends Schema.TaggedError<QueueClosed>("sqlane/QueueClosed")("QueueClosed", {
  /** The method called, e.g. `"enqueue"`. */
  method: Schema.String
}) {
  get message() {
    return `the queue is closed: ${this.method} was not run`
  }
}
