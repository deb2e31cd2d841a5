/**
 * The end of an attempt as the Completer writes it: completed (its result encoded by the job's
 * success schema, unless not stored), failed (the attempt's error record, and the retry `Schedule`'s
 * delay or a dead letter), or released (back to pending, the attempt not counted).
 *
 * @internal
 */
import * as Cause from "effect/Cause"
import * as Either from "effect/Either"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import * as SchemaAST from "effect/SchemaAST"
import { JobTimeout, RateLimited } from "../../schema/Errors.js"
import { type Handler, schemasOf } from "../../schema/Job.js"
import { AttemptError, ErrorHistory } from "../../schema/JobInfo.js"
import type { Outcome } from "../../services/Completer.js"
import type { ClaimedRow, NameLimits } from "../driver/Driver.js"
import {
  defectStack,
  describe,
  errorJson,
  maxErrorJsonLength,
  type NotJson,
  originalOf,
  ownProperties,
  text as sanitizeText,
  toJson as resultJson
} from "../sanitize.js"
import { maxRatePeriodMillis } from "../options.js"
import { retryDelay } from "../schedule.js"
import { microsToDate, nowMicros } from "../time.js"
import type { Inflight } from "./slots.js"

/** Whether a typed failure is the worker's own timeout (false for a value whose prototype cannot be read). */
const isTimeout = (u: unknown): u is JobTimeout => {
  try {
    return u instanceof JobTimeout
  } catch {
    return false
  }
}

const tagOf = (u: unknown): string | undefined => {
  try {
    return typeof u === "object" && u !== null && "_tag" in u && typeof (u as any)._tag === "string"
      ? (u as any)._tag
      : undefined
  } catch {
    return undefined // a getter that throws
  }
}

const encodeErrors = Schema.encodeSync(ErrorHistory)
const decodeErrors = Schema.decodeUnknownOption(ErrorHistory)

export interface Outcomes<R> {
  /** The payload and success codecs of each job name, compiled once. */
  readonly codecs: ReadonlyMap<string, Codecs>
  /** A failed attempt's end: its error record, and its retry or dead letter. */
  readonly failure: (
    row: ClaimedRow,
    handler: Handler<R>,
    kind: AttemptError["kind"],
    cause: Cause.Cause<unknown> | undefined,
    message: string
  ) => Effect.Effect<Outcome>
  /** A released attempt's end: back to pending, the attempt not counted. */
  readonly released: (row: ClaimedRow) => Outcome
  /** A completion, or where and why its (encoded) result is not JSON (internal/sanitize.ts). */
  readonly completed: (row: ClaimedRow, nowUs: number, result: unknown) => Outcome | NotJson
  /** How an attempt ended, for the cases that need effects (failures, asynchronous schemas). */
  readonly settle: (row: ClaimedRow, handler: Handler<R>, entry: Inflight, exit: Exit.Exit<unknown, unknown>) => Effect.Effect<Outcome>
}

export interface Codecs {
  readonly decodePayload: (u: unknown) => Either.Either<unknown, ParseResult.ParseError>
  readonly encodeSuccess: (a: unknown) => Either.Either<unknown, ParseResult.ParseError>
  /** Whether a result is stored (not for `Schema.Void`). */
  readonly storesResult: boolean
}

/**
 * The ends of the attempts of `handlers`. With `deleteCompleted` (`retention.completed` 0) a
 * completed job's row is deleted by its end (unless it holds its unique key while completed): its
 * result is never stored, so it is not converted either.
 */
