/**
 * Periodic jobs: a job enqueued at every tick of a cron expression (Effect's `Cron`, time zone
 * aware). A declaration is plain data, checked when it is made; `Scheduler.layer` runs them.
 *
 * Each tick is enqueued exactly once however many schedulers run it: the tick's job carries the
 * unique key `sqlane:periodic:<name>:<tick ms>`, held in every state, so the database refuses a
 * second one (no leader election). Two periodic jobs with the same expression are two names, so
 * both fire.
 *
 * Across daylight-saving changes the ticks follow classic cron: where the clock goes back, a cron
 * with wildcard or step hours fires through both copies of the repeated hour, one at fixed hours
 * once; where it jumps ahead, a time in the skipped hour fires once (see docs/scheduling.md).
 *
 * Source: River's `PeriodicJob` (periodic jobs inserted with unique keys by the leader), Oban's
 * `Cron` plugin (cron expressions with time zones), pg-boss's `schedule` (one job per cron slot,
 * deduplicated by a singleton key).
 *
 * @since 0.1.0
 */
import * as Cron from "effect/Cron"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import { checkJobName } from "../internal/sanitize.js"
import { InvalidSchedule } from "./Errors.js"
import { type Job, schemasOf } from "./Job.js"

/**
 * What a scheduler does with ticks that passed while no scheduler ran this periodic job (every
 * process was down): `"skip"` them, or `"runOnce"`: enqueue the latest of them once, at start.
 *
 * @example
 * ```ts
 * // Enqueue the latest missed tick once when the scheduler starts
 * const Digest = PeriodicJob.unsafeMake("daily-digest", { cron: "0 7 * * *", job: SendDigest, payload: {}, missed: "runOnce" })
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export type Missed = "skip" | "runOnce"

/**
 * A periodic job (from {@link make}): a cron expression with its time zone, the job it enqueues at
 * each tick, and that job's payload.
 *
 * @example
 * ```ts
 * const Nightly: PeriodicJob.PeriodicJob<typeof Report> = PeriodicJob.unsafeMake("nightly-report", {
 *   cron: "0 3 * * *",
 *   timeZone: "Europe/Berlin",
 *   job: Report,
 *   payload: (tick) => ({ day: tick })
 * })
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface PeriodicJob<J extends Job.Any = Job.Any> {
  readonly _tag: "sqlane/PeriodicJob"
  /** The periodic job's name: 1–200 characters, unique among the periodic jobs of a scheduler. */
  readonly name: string
  /** The expression as given, e.g. `"0 9 * * 1-5"`. */
  readonly expression: string
  /** The parsed expression, with its time zone. */
  readonly cron: Cron.Cron
  /** The time zone the expression is read in, as given (default `"UTC"`). */
  readonly timeZone: string
  /** The job enqueued at each tick. */
  readonly job: J
  /** The payload of the tick at this instant. */
  readonly payload: (tick: Date) => Job.Payload<J>
  readonly missed: Missed
  /** The priority of the tick's job; `undefined`: the job definition's. */
  readonly priority: number | undefined
}

/**
 * The unique key of one tick's job.
 *
 * @example
 * ```ts
 * // The unique key of the job of the 03:00 UTC tick of 1 December 2026
 * const key = PeriodicJob.tickKey("nightly-report", new Date("2026-12-01T03:00:00Z"))
 * // "sqlane:periodic:nightly-report:1796094000000"
 * ```
 *
 * @since 0.1.0
 * @category keys
 */
export const tickKey = (name: string, tick: Date): string => `sqlane:periodic:${name}:${tick.getTime()}`

