/**
 * The concurrency and rate limits of job names as `Admin.setLimits` takes them and `Admin.status`,
 * `Admin.limits` and the `sqlane` CLI show them: the numbers, where they come from, and the slots
 * held now.
 *
 * @since 0.3.0
 */
import type { Rate } from "./Job.js"

/**
 * A rate limit as sqlane applies it: at most `starts` attempts start per fixed window of `perMs`
 * milliseconds (windows aligned to multiples of the period since the Unix epoch).
 *
 * @example
 * ```ts
 * const describe = (r: RateLimit) => `${r.starts} per ${r.perMs} ms`
 * ```
 *
 * @since 0.3.0
 * @category models
 */
export interface RateLimit {
  /** Starts per window: an integer from 1 to 1,000,000. */
  readonly starts: number
  /** The window's length in milliseconds: 1 to 31,622,400,000 (366 days). */
  readonly perMs: number
}

/**
 * A job name's concurrency limits as `sqlane status` shows them, with the slots held now.
 *
 * @example
 * ```ts
 * for (const n of (yield* admin.status).names) if (n.limits) console.log(n.name, `${n.limits.inUse}/${n.limits.running ?? "-"}`)
 * ```
 *
 * @since 0.3.0
 * @category models
 */
export interface NameLimitStatus {
  readonly running: number | undefined
  readonly runningPerKey: number | undefined
  /**
   * At most `starts` attempts of the name start per window of `perMs` ms (set at run time, else the
   * definition's `limits.rate`).
   */
  readonly rate: RateLimit | undefined
  /** The same per concurrency key (set at run time, else the definition's `limits.ratePerKey`). */
  readonly ratePerKey: RateLimit | undefined
  /** Whether a run-time limit (`sqlane limit`) sets some of them, over the definition's. */
  readonly setAtRunTime: boolean
  /** Attempts holding a slot of the name's limit now. */
  readonly inUse: number
  /** Keys with an attempt holding a slot of its key's limit now. */
  readonly keysInUse: number
  /**
   * With `rate` or `ratePerKey`: the name's current rate window as the claims counted it (its row
   * of `<prefix>rates`); undefined for a name without rates.
   */
  readonly rateWindow: RateWindowStatus | undefined
}

/**
 * A rated job name's current window (`NameLimitStatus.rateWindow`): the starts counted in it, and
 * when the next window admits starts. Windows are fixed, aligned to multiples of the period since
 * the Unix epoch (docs/flow-control.md, "Rate limits"), and read at the status's instant (Effect's
 * `Clock`).
 *
 * @example
 * ```ts
 * const w = (yield* admin.status).names.find((n) => n.name === "sync")?.limits?.rateWindow
 * if (w) console.log(`${w.starts ?? "-"} started; next window at ${w.nextWindowAt.toISOString()}`)
 * ```
 *
 * @since 0.3.0
 * @category models
 */
export interface RateWindowStatus {
  /**
   * Attempts of the name started in its current window of `rate` (0 when none yet); undefined
   * without `rate` (a name with only `ratePerKey` counts per key).
   */
  readonly starts: number | undefined
  /**
   * When the current window ends (of `rate`, else of `ratePerKey`), or when the name's hold ends if
   * that is later: the earliest instant a window admits starts again once this one is used up.
   */
  readonly nextWindowAt: Date
  /** When the hold of the whole name (`RateLimited` with scope "name") ends, while one holds it. */
  readonly heldUntil: Date | undefined
}

/**
 * What `Admin.setLimits` changes in a job name's run-time limits, limit by limit: a value sets it,
 * `null` removes it (the definition's applies again), and one left out keeps what it was.
 *
 * - `running`, `runningPerKey`: an integer from 1 to 10,000 (`Job.maxLimit`).
 * - `rate`, `ratePerKey`: `{ starts, per }` as a definition's `limits.rate` takes it (`Job.Rate`:
 *   `starts` 1–1,000,000, `per` a duration from 1 ms to 366 days in whole milliseconds — `"1
 *   minute"`, `60_000`, `Duration.minutes(1)` — never a bigint).
 *
 * @example
 * ```ts
 * const changes: Admin.LimitChanges = { running: 5, rate: { starts: 100, per: "1 minute" }, ratePerKey: null }
 * yield* admin.setLimits("report", changes)
 * ```
 *
 * @since 0.3.0
 * @category models
 */
export interface LimitChanges {
  readonly running?: number | null | undefined
  readonly runningPerKey?: number | null | undefined
  readonly rate?: Rate | null | undefined
  readonly ratePerKey?: Rate | null | undefined
}

/**
 * A job name's limits set at run time (what `Admin.setLimits` returns): each limit, or `undefined`
 * where none is set at run time and the job definition's applies.
 *
 * @example
 * ```ts
 * const describe = (l: Admin.RunTimeLimits) =>
 *   `running ${l.running ?? "(definition)"}, rate ${l.rate === undefined ? "(definition)" : `${l.rate.starts}/${l.rate.perMs} ms`}`
 * ```
 *
 * @since 0.3.0
 * @category models
 */
export interface RunTimeLimits {
  /** At most this many attempts of the name at once, everywhere (1–10,000), or `undefined`: the definition's. */
  readonly running: number | undefined
  /** At most this many attempts of one concurrency key at once (1–10,000), or `undefined`: the definition's. */
  readonly runningPerKey: number | undefined
  /** At most this many attempts of the name start per window, everywhere, or `undefined`: the definition's. */
  readonly rate: RateLimit | undefined
  /** At most this many attempts of one concurrency key start per window, or `undefined`: the definition's. */
  readonly ratePerKey: RateLimit | undefined
}

/**
 * A job name's run-time limits (`Admin.setLimits`) and the slots held now.
 *
 * @example
 * ```ts
 * for (const l of yield* admin.limits) console.log(l.name, `${l.inUse.running}/${l.running ?? "-"}`, l.rate?.starts)
 * ```
 *
 * @since 0.3.0
 * @category models
 */
export interface LimitStatus {
  readonly name: string
  /** At most this many attempts of the name at once (undefined: the definition's). */
  readonly running: number | undefined
  /** At most this many attempts of one concurrency key at once (undefined: the definition's). */
  readonly runningPerKey: number | undefined
  /** At most this many attempts of the name start per window (undefined: the definition's). */
  readonly rate: RateLimit | undefined
  /** At most this many attempts of one concurrency key start per window (undefined: the definition's). */
  readonly ratePerKey: RateLimit | undefined
  readonly updatedAt: Date
  /** Slots held now: of the name, of keys (in all, and the busiest key's). */
  readonly inUse: {
    readonly running: number
    readonly runningKeyed: number
    readonly keys: number
    readonly busiestKey: string | undefined
    readonly busiestKeyRunning: number
  }
}
