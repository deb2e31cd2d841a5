/**
 * The typed errors a caller of sqlane can handle.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"

/**
 * Why an enqueue was refused (the `reason` of {@link InvalidPayload}):
 *
 * - `schema`: the payload does not encode with its job's payload `Schema` (or the schema threw);
 * - `json`: the encoded payload is not JSON as it is — NaN or ±Infinity or an invalid `Date` (JSON
 *   would store `null`), a `Map` or `Set` (`{}`), an array hole or an array element that is
 *   `undefined`, a function or a symbol (`null`), a bigint (use `Schema.BigInt`), a cycle, nesting
 *   too deep to serialize, `undefined`;
 * - `size`: the payload's JSON is larger than the database takes in one statement (MySQL/MariaDB:
 *   `max_allowed_packet` less 64 KiB; see docs/limits.md);
 * - `name`: the job name is empty, longer than 255 characters, or holds U+0000 or a lone surrogate;
 * - `key`: a unique or mutex key is not a string of 1–255 characters without U+0000 and lone
 *   surrogates, `unique` is neither a key nor `{ key, states }`, or the job's `mutexKey` threw;
 * - `option`: an option is out of range or not of its type (priority not a 32-bit integer, `runAt`
 *   not a valid `Date`/`DateTime`, `delay` not a finite duration, both `runAt` and `delay` given,
 *   `unique.states`).
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
export const InvalidPayloadReason = Schema.Literal("schema", "json", "size", "name", "key", "option")

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
 * An enqueue was refused and nothing was written (no SQL was sent): the payload did not encode with
 * its job's payload `Schema`, or is not JSON as it is, or is too large for the database; or the job
 * name, a key or an option is out of range. `reason` says which (see {@link InvalidPayloadReason}),
 * `path` where in the payload, and `message` says what, with the limit when one was passed.
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
    /** What was refused: for a payload, the schema's parse error formatted as a tree. */
    message: Schema.String,
    /** Why, as a closed set of cases (set by every refusal of sqlane's own). */
    reason: Schema.optional(InvalidPayloadReason),
    /**
     * For `json`: where in the encoded payload the offending value is, e.g. `$.items[3].price`
     * (`$` is the payload itself).
     */
    path: Schema.optional(Schema.String)
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
 * A migration of sqlane's own tables failed, or sqlane's configuration is invalid
 * (for example a table prefix that is not a plain SQL identifier), or `createQueue` of
 * `sqlane/promise` was given a database URL it cannot read or reach (the message says which).
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
 * An expectation of `sqlane/testing` does not hold (`expectEnqueued`, `expectNotEnqueued`). The
 * message says what was expected and lists the jobs found instead, e.g.
 * `expected a pending "send-email" job with payload matching {"to":"bob@example.com"}; found 1 "send-email" job: #12 pending …`.
 *
 * @example
 * ```ts
 * const error = yield* Effect.flip(expectEnqueued(SendEmail, { to: "bob@example.com" }))
 * if (error._tag === "ExpectationFailed") console.log(error.message)
 * ```
 *
 * @since 0.2.0
 * @category errors
 */
export class ExpectationFailed extends Schema.TaggedError<ExpectationFailed>("sqlane/ExpectationFailed")(
  "ExpectationFailed",
  {
    message: Schema.String
  }
) {}

/**
 * `waitFor` (of `sqlane/testing`) gave up: the job did not reach any of the states waited for
 * within `millis` (real time). `lastSeen` is the state it was last read in, or `"not found"`.
 *
 * @example
 * ```ts
 * yield* waitFor(id, "completed").pipe(
 *   Effect.catchTag("WaitTimedOut", (e) => Effect.logError(`stuck ${e.lastSeen}`))
 * )
 * ```
 *
 * @since 0.2.0
 * @category errors
 */
export class WaitTimedOut extends Schema.TaggedError<WaitTimedOut>("sqlane/WaitTimedOut")("WaitTimedOut", {
  id: Schema.String,
  /** The states waited for. */
  states: Schema.Array(Schema.String),
  /** The state the job was last seen in, or `"not found"`. */
  lastSeen: Schema.String,
  /** The time waited, in milliseconds (real time). */
  millis: Schema.Number
}) {
  get message() {
    return `job ${this.id} did not reach ${this.states.join(" or ")} within ${this.millis} ms; last seen: ${this.lastSeen}`
  }
}

/**
 * `drain` (of `sqlane/testing`) could not finish: jobs were still due or running after `timeout`
 * (real time; a handler that waits on `TestClock` never ends by itself), or, with `withScheduled`,
 * jobs were still pending after `maxSteps` steps of `TestClock` (a job rescheduled for ever, a
 * periodic job enqueuing new ticks). `message` says which, with the jobs left.
 *
 * @example
 * ```ts
 * const exit = yield* Effect.exit(drain({ handlers, withScheduled: true, maxSteps: 3 }))
 * // Exit.fail(DrainIncomplete { reason: "maxSteps", message: "drain: jobs still pending after 3 steps of TestClock, …" })
 * ```
 *
 * @since 0.2.0
 * @category errors
 */
export class DrainIncomplete extends Schema.TaggedError<DrainIncomplete>("sqlane/DrainIncomplete")(
  "DrainIncomplete",
  {
    reason: Schema.Literal("timeout", "maxSteps"),
    message: Schema.String
  }
) {}

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