/**
 * Declares a periodic job. Refused with `InvalidSchedule` when the expression does not parse (or
 * never fires), the time zone is unknown, the name is not 1–200 characters without U+0000, lone
 * surrogates and a trailing space (as a job name: see `Job.make`), or a constant payload
 * does not encode with the job's payload schema.
 *
 * The tick's job is due at the tick (`runAt` = the tick; `JobContext.runAt` tells the handler which
 * tick it runs for) and, like any job, is retried by its job's schedule.
 *
 * @example
 * ```ts
 * const Nightly = PeriodicJob.unsafeMake("nightly-report", {
 *   cron: "0 3 * * *", timeZone: "Europe/Berlin", job: Report, payload: (tick) => ({ day: tick })
 * })
 * const SchedulerLive = Scheduler.layer({ schedules: [Nightly] })
 * ```
 *
 * @param name 1–200 characters, without U+0000, lone surrogates or a trailing space; part of each
 *   tick's unique key, so renaming a periodic job makes it a new one
 * @param options.cron a cron expression: 5 fields (minute hour day month weekday) or 6 (with
 *   seconds first), as `effect/Cron` parses them
 * @param options.timeZone an IANA time zone (`"America/New_York"`) or an offset (`"+02:00"`) in
 *   which the expression is read; default UTC
 * @param options.job the job definition enqueued at each tick
 * @param options.payload the payload, or a function of the tick's instant
 * @param options.missed default `"skip"`
 * @param options.priority an integer; default the job's
 * @since 0.1.0
 * @category constructors
 */
export const make = <J extends Job.Any>(
  name: string,
  options: {
    readonly cron: string
    readonly timeZone?: string | undefined
    readonly job: J
    readonly payload: Job.Payload<J> | ((tick: Date) => Job.Payload<J>)
    readonly missed?: Missed | undefined
    readonly priority?: number | undefined
  }
): Either.Either<PeriodicJob<J>, InvalidSchedule> => {
  const refuse = (message: string) =>
    Either.left(new InvalidSchedule({ schedule: typeof name === "string" ? name : String(name), message }))
  // As a job name (Job.make, enqueue): it is stored as a key of its own and in each tick's unique key.
  const problem = checkJobName(name)
  if (problem !== undefined) return refuse(`a periodic job name ${problem}`)
  if (name.length > 200) return refuse(`a periodic job name must be 1 to 200 characters, got ${name.length}`)
  // Without a zone, `Cron` reads the expression in the process's local zone: UTC is asked for.
  const parsed = Cron.parse(options.cron, options.timeZone ?? "UTC")
  if (Either.isLeft(parsed)) return refuse(`${parsed.left.message}: ${parsed.left.input}`)
  try {
    Cron.next(parsed.right, new Date())
  } catch (e) {
    return refuse(`the cron expression ${options.cron} never fires: ${e instanceof Error ? e.message : String(e)}`)
  }
  const priority = options.priority
  if (priority !== undefined && (!Number.isSafeInteger(priority) || priority < -2147483648 || priority > 2147483647)) {
    return refuse(`priority must be a 32-bit integer, got ${priority}`)
  }
  const payload = options.payload
  if (typeof payload !== "function") {
    const encoded = Schema.encodeEither(schemasOf(options.job).payload)(payload)
    if (Either.isLeft(encoded)) return refuse(`the payload does not encode: ${encoded.left.message}`)
  }
  return Either.right({
    _tag: "sqlane/PeriodicJob",
    name,
    expression: options.cron,
    cron: parsed.right,
    timeZone: options.timeZone ?? "UTC",
    job: options.job,
    payload: typeof payload === "function"
      ? (payload as (tick: Date) => Job.Payload<J>)
      : () => payload as Job.Payload<J>,
    missed: options.missed ?? "skip",
    priority
  })
}

/**
 * As {@link make}, throwing the `InvalidSchedule` error: for declarations at module level.
 *
 * @example
 * ```ts
 * const Nightly = PeriodicJob.unsafeMake("nightly-report", {
 *   cron: "0 3 * * *",
 *   timeZone: "Europe/Berlin",
 *   job: Report,
 *   payload: (tick) => ({ day: tick })
 * })
 * const SchedulerLive = Scheduler.layer({ schedules: [Nightly] })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const unsafeMake = <J extends Job.Any>(name: string, options: Parameters<typeof make<J>>[1]): PeriodicJob<J> =>
  Either.getOrThrowWith(make(name, options), (error) => error)
