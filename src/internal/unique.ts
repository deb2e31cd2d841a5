/**
 * The `unique` option of an enqueue, checked and resolved to what the driver writes: the stored key
 * (the caller's key, and with a `period` the bucket it falls in), the states that guard it (a bit
 * mask), and what an enqueue does to a pending job that holds it (`mode`). Plain code, before any SQL.
 *
 * @internal
 */
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import { InvalidEnqueueOption } from "../schema/Errors.js"
import type { Job } from "../schema/Job.js"
import { JobState } from "../schema/JobInfo.js"
import type { UniqueMode, UniqueOptions } from "../services/Queue.js"
import { stateBits } from "./driver/shared.js"
import { durationMillisNotBigint, got, unknownOption, unknownOptionMessage } from "./options.js"
import { checkKey } from "./payload.js"

/** A unique option resolved: the key as stored, its guarded states' bit mask, and the mode. */
export interface ResolvedUnique {
  readonly key: string
  readonly states: number
  readonly mode: UniqueMode
}

/** The modes, in the order the messages list them. */
const modes: ReadonlyArray<UniqueMode> = ["skip", "replace", "throttle"]

/** The most characters of a key with a `period`: the stored key adds at most 35 (`periodKey`). */
export const maxPeriodKeyLength = 200

/**
 * The key as stored for `key` with a period of `periodMs` at `nowMs`: the key, U+001F, the period
 * and the start of the bucket `nowMs` falls in (both in milliseconds since the epoch), e.g.
 * `digest:7\u001f3600000:1796464800000` (2026-12-05 10:00 UTC). A key as given cannot hold U+001F, so it never equals one, and two
 * periods of one key are two keys.
 */
export const periodKey = (key: string, periodMs: number, nowMs: number): string =>
  `${key}\u001f${periodMs}:${Math.floor(nowMs / periodMs) * periodMs}`

const invalid = (job: Job.Any, path: string, reason: "type" | "range" | "characters", message: string) =>
  Either.left(new InvalidEnqueueOption({ job: job.name, path, reason, message }))

/** A unique key as given: checked as every key, and without U+001F (which marks a period's key). */
const checkUniqueKey = (job: Job.Any, what: string, path: string, key: unknown) =>
  Either.flatMap(checkKey(job, what, path, key), (k) =>
    k.includes("\u001f")
      ? invalid(job, path, "characters", `${what} must not contain U+001F (it marks the key of a unique period)`)
      : Either.right(k))

/**
 * `unique` (a key or {@link UniqueOptions}) checked and resolved at `nowUs` (the enqueue's `Clock`
 * time, µs), or the `InvalidEnqueueOption` naming what is wrong (`unique`, `unique.key`,
 * `unique.states`, `unique.mode`, `unique.period`). `where` prefixes messages (enqueueMany: which
 * payload's key).
 */
/** The options of `unique` as an object. */
const uniqueOptions = ["key", "states", "mode", "period"] as const

export const resolveUnique = (
  job: Job.Any,
  unique: unknown,
  nowUs: number,
  where = ""
): Either.Either<ResolvedUnique, InvalidEnqueueOption> => {
  if (typeof unique === "string") {
    const key = checkUniqueKey(job, `${where}the unique key`, "unique", unique)
    return Either.map(key, (key) => ({ key, states: stateBits.pending | stateBits.running, mode: "skip" as const }))
  }
  if (typeof unique !== "object" || unique === null) {
    return invalid(job, "unique", "type", `${where}unique must be a key (a string) or { key, states, mode, period }, got ${typeof unique}`)
  }
  // A misspelt option (`mdoe`) would otherwise be ignored, and the key kept as with the defaults.
  const unknown = unknownOption(unique, uniqueOptions)
  if (unknown !== undefined) return invalid(job, "unique", "type", `${where}unique ${unknownOptionMessage(unknown, uniqueOptions)}`)
  const options = unique as UniqueOptions
  const key = checkUniqueKey(job, `${where}the unique key`, "unique.key", options.key)
  if (Either.isLeft(key)) return Either.left(key.left)
  const mode = options.mode === undefined ? "skip" : options.mode
  if (!modes.includes(mode)) {
    return invalid(job, "unique.mode", "type", `${where}unique.mode must be one of ${modes.map((m) => `"${m}"`).join(", ")}, got ${JSON.stringify(mode)}`)
  }
  const statesGiven = options.states
  if (statesGiven !== undefined && !Array.isArray(statesGiven)) {
    return invalid(job, "unique.states", "type", `${where}unique.states must be an array of job states`)
  }
  let states = stateBits.pending | stateBits.running
  // With a period, a completed job holds its key too unless the states say otherwise (as River's `ByPeriod` with
  // its default states): "at most one job per period", also once it ran.
  if (statesGiven === undefined && options.period !== undefined) states |= stateBits.completed
  for (const state of statesGiven ?? []) {
    if (!Schema.is(JobState)(state)) return invalid(job, "unique.states", "type", `${where}unknown job state in unique.states: ${state}`)
    states |= stateBits[state]
  }
  if (options.period === undefined) return Either.right({ key: key.right, states, mode })
  const period = durationMillisNotBigint(options.period)
  if ("problem" in period) return invalid(job, "unique.period", period.reason, `${where}unique.period ${period.problem}`)
  if (!Number.isSafeInteger(period.millis) || period.millis < 1) {
    return invalid(
      job,
      "unique.period",
      "range",
      `${where}unique.period must be a whole number of milliseconds from 1 to ${Number.MAX_SAFE_INTEGER}, got ${
        got(options.period)
      }`
    )
  }
  if (key.right.length > maxPeriodKeyLength) {
    return invalid(job, "unique.key", "range", `${where}a unique key with a period is at most ${maxPeriodKeyLength} characters, got ${key.right.length}`)
  }
  return Either.right({ key: periodKey(key.right, period.millis, Math.floor(nowUs / 1000)), states, mode })
}
