/**
 * Checks of the options a caller passes at run time, before any SQL: values TypeScript's types
 * allow or cannot see (NaN, an invalid `Date`, a `delay` string that is not a duration, a plain
 * JavaScript caller's `unique: 42`) are refused with a message that names the option and says what
 * it got, instead of a defect or a silent "now".
 *
 * @internal
 */
import * as DateTime from "effect/DateTime"
import * as Duration from "effect/Duration"
import * as Either from "effect/Either"
import type * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import { InvalidEnqueueOption } from "../schema/Errors.js"
import type { Job } from "../schema/Job.js"
import type { EnqueueOptions } from "../services/Queue.js"
import { describe } from "./sanitize.js"
import { builtInTracer, encodeTraceContext } from "./tracing.js"

/** What was passed, for a message: strings quoted, numbers as written (NaN, -Infinity), else described. */
export const got = (u: unknown): string =>
  typeof u === "string"
    ? JSON.stringify(u.length > 100 ? `${u.slice(0, 100)}…` : u)
    : typeof u === "number" || typeof u === "bigint"
    ? String(u)
    : u instanceof Date
    ? "an invalid Date"
    : Duration.isDuration(u)
    ? `the Duration ${Duration.format(u)}`
    : u === null
    ? "null"
    : typeof u === "object" || typeof u === "function" || typeof u === "symbol"
    ? `${typeof u} ${describe(u).slice(0, 100)}`
    : String(u)

/**
 * A duration option as milliseconds, or why it is not one: it must decode as an Effect
 * `DurationInput` (a number of milliseconds, `"5 seconds"`, a `Duration`, `[seconds, nanos]`) and be
 * finite; a number must not be NaN (Effect would read it as 0) or -Infinity (also 0). A negative
 * finite number is 0, as Effect reads it.
 */
export const durationMillis = (
  input: unknown
): { readonly millis: number } | { readonly problem: string; readonly reason: "type" | "range" } => {
  if (typeof input === "number" && !Number.isFinite(input)) {
    return { problem: `must be a finite duration, got ${input}`, reason: "range" }
  }
  const decoded = Duration.decodeUnknown(input)
  if (Option.isNone(decoded)) {
    return { problem: `must be a duration (milliseconds or e.g. "5 seconds"), got ${got(input)}`, reason: "type" }
  }
  const millis = Duration.toMillis(decoded.value)
  if (!Number.isFinite(millis)) return { problem: `must be a finite duration, got ${got(input)}`, reason: "range" }
  return { millis }
}

/**
 * `durationMillis` for the options whose unit a bigint would change (`delay`, `unique.period`, a
 * job's `timeout`, a rate's `per`): a bigint is refused, as Effect reads one as nanoseconds (`60n`
 * would be 60 ns, not 60 ms or 60 s).
 */
export const durationMillisNotBigint = (input: unknown): ReturnType<typeof durationMillis> =>
  typeof input === "bigint"
    ? {
      problem: `must be a duration such as "1 minute", a number of milliseconds (60000) or a Duration; ` +
        `got the bigint ${input}n, which Effect would read as nanoseconds`,
      reason: "type"
    }
    : durationMillis(input)

/** The options of an enqueue (`EnqueueOptions`; `enqueueMany`'s are the same). */
const enqueueOptions = ["runAt", "delay", "priority", "unique"] as const

/**
 * Why an enqueue's `runAt`, `delay` or `unique` cannot be used (or `runAt` and `delay` are both
 * given), as the error to fail with; else `undefined`. Priority and the range of the resulting time
 * are checked where they are resolved.
 */
