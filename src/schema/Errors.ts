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
 * @since 0.1.0
 * @category errors
 */
export const InvalidPayloadReason = Schema.Literal("schema", "json", "size", "name", "key", "option")

/**
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
