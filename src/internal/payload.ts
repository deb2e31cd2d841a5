/**
 * A payload as the jobs table stores it: encoded by its job's schema, checked to be JSON that every
 * database reads back the same and that fits the server's largest statement; and the job name and
 * keys (mutex, unique) checked to be stored the same on every database. A payload's refusals are
 * `InvalidPayload`s (`schema`, `json`, `size`, with the path in the payload); a name's or a key's are
 * `InvalidEnqueueOption`s (path `name`, `unique.key`, `mutexKey`).
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { InvalidEnqueueOption, type InvalidOptionReason, InvalidPayload } from "../schema/Errors.js"
import { type Job, schemasOf } from "../schema/Job.js"
import * as Sanitize from "./sanitize.js"

/**
 * The largest statement the database takes, less this, is the largest payload: room for the
 * statement's text and its other values (name, keys, trace context: at most a few KiB).
 */
export const statementOverheadBytes = 65_536

const payloadEncoders = new WeakMap<Schema.Schema.Any, (u: unknown) => Either.Either<unknown, ParseResult.ParseError>>()

/** `Schema.encodeEither` of a payload schema, made once per schema (making it costs more than using it). */
const payloadEncoder = (schema: Schema.Schema.Any) => {
  let encode = payloadEncoders.get(schema)
  if (encode === undefined) {
    encode = Schema.encodeEither(schema as Schema.Schema<unknown, unknown, never>) as (
      u: unknown
    ) => Either.Either<unknown, ParseResult.ParseError>
    payloadEncoders.set(schema, encode)
  }
  return encode
}

/**
 * Encodes a payload to the JSON text stored in the row. `maxBytes`: the largest payload (UTF-8
 * bytes of its JSON) the database takes, if it has a limit.
 *
 * @internal
 */
export const encodePayload = <J extends Job.Any>(
  job: J,
  payload: Job.Payload<J>,
  maxBytes?: number | undefined
): Effect.Effect<string, InvalidPayload> => {
  // Synchronous schemas (nearly all) are encoded without an effect per payload.
  let encoded: Either.Either<unknown, ParseResult.ParseError>
  try {
    encoded = payloadEncoder(schemasOf(job).payload)(payload)
  } catch (e) {
    // A schema that throws, or a recursive one on a payload nested too deeply (stack overflow).
    return Either.left(schemaThrew(job, e))
  }
  if (Either.isRight(encoded)) return toJson(job, encoded.right, maxBytes)
  return Schema.encode(schemasOf(job).payload)(payload).pipe(
    Effect.mapError((e) =>
      new InvalidPayload({
        job: job.name,
        reason: "schema",
        path: issuePath(e),
        message: ParseResult.TreeFormatter.formatErrorSync(e)
      })
    ),
    Effect.catchAllDefect((e) => Effect.fail(schemaThrew(job, e))),
    Effect.flatMap((encoded) => toJson(job, encoded, maxBytes))
  )
}

/** Where a schema's first issue is, as a JSON path (`$` when the payload as a whole is refused). */
const issuePath = (e: ParseResult.ParseError): string => {
  try {
    return Sanitize.jsonPath(ParseResult.ArrayFormatter.formatErrorSync(e)[0]?.path ?? [])
  } catch {
    return "$"
  }
}

const schemaThrew = (job: Job.Any, e: unknown) =>
  new InvalidPayload({
    job: job.name,
    reason: "schema",
    path: "$",
    message: `the payload schema of "${job.name}" threw while encoding: ${Sanitize.describe(e)}`
  })