export const checkEnqueueOptions = (
  job: string,
  options: { readonly runAt?: unknown; readonly delay?: unknown; readonly unique?: unknown } | undefined
): InvalidEnqueueOption | undefined => {
  if (options === undefined) return undefined
  // A misspelt option (`uniqe`) would otherwise be ignored: a job meant to be unique written twice.
  const unknown = typeof options === "object" && options !== null ? unknownOption(options, enqueueOptions) : undefined
  if (unknown !== undefined) {
    return new InvalidEnqueueOption({ job, path: "options", reason: "type", message: `options ${unknownOptionMessage(unknown, enqueueOptions)}` })
  }
  const { delay, runAt, unique } = options
  if (runAt !== undefined && delay !== undefined) {
    return new InvalidEnqueueOption({
      job,
      path: "delay",
      reason: "conflict",
      message: "give either runAt or delay, not both (delay counts from now; runAt is a time)"
    })
  }
  if (runAt !== undefined) {
    if (runAt instanceof Date ? Number.isNaN(runAt.getTime()) : !DateTime.isDateTime(runAt)) {
      return new InvalidEnqueueOption({
        job,
        path: "runAt",
        reason: "type",
        message: `runAt must be a valid Date or a DateTime, got ${got(runAt)}`
      })
    }
  }
  if (delay !== undefined) {
    const d = durationMillisNotBigint(delay)
    if ("problem" in d) return new InvalidEnqueueOption({ job, path: "delay", reason: d.reason, message: `delay ${d.problem}` })
  }
  if (unique !== undefined && typeof unique !== "string") {
    if (typeof unique !== "object" || unique === null) {
      return new InvalidEnqueueOption({
        job,
        path: "unique",
        reason: "type",
        message: `unique must be a key (a string) or { key, states, mode, period }, got ${got(unique)}`
      })
    }
    const states = (unique as { states?: unknown }).states
    if (states !== undefined && !Array.isArray(states)) {
      return new InvalidEnqueueOption({
        job,
        path: "unique.states",
        reason: "type",
        message: `unique.states must be an array of job states, got ${got(states)}`
      })
    }
  }
  return undefined
}

/**
 * A job's priority, `run_at` and trace context from its options, or why they are out of range.
 * `nowUs`: now (µs).
 */
export const resolveEnqueueOptions = (
  job: Job.Any,
  options: EnqueueOptions | undefined,
  nowUs: number,
  fiber: Fiber.RuntimeFiber<unknown, unknown>
): Either.Either<{ readonly priority: number; readonly runAtUs: number; readonly traceContext: string | null }, InvalidEnqueueOption> => {
  const invalid = checkEnqueueOptions(job.name, options)
  if (invalid !== undefined) return Either.left(invalid)
  // `null` (from JavaScript) is refused below, not read as "the job's priority".
  const priority = options?.priority === undefined ? job.priority : options.priority
  if (!Number.isSafeInteger(priority) || priority < -2147483648 || priority > 2147483647) {
    return Either.left(
      new InvalidEnqueueOption({
        job: job.name,
        path: "priority",
        reason: typeof priority === "number" ? "range" : "type",
        message: `priority must be a 32-bit integer, got ${priority}`
      })
    )
  }
  let runAtUs = nowUs
  if (options?.runAt !== undefined) {
    runAtUs = (options.runAt instanceof Date ? options.runAt.getTime() : DateTime.toEpochMillis(options.runAt)) * 1000
  } else if (options?.delay !== undefined) {
    runAtUs = nowUs + Math.round(Duration.toMillis(Duration.decode(options.delay)) * 1000)
  }
  // DATETIME and timestamptz both hold years 1000–9999.
  if (!Number.isFinite(runAtUs) || runAtUs < -30610224000000000 || runAtUs >= 253402300800000000) {
    return Either.left(
      new InvalidEnqueueOption({
        job: job.name,
        path: options?.runAt !== undefined ? "runAt" : "delay",
        reason: "range",
        message: "runAt (or now + delay) is not a date in years 1000–9999"
      })
    )
  }
  // The enqueueing span travels with the job, for the job's span to link to (only when a tracer
  // is installed: with the built-in one there is no span to link to).
  let traceContext: string | null = null
  if (fiber.currentTracer !== builtInTracer) {
    const span = fiber.currentSpan
    if (span !== undefined && span._tag === "Span") traceContext = encodeTraceContext(span)
  }
  return Either.right({ priority, runAtUs, traceContext })
}

