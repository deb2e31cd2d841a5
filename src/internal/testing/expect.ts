/**
 * `expectEnqueued` and `expectNotEnqueued` of `sqlane/testing`: whether the jobs table holds a job
 * of a definition whose decoded payload matches a partial one.
 *
 * @internal
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Equal from "effect/Equal"
import * as Schema from "effect/Schema"
import { ExpectationFailed } from "../../schema/Errors.js"
import { type Job, schemasOf } from "../../schema/Job.js"
import type { JobInfo, JobState } from "../../schema/JobInfo.js"
import { Admin } from "../../services/Admin.js"
import { Queue } from "../../services/Queue.js"

/**
 * A payload with any part left out, at any depth: objects match on the keys given; arrays, dates
 * and other values must be equal (`Date`s by time, Effect data types by `Equal`).
 *
 * @example
 * ```ts
 * // For a payload { to: string; order: { id: number; placedAt: Date } }:
 * const partial: PartialPayload<Job.Payload<typeof SendEmail>> = { order: { id: 7 } }
 * ```
 *
 * @since 0.2.0
 * @category models
 */
export type PartialPayload<A> = A extends Date | ReadonlyArray<unknown> | ((...args: never) => unknown) ? A
  : A extends object ? { readonly [K in keyof A]?: PartialPayload<A[K]> }
  : A

/**
 * What else a job must be to match. Every field given must match; `state` defaults to `pending`.
 *
 * @example
 * ```ts
 * yield* expectEnqueued(SendEmail, {}, { state: ["pending", "completed"], runAt: new Date(60_000), priority: 3 })
 * ```
 *
 * @since 0.2.0
 * @category models
 */
export interface EnqueuedOptions {
  /** The job's state, one of several, or `"any"`. Default `"pending"` (due or not). */
  readonly state?: JobState | ReadonlyArray<JobState> | "any" | undefined
  /** Its `run_at`, to the millisecond. */
  readonly runAt?: Date | undefined
  readonly priority?: number | undefined
}

/**
 * A job found: as `Queue.get` returns it, and its payload decoded by the job's schema.
 *
 * @example
 * ```ts
 * const [job] = yield* expectEnqueued(SendEmail, { to: "ada@example.com" })
 * job.info.runAt          // Date
 * job.payload.placedAt    // Date (decoded; job.info.payload holds the ISO string as stored)
 * ```
 *
 * @since 0.2.0
 * @category models
 */
export interface MatchedJob<P> {
  readonly info: JobInfo
  readonly payload: P
}

/** The most jobs of one name read. */
const maxJobs = 1000
/** The most jobs listed in a failure's message. */
const maxListed = 10

const isPlainObject = (u: unknown): u is Record<string, unknown> => {
  if (typeof u !== "object" || u === null) return false
  const proto = Object.getPrototypeOf(u)
  return proto === Object.prototype || proto === null
}

/** Whether `actual` matches `expected`, which may leave out object keys at any depth. */
const matches = (actual: unknown, expected: unknown): boolean => {
  if (expected instanceof Date) return actual instanceof Date && actual.getTime() === expected.getTime()
  if (Array.isArray(expected)) {
    return Array.isArray(actual) && actual.length === expected.length && expected.every((e, i) => matches(actual[i], e))
  }
  if (isPlainObject(expected)) {
    return typeof actual === "object" && actual !== null &&
      Object.keys(expected).every((k) => matches((actual as Record<string, unknown>)[k], expected[k]))
  }
  return Object.is(actual, expected) || Equal.equals(actual, expected)
}

/** A value as JSON for a message (bigints and dates readable, cut at 300 characters). */
const show = (u: unknown): string => {
  let text: string
  try {
    text = JSON.stringify(u, (_, v) => typeof v === "bigint" ? `${v}n` : v) ?? String(u)
  } catch {
    text = String(u)
  }
  return text.length > 300 ? `${text.slice(0, 300)}…` : text
}

const statesOf = (state: EnqueuedOptions["state"]): ReadonlyArray<JobState> | undefined =>
  state === "any" ? undefined : state === undefined ? ["pending"] : typeof state === "string" ? [state] : state

/** What was asked for, in words. */
const described = (job: Job.Any, partial: unknown, options: EnqueuedOptions): string => {
  const states = statesOf(options.state)
  return [
    `${states === undefined ? "a" : `a ${states.join(" or ")}`} "${job.name}" job`,
    partial === undefined ? undefined : `with payload matching ${show(partial)}`,
    options.runAt === undefined ? undefined : `due at ${options.runAt.toISOString()}`,
    options.priority === undefined ? undefined : `of priority ${options.priority}`
  ].filter((s) => s !== undefined).join(" ")
}

/** One job in a message: id, state, run_at, priority and stored payload. */
const line = (info: JobInfo): string =>
  `#${info.id} ${info.state} run_at ${info.runAt.toISOString()} priority ${info.priority} payload ${show(info.payload)}`

