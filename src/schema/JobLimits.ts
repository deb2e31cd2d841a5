/**
 * The limits of a job definition (`Job.make`'s `limits`): concurrency limits per job name and per
 * key, rate limits, and the key itself — their types, their bounds and their checks.
 *
 * @since 0.3.0
 */
import type * as Duration from "effect/Duration"
import { checkRate, got, maxRateStartsValue, unknownOption, unknownOptionMessage } from "../internal/options.js"
import { InvalidJobDefinition } from "./Errors.js"

/**
 * Concurrency limits of a job name, kept in the database and enforced across every worker and
 * process: at most `running` attempts of the name run at once, and at most `runningPerKey` per
 * concurrency key (`key`, from the payload: a tenant, an account). Each running attempt holds a
 * numbered slot of its name (and of its key) in its own row, under a unique index over running
 * rows: two claims can never hold one slot, and a slot is free again as soon as its attempt stops
 * running — it ends, is released, cancelled or rescued from a lost worker. Jobs over a limit wait,
 * pending, without counting an attempt, and a worker of the name is woken when a slot frees.
 *
 * `sqlane limit` (and `Admin.setLimits`) override either number at run time, for every worker.
 *
 * The options are `running`, `key`, `runningPerKey`, `rate` and `ratePerKey`: `Job.make` throws
 * `InvalidJobDefinition` (option `limits`) for any other key, e.g. a misspelt `runing`, which would
 * otherwise be no limit at all.
 *
 * Rate limits (`rate`, `ratePerKey`: starts per fixed window, see {@link Rate}) are counted in
 * `<prefix>rates` by the claims that start the attempts.
 *
 * Source: Oban Pro's global limits and partitions, River Pro's global concurrency limits with
 * partitions by arguments, BullMQ Pro's group concurrency, pg-boss's group concurrency.
 *
 * @example
 * ```ts
 * const Report = Job.make("report", {
 *   payload: Schema.Struct({ tenant: Schema.String }),
 *   // 20 reports at once in all, and 2 per tenant
 *   limits: { running: 20, key: (p) => p.tenant, runningPerKey: 2 }
 * })
 * ```
 *
 * @since 0.3.0
 * @category models
 */
export interface Limits<Payload> {
  /** At most this many attempts of the job name run at once, everywhere: an integer 1–10,000. */
  readonly running?: number | undefined
  /**
   * The job's concurrency key, from its (decoded) payload at enqueue: a string of 1–255 UTF-16 code
   * units (its JavaScript `length`; an emoji outside the BMP counts 2) without U+0000 or lone
   * surrogates, or `undefined` for none; keys are counted per job name. A key out of range refuses the
   * enqueue with `InvalidEnqueueOption` (path `limits.key`). With a key, the name's jobs are claimed
   * round-robin across keys (fair shares: a key's backlog never holds back the others' jobs;
   * docs/flow-control.md, "Fair shares by key"), also without a limit.
   */
  readonly key?: ((payload: Payload) => string | undefined) | undefined
  /** At most this many attempts of one key run at once, everywhere: an integer 1–10,000. */
  readonly runningPerKey?: number | undefined
  /**
   * At most `starts` attempts of the job name start in each window of `per`, everywhere (see
   * {@link Rate}).
   */
  readonly rate?: Rate | undefined
  /** At most `starts` attempts of one concurrency key (`key`) start in each window of `per` (see {@link Rate}). */
  readonly ratePerKey?: Rate | undefined
}

/** The options of {@link Limits}, which `Job.make` takes (any other key is refused). */
const limitsOptions = ["running", "key", "runningPerKey", "rate", "ratePerKey"] as const

/**
 * A rate limit: at most `starts` attempts start in each window of `per`, counted over every worker
 * of every process. Windows are fixed and aligned to multiples of `per` since the Unix epoch, as
 * the workers' Clock reads it: with `{ starts: 100, per: "1 minute" }`, at most 100 attempts start
 * between 12:00:00.000 and 12:00:59.999, and the next 100 from 12:01:00.000. Each window's count is
 * kept in `<prefix>rates` and written by the claim that starts the attempts, in its own
 * transaction: a claim that does not commit counts nothing. A job over the rate stays pending
 * (no attempt counted) and its worker claims it from the start of the window that admits it.
 *
 * `starts` is an integer from 1 to 1,000,000 (`Job.maxRateStarts`); `per` a duration from 1 ms to
 * 366 days, in whole milliseconds: a string Effect's `Duration` reads (`"1 minute"`, `"500 millis"`),
 * a number of milliseconds (`60_000`) or a `Duration` (`Duration.minutes(1)`). A bigint is refused:
 * Effect reads one as nanoseconds, so `per: 60n` would be a window of 60 ns. Anything else — a bigint,
 * a key other than `starts` and `per` — throws `InvalidJobDefinition` from `Job.make` (option
 * `limits.rate` or `limits.ratePerKey`).
 *
 * Source: BullMQ's worker `limiter` (`max` per `duration`) and Pro group rate limits, Oban Pro's
 * `rate_limit` (`allowed` per `period`, partitioned).
 *
 * @example
 * ```ts
 * const Sync = Job.make("sync", {
 *   payload: Schema.Struct({ account: Schema.String }),
 *   // 600 syncs a minute in all, and 10 a second per account
 *   limits: { key: (p) => p.account, rate: { starts: 600, per: "1 minute" }, ratePerKey: { starts: 10, per: "1 second" } }
 * })
 * ```
 *
 * @since 0.3.0
 * @category models
 */
