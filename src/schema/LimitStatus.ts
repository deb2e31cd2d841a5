/**
 * The concurrency limits of job names as `Admin.status`, `Admin.limits` and the `sqlane` CLI show
 * them: the numbers, where they come from, and the slots held now.
 *
 * @since 0.3.0
 */

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
  /** At most `starts` attempts of the name start per window of `perMs` ms (the definition's `limits.rate`). */
  readonly rate: { readonly starts: number; readonly perMs: number } | undefined
  /** The same per concurrency key (`limits.ratePerKey`). */
  readonly ratePerKey: { readonly starts: number; readonly perMs: number } | undefined
  /** Whether a run-time limit (`sqlane limit`) sets them, over the definition's. */
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
 * A job name's run-time concurrency limits (`Admin.setLimits`) and their use now.
 *
 * @example
 * ```ts
 * for (const l of yield* admin.limits) console.log(l.name, `${l.inUse.running}/${l.running ?? "-"}`)
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