/** The jobs of `job`'s name (newest first, at most `maxJobs`), each with whether it matches. */
const find = <J extends Job.Any>(job: J, partial: unknown, options: EnqueuedOptions) =>
  Effect.gen(function*() {
    const admin = yield* Admin
    const queue = yield* Queue
    const summaries = yield* admin.list({ name: job.name, limit: maxJobs })
    const decode = Schema.decodeUnknownEither(schemasOf(job).payload)
    const states = statesOf(options.state)
    const found: Array<{ readonly info: JobInfo; readonly payload: Either.Either<unknown, unknown>; readonly match: boolean }> = []
    for (const summary of summaries) {
      const info = yield* Effect.catchTag(queue.get(summary.id), "JobNotFound", () => Effect.succeed(undefined))
      if (info === undefined) continue // pruned meanwhile
      const payload = decode(info.payload)
      const match = Either.isRight(payload) &&
        (states === undefined || states.includes(info.state)) &&
        (options.runAt === undefined || info.runAt.getTime() === options.runAt.getTime()) &&
        (options.priority === undefined || info.priority === options.priority) &&
        (partial === undefined || matches(payload.right, partial))
      found.push({ info, payload, match })
    }
    return found
  })

/**
 * Succeeds with the jobs of `job`'s name whose decoded payload matches `partial` (keys left out
 * match anything, at any depth) and that are in `options.state` (default `pending`), and have
 * `options.runAt` / `options.priority` when given; newest first. Fails with `ExpectationFailed`
 * when there is none, its message listing the jobs of that name found instead (id, state, `run_at`,
 * priority, stored payload; at most 10). Reads at most the newest 1,000 jobs of the name.
 *
 * Source: Oban's `Oban.Testing.assert_enqueued/2`, River's `rivertest.RequireInserted`.
 *
 * @example
 * ```ts
 * yield* placeOrder("ada@example.com")
 * const [email] = yield* expectEnqueued(SendEmail, { to: "ada@example.com" })
 * assert.strictEqual(email.payload.orderId, 1)
 * // fails with: expected a pending "send-email" job with payload matching {"to":"bob@example.com"};
 * // found 1 "send-email" job: #1 pending run_at 1970-01-01T00:00:00.000Z priority 0 payload {…}
 * ```
 *
 * @since 0.2.0
 * @category testing
 */
export const expectEnqueued = <J extends Job.Any>(
  job: J,
  partial?: PartialPayload<Job.Payload<J>>,
  options: EnqueuedOptions = {}
): Effect.Effect<ReadonlyArray<MatchedJob<Job.Payload<J>>>, ExpectationFailed | SqlError, Admin | Queue> =>
  Effect.gen(function*() {
    const found = yield* find(job, partial, options)
    const matched = found.filter((f) => f.match)
    if (matched.length > 0) {
      return matched.map((f) => ({ info: f.info, payload: Either.getOrThrow(f.payload) as Job.Payload<J> }))
    }
    const listed = found.slice(0, maxListed).map((f) =>
      `\n  ${line(f.info)}${Either.isLeft(f.payload) ? " (does not decode with the job's schema)" : ""}`
    ).join("")
    const more = found.length > maxListed ? `\n  … and ${found.length - maxListed} more` : ""
    return yield* new ExpectationFailed({
      message: `expected ${described(job, partial, options)}; ` +
        (found.length === 0
          ? `found no "${job.name}" job`
          : `found ${found.length} "${job.name}" job${found.length === 1 ? "" : "s"}:${listed}${more}`)
    })
  })

/**
 * Succeeds when no job of `job`'s name matches (as {@link expectEnqueued} matches: `partial`,
 * `options.state` default `pending`, `runAt`, `priority`); fails with `ExpectationFailed` listing
 * the jobs that match (at most 10).
 *
 * Source: Oban's `Oban.Testing.refute_enqueued/2`.
 *
 * @example
 * ```ts
 * yield* placeOrder("ada@example.com", { newsletter: false })
 * yield* expectNotEnqueued(SendNewsletter, { to: "ada@example.com" })
 * yield* expectNotEnqueued(SendNewsletter) // no pending job of that name at all
 * ```
 *
 * @since 0.2.0
 * @category testing
 */
export const expectNotEnqueued = <J extends Job.Any>(
  job: J,
  partial?: PartialPayload<Job.Payload<J>>,
  options: EnqueuedOptions = {}
): Effect.Effect<void, ExpectationFailed | SqlError, Admin | Queue> =>
  Effect.gen(function*() {
    const matched = (yield* find(job, partial, options)).filter((f) => f.match)
    if (matched.length === 0) return
    const listed = matched.slice(0, maxListed).map((f) => `\n  ${line(f.info)}`).join("")
    const more = matched.length > maxListed ? `\n  … and ${matched.length - maxListed} more` : ""
    return yield* new ExpectationFailed({
      message: `expected no ${described(job, partial, options).replace(/^an? /, "")}; found ${matched.length}:${listed}${more}`
    })
  })