export const make = <R>(
  handlers: ReadonlyMap<string, Handler<R>>,
  deleteCompleted: boolean,
  /** Holds back a job name (`key` null) or one of its keys until `untilUs`, in every process (`RateLimited`). */
  hold: (name: string, key: string | null, untilUs: number) => Effect.Effect<void> = () => Effect.void,
  /** The limits of a job name now (its definition's, or those set at run time over them). */
  limitsOf: (name: string) => NameLimits | undefined = () => undefined
): Outcomes<R> => {
  /** The payload and success codecs of each job name, compiled once. */
  const codecs = new Map(
    Array.from(handlers, ([name, handler]) => {
      const schemas = schemasOf(handler.job)
      return [name, {
        decodePayload: Schema.decodeUnknownEither(schemas.payload),
        encodeSuccess: Schema.encodeEither(schemas.success),
        // `Schema.Void` (the default) stores nothing, whatever the handler returns (a handler that
        // ends with `Effect.sync(() => map.set(…))` returns a Map: not a result to store or refuse).
        storesResult: !SchemaAST.isVoidKeyword(schemas.success.ast)
      }] as const
    })
  )

  const failure = (
    row: ClaimedRow,
    handler: Handler<R>,
    kind: AttemptError["kind"],
    cause: Cause.Cause<unknown> | undefined,
    message: string
  ) =>
    Effect.gen(function*() {
      const nowUs = yield* nowMicros
      const typed = cause ? Cause.failureOption(cause) : Option.none()
      const defect = cause ? Cause.dieOption(cause) : Option.none()
      // The handler's own value, also where a stand-in replaced one Effect cannot print (`guardCause`).
      const value = originalOf(Option.isSome(typed) ? typed.value : Option.isSome(defect) ? defect.value : undefined)
      // The typed failure as its schema encodes it, if that is JSON (a value whose inspection throws has none).
      let encoded = Option.none<unknown>()
      if (Option.isSome(typed)) {
        try {
          encoded = Option.flatMap(Schema.encodeUnknownOption(schemasOf(handler.job).failure)(value), (e) =>
            Option.map(
              Option.filter(Option.fromNullable(errorJson(e)), (json) => json.length <= maxErrorJsonLength),
              (json) => JSON.parse(json)
            ))
        } catch {
          // a failure schema that throws on it
        }
      }
      // The stored record: U+0000 and lone surrogates replaced, cut to a length (internal/sanitize.ts).
      message = sanitizeText(message)
      const record = new AttemptError({
        attempt: row.attempts,
        at: microsToDate(nowUs).toISOString(),
        kind,
        message,
        tag: tagOf(value),
        error: Option.getOrUndefined(encoded),
        // A defect's stack and own properties (`code`, `errno`…), bounded (internal/sanitize.ts).
        stack: Option.isSome(defect) ? defectStack(value) : undefined,
        properties: Option.isSome(defect) ? ownProperties(value) : undefined
      })
      const history = [
        ...Option.getOrElse(decodeErrors(row.errors ?? "[]"), () => [] as ReadonlyArray<AttemptError>),
        record
      ]
      let permanent = false
      try {
        permanent = Option.isSome(typed) && Boolean((handler.job.isPermanent as (failure: unknown) => boolean)(value))
      } catch {
        // an `isPermanent` that throws on the value: not taken as permanent
      }
      const delay = permanent || kind === "decode"
        ? Option.none<number>()
        : yield* retryDelay(handler.job.retry, row.attempts - row.attemptBase, value, Math.floor(nowUs / 1000))
      const outcome: Outcome = {
        id: row.id,
        name: row.name,
        attempt: row.attempts,
        state: Option.isSome(delay) ? "pending" : "dead",
        // A job whose worker was lost is retried at once (if it has attempts left): the crash
        // says nothing about when the job can succeed.
        runAtUs: Option.isSome(delay) ? nowUs + (kind === "lost" ? 0 : Math.round(delay.value * 1000)) : null,
        finishedAtUs: Option.isSome(delay) ? null : nowUs,
        endedAtUs: nowUs,
        lastError: message,
        errors: encodeErrors(history),
        result: null
      }
      return outcome
    })

  const released = (row: ClaimedRow): Outcome => ({
    id: row.id,
    name: row.name,
    attempt: row.attempts,
    state: "released",
    runAtUs: null,
    finishedAtUs: null,
    lastError: null,
    errors: null,
    result: null
  })

  /** A completion, or where and why its (encoded) result is not JSON (internal/sanitize.ts). */
  const completed = (row: ClaimedRow, nowUs: number, result: unknown): Outcome | NotJson => {
    const json = result === undefined || codecs.get(row.name)?.storesResult === false ||
        (deleteCompleted && !row.keepsKey)
      ? null
      : resultJson(result)
    if (json !== null && !("json" in json)) return json
    return {
      id: row.id,
      name: row.name,
      attempt: row.attempts,
      state: "completed",
      runAtUs: null,
      finishedAtUs: nowUs,
      lastError: null,
      errors: null,
      result: json === null ? null : json.json,
      keep: row.keepsKey
    }
  }

  /**
   * A handler's `RateLimited`: back to pending `delay` ms from now, the attempt not counted (a
   * release with a `run_at`); with scope `name` or `key`, of a name under a rate limit, the hold
   * is written first, so that no claim starts a job of that name or key before it ends.
   */
  const rateLimited = (row: ClaimedRow, handler: Handler<R>, error: RateLimited) =>
    Effect.gen(function*() {
      const nowUs = yield* nowMicros
      // At most 366 days (the longest rate window): a later `run_at` or hold could overflow the
      // database's times, and the end would not be written.
      const ms = Number.isNaN(error.delay) ? 0 : Math.min(Math.max(0, error.delay), maxRatePeriodMillis)
      const untilUs = nowUs + Math.round(ms * 1000)
      // The name's rates now: its definition's, or those set at run time.
      const limits = limitsOf(row.name)
      const keyOf = handler.job.limits?.key
      if (limits?.rate !== undefined || limits?.ratePerKey !== undefined) {
        if (error.scope === "name") yield* hold(row.name, null, untilUs)
        if (error.scope === "key" && keyOf !== undefined) {
          const key = keyOfRow(row, keyOf as (payload: unknown) => string | undefined)
          if (key !== undefined) yield* hold(row.name, key, untilUs)
        }
      }
      return { ...released(row), runAtUs: untilUs } satisfies Outcome
    })
  /** A claimed job's concurrency key, from its payload as enqueued (undefined: none, or unreadable). */
  const keyOfRow = (row: ClaimedRow, keyOf: (payload: unknown) => string | undefined) => {
    try {
      const decoded = codecs.get(row.name)!.decodePayload(JSON.parse(row.payload))
      return Either.isRight(decoded) ? keyOf(decoded.right) : undefined
    } catch {
      return undefined
    }
  }

  /** How an attempt ended, for the cases that need effects (failures, async schemas). */
  const settle = (row: ClaimedRow, handler: Handler<R>, entry: Inflight, exit: Exit.Exit<unknown, unknown>) =>
    Effect.gen(function*() {
      const job = handler.job
      if (Exit.isFailure(exit) && Cause.isInterruptedOnly(exit.cause) && entry.reason !== undefined) {
        // Cancelled: the row is already `cancelled`, so this guarded write changes nothing unless the
        // cancel rolled back. Shutdown: back to pending, the attempt not counted.
        return released(row)
      }
      if (Exit.isSuccess(exit)) {
        const encoded = yield* Effect.either(Schema.encode(schemasOf(job).success)(exit.value))
        if (Either.isLeft(encoded)) {
          const message = `result does not match the success schema of "${job.name}": ${
            ParseResult.TreeFormatter.formatErrorSync(encoded.left)
          }`
          return yield* failure(row, handler, "defect", undefined, message)
        }
        const end = completed(row, yield* nowMicros, encoded.right)
        if ("state" in end) return end
        return yield* failure(
          row,
          handler,
          "defect",
          undefined,
          `result of "${job.name}" is not JSON-serializable at ${end.path}: ${end.reason}`
        )
      }
      const cause = exit.cause
      const typed = Cause.failureOption(cause)
      if (Option.isSome(typed) && typed.value instanceof RateLimited) return yield* rateLimited(row, handler, typed.value)
      if (Option.isSome(typed) && isTimeout(typed.value)) {
        return yield* failure(row, handler, "timeout", cause, typed.value.message)
      }
      if (Option.isSome(typed)) return yield* failure(row, handler, "failure", cause, describe(typed.value))
      const defect = Cause.dieOption(cause)
      if (Option.isSome(defect)) return yield* failure(row, handler, "defect", cause, describe(defect.value))
      return yield* failure(row, handler, "interrupted", cause, "the attempt was interrupted")
    })

  return { codecs, failure, released, completed, settle }
}