/** The encoded payload as JSON text; NaN, ±Infinity, bigints, cycles and oversized payloads are refused. */
const toJson = (job: Job.Any, encoded: unknown, maxBytes: number | undefined): Either.Either<string, InvalidPayload> => {
  const result = Sanitize.toJson(encoded)
  if (!("json" in result)) {
    return Either.left(
      new InvalidPayload({
        job: job.name,
        reason: "json",
        path: result.path,
        message: `the encoded payload is not JSON-serializable at ${result.path}: ${result.reason}`
      })
    )
  }
  const json = result.json
  // UTF-8 takes at most 3 bytes per UTF-16 code unit: count bytes only for payloads that may be too large.
  if (maxBytes !== undefined && json.length * 3 > maxBytes) {
    const bytes = Buffer.byteLength(json, "utf8")
    if (bytes > maxBytes) {
      return Either.left(
        new InvalidPayload({
          job: job.name,
          reason: "size",
          path: "$",
          message: `the payload is ${bytes} bytes of JSON; this database takes at most ${maxBytes} ` +
            `(max_allowed_packet less ${statementOverheadBytes} bytes)`
        })
      )
    }
  }
  return Either.right(json)
}

/** Job definitions whose name was checked (once per definition). */
const checkedNames = new WeakSet<Job.Any>()

/** Why a job name cannot be stored the same on every database, or `undefined` (checked once per definition). */
export const nameProblem = (job: Job.Any): InvalidEnqueueOption | undefined => {
  if (checkedNames.has(job)) return undefined
  const problem = Sanitize.checkJobName(job.name)
  if (problem !== undefined) {
    return new InvalidEnqueueOption({
      job: typeof job.name === "string" ? Sanitize.text(job.name, 300) : String(job.name),
      path: "name",
      reason: identifierReason(job.name),
      message: `the job name ${problem}`
    })
  }
  checkedNames.add(job)
  return undefined
}

/**
 * What is wrong with a job name or key that `Sanitize.checkJobName`/`checkIdentifier` refused: its
 * type, its length, or characters it holds.
 *
 * @internal
 */
export const identifierReason = (value: unknown): InvalidOptionReason =>
  typeof value !== "string"
    ? "type"
    : value.length === 0 || value.length > Sanitize.maxIdentifierLength
    ? "range"
    : "characters"

/**
 * A unique or mutex key as stored, or why it cannot be (`path`: the option it came from).
 *
 * @internal
 */
export const checkKey = (
  job: Job.Any,
  what: string,
  path: string,
  key: unknown
): Either.Either<string, InvalidEnqueueOption> => {
  const problem = Sanitize.checkIdentifier(key)
  return problem === undefined
    ? Either.right(key as string)
    : Either.left(
      new InvalidEnqueueOption({
        job: job.name,
        path,
        reason: identifierReason(key),
        // PostgreSQL text cannot hold NUL: refused on every database, as the same key must work on each.
        message: `${what} ${problem}: ${
          typeof key === "string" ? JSON.stringify(Sanitize.text(key, 300)) : Sanitize.describe(key)
        }`
      })
    )
}

const noKey = Either.right(null)

/** The key `f` gives a payload, checked (path `path`), or null for none. */
const keyOf = (
  job: Job.Any,
  f: ((payload: never) => string | undefined) | undefined,
  what: string,
  path: string,
  payload: unknown
): Either.Either<string | null, InvalidEnqueueOption> => {
  if (f === undefined) return noKey
  let key: string | undefined
  try {
    key = (f as (payload: unknown) => string | undefined)(payload)
  } catch (e) {
    return Either.left(
      new InvalidEnqueueOption({
        job: job.name,
        path,
        reason: "threw",
        message: `${path} threw: ${Sanitize.describe(e)}`
      })
    )
  }
  return key === undefined ? noKey : checkKey(job, what, path, key)
}

/**
 * The mutex key of a payload by its job's `mutexKey`, or null.
 *
 * @internal
 */
export const mutexKeyOf = <J extends Job.Any>(
  job: J,
  payload: Job.Payload<J>
): Either.Either<string | null, InvalidEnqueueOption> => keyOf(job, job.mutexKey, "the mutex key", "mutexKey", payload)

/**
 * The concurrency key of a payload by its job's `limits.key`, or null.
 *
 * @internal
 */
export const limitKeyOf = <J extends Job.Any>(
  job: J,
  payload: Job.Payload<J>
): Either.Either<string | null, InvalidEnqueueOption> =>
  keyOf(job, job.limits?.key, "the concurrency key", "limits.key", payload)