export interface Rate {
  /** At most this many attempts start in one window: an integer 1–1,000,000. */
  readonly starts: number
  /**
   * The window's length: a duration from 1 ms to 366 days, in whole milliseconds — `"1 second"`,
   * `60_000` (milliseconds) or a `Duration`; not a bigint (Effect reads it as nanoseconds: refused).
   */
  readonly per: Exclude<Duration.DurationInput, bigint>
}

/**
 * The largest `starts` of a rate limit ({@link Rate}).
 *
 * @example
 * ```ts
 * const ok = (n: number) => Number.isInteger(n) && n >= 1 && n <= Job.maxRateStarts
 * ```
 *
 * @since 0.3.0
 * @category constants
 */
export const maxRateStarts = maxRateStartsValue


/**
 * The largest value of a concurrency limit: each running attempt takes a numbered slot below it.
 *
 * @example
 * ```ts
 * const ok = (n: number) => Number.isInteger(n) && n >= 1 && n <= Job.maxLimit
 * ```
 *
 * @since 0.3.0
 * @category constants
 */
export const maxLimit = 10_000

/**
 * Checks the `limits` of the definition of job `name`; throws `InvalidJobDefinition` (option
 * `limits`, or `limits.<option>`) for a value out of range, an option it does not know, or a per-key
 * limit without `key`.
 *
 * @internal
 */
export const checkLimits = (name: string, limits: Limits<never> | undefined): void => {
  if (limits !== undefined && (typeof limits !== "object" || limits === null || Array.isArray(limits))) {
    throw new InvalidJobDefinition({
      job: name,
      option: "limits",
      reason: "type",
      message: `limits must be an object { running?, key?, runningPerKey?, rate?, ratePerKey? }, got ${
        limits === null ? "null" : Array.isArray(limits) ? "an array" : typeof limits
      }`
    })
  }
  if (limits !== undefined) {
    // A misspelt option (`runing: 3`) would otherwise be no limit at all.
    const unknown = unknownOption(limits, limitsOptions)
    if (unknown !== undefined) {
      throw new InvalidJobDefinition({
        job: name,
        option: "limits",
        reason: "type",
        message: `limits ${unknownOptionMessage(unknown, limitsOptions)}`
      })
    }
    for (const option of ["running", "runningPerKey"] as const) {
      const n = limits[option]
      if (n !== undefined && !(Number.isInteger(n) && n >= 1 && n <= maxLimit)) {
        throw new InvalidJobDefinition({
          job: name,
          option: `limits.${option}`,
          reason: typeof n === "number" ? "range" : "type",
          message: `limits.${option} must be an integer from 1 to ${maxLimit}, got ${got(n)}`
        })
      }
    }
    if (limits.key !== undefined && typeof limits.key !== "function") {
      throw new InvalidJobDefinition({
        job: name,
        option: "limits.key",
        reason: "type",
        message: "limits.key must be a function of the payload"
      })
    }
    for (const option of ["rate", "ratePerKey"] as const) {
      if (limits[option] === undefined) continue
      const checked = checkRate(limits[option])
      if ("problem" in checked) {
        throw new InvalidJobDefinition({
          job: name,
          option: `limits.${option}`,
          reason: checked.reason,
          message: `limits.${option}: ${checked.problem}`
        })
      }
    }
    for (const option of ["ratePerKey", "runningPerKey"] as const) {
      if (limits[option] !== undefined && limits.key === undefined) {
        throw new InvalidJobDefinition({
          job: name,
          option: "limits.key",
          reason: "conflict",
          message: `limits.${option} needs limits.key, the function that gives a job's key`
        })
      }
    }
  }
}