/** The largest `starts` of a rate limit (`Job.maxRateStarts`). */
export const maxRateStartsValue = 1_000_000

/** The longest window of a rate limit: 366 days (a window's start and end stay dates JavaScript can hold). */
export const maxRatePeriodMillis = 366 * 24 * 60 * 60 * 1000

/** The options of a rate limit (`Job.Rate`). */
export const rateOptions = ["starts", "per"] as const

/**
 * The first own key of `object` that is not one of `accepted`, with the accepted key it most likely
 * stands for (one or two edits away, or the same but for case), or undefined when every key is
 * accepted. For plain JavaScript callers, whose misspelt option would otherwise be ignored.
 */
export const unknownOption = (
  object: object,
  accepted: ReadonlyArray<string>
): { readonly key: string; readonly meant: string | undefined } | undefined => {
  for (const key of Object.keys(object)) {
    if (accepted.includes(key)) continue
    const meant = accepted.find((a) => a.toLowerCase() === key.toLowerCase()) ??
      accepted.find((a) => editDistance(a, key) <= 2)
    return { key, meant }
  }
  return undefined
}

/** `unknownOption`'s finding as the end of a message: `has an unknown option "runing" (did you mean "running"?); …`. */
export const unknownOptionMessage = (
  found: { readonly key: string; readonly meant: string | undefined },
  accepted: ReadonlyArray<string>
): string =>
  `has an unknown option ${JSON.stringify(found.key.slice(0, 100))}${
    found.meant === undefined ? "" : ` (did you mean ${JSON.stringify(found.meant)}?)`
  }; the options are ${accepted.slice(0, -1).join(", ")} and ${accepted[accepted.length - 1]}`

/** Levenshtein distance, for the short option names of `unknownOption` (longer keys are not compared). */
const editDistance = (a: string, b: string): number => {
  if (Math.abs(a.length - b.length) > 2 || b.length > 64) return Infinity
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    const row = [i]
    for (let j = 1; j <= b.length; j++) {
      row[j] = Math.min(previous[j] + 1, row[j - 1] + 1, previous[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1))
    }
    previous = row
  }
  return previous[b.length]
}

/**
 * A rate limit's `starts` and its window in milliseconds, or why it cannot be used (`Job.Rate`):
 * an object of `starts` and `per` only; `per` a duration as `durationMillis` reads it, but not a
 * bigint (Effect reads a bigint as nanoseconds: `per: 60n` would be a window of 60 ns).
 */
export const checkRate = (
  rate: unknown
): { readonly starts: number; readonly perMs: number } | { readonly problem: string; readonly reason: "type" | "range" } => {
  if (typeof rate !== "object" || rate === null) return { problem: `must be { starts, per }, got ${got(rate)}`, reason: "type" }
  const unknown = unknownOption(rate, rateOptions)
  if (unknown !== undefined) return { problem: unknownOptionMessage(unknown, rateOptions), reason: "type" }
  const { per, starts } = rate as { readonly starts?: unknown; readonly per?: unknown }
  if (typeof starts !== "number") return { problem: `starts must be a number, got ${got(starts)}`, reason: "type" }
  if (!(Number.isInteger(starts) && starts >= 1 && starts <= maxRateStartsValue)) {
    return { problem: `starts must be an integer from 1 to ${maxRateStartsValue}, got ${starts}`, reason: "range" }
  }
  const window = durationMillisNotBigint(per)
  if ("problem" in window) return { problem: `per ${window.problem}`, reason: window.reason }
  if (!(Number.isInteger(window.millis) && window.millis >= 1)) {
    return { problem: `per must be at least 1 millisecond, in whole milliseconds, got ${got(per)}`, reason: "range" }
  }
  if (window.millis > maxRatePeriodMillis) {
    return { problem: `per must be at most 366 days (${maxRatePeriodMillis} ms), got ${got(per)}`, reason: "range" }
  }
  return { starts, perMs: window.millis }
}
