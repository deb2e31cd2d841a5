/**
 * A worker's view of the concurrency and rate limits of its job names: each definition's `limits`,
 * with the limits set at run time (`<prefix>limits`, by `sqlane limit` or `Admin.setLimits`) over them,
 * followed as `internal/watched.ts` follows a table: at start, on a change, and every
 * `rescueInterval`. So a limit set at run time reaches every worker within one `rescueInterval`
 * (at once in the process that set it, and on PostgreSQL by `NOTIFY`).
 *
 * The view only says which names the worker claims with slots or rate windows, and how many: the
 * claim statements hand out the slots and count the starts (see the keyed and rated claims in
 * `driver/pg/jobs.ts` and `driver/mysql/jobs.ts`).
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import * as Job from "../schema/Job.js"
import { ofJobName } from "../services/Metrics.js"
import { Notifier } from "../services/Notifier.js"
import type { QueueConfig } from "../services/QueueConfig.js"
import { Database } from "./Database.js"
import type { SqlError } from "@effect/sql/SqlError"
import { InvalidLimit } from "../schema/Errors.js"
import type { LimitChanges, LimitStatus, NameLimitStatus, RateWindowStatus, RunTimeLimits } from "../schema/LimitStatus.js"
import type {
  Driver,
  LimitChanges as LimitRowChanges,
  LimitRow,
  NameLimits,
  RateNameRow,
  RateWindow
} from "./driver/Driver.js"
import { rowWindow, windowStartUs } from "./driver/rateWindows.js"
import { checkRate, unknownOption, unknownOptionMessage } from "./options.js"
import { checkJobName } from "./sanitize.js"
import { microsToDate } from "./time.js"
import { nameKey } from "./pauses.js"
import { follow } from "./watched.js"

export interface LimitsView {
  /** The limits of the worker's limited names now (a name not in it has none). */
  readonly current: () => ReadonlyMap<string, NameLimits>
}

/** The limits of a name: its definition's, with a run-time row's limits over them. */
export const effective = (defined: Job.Limits<never> | undefined, row: LimitRow | undefined): NameLimits | undefined => {
  const running = row?.running ?? defined?.running
  const runningPerKey = row?.runningPerKey ?? defined?.runningPerKey
  const rate = row?.rate ?? rateWindow(defined?.rate)
  const ratePerKey = row?.ratePerKey ?? rateWindow(defined?.ratePerKey)
  const fair = defined?.key !== undefined
  return running === undefined && runningPerKey === undefined && rate === undefined && ratePerKey === undefined && !fair
    ? undefined
    : { running, runningPerKey, rate, ratePerKey, ...(fair ? { fair } : {}) }
}

/** Whether a job of a name under `l`, claimed and waiting to start, holds what another could use: a slot or a start. */
export const holdsWhileWaiting = (l: NameLimits) =>
  l.running !== undefined || l.runningPerKey !== undefined || l.rate !== undefined || l.ratePerKey !== undefined

/**
 * Whether jobs of a name under `l` are claimed ahead without a slot, to start in the slot an ended
 * attempt of the same worker passes on (`internal/worker/nameSlots.ts`): a limit by `running`
 * alone (no per-key limit, rate or fair shares).
 */
export const passesSlots = (l: NameLimits) =>
  l.running !== undefined && l.runningPerKey === undefined && l.rate === undefined && l.ratePerKey === undefined &&
  l.fair !== true

/** A definition's rate limit as claims apply it (checked by `Job.make`). */
const rateWindow = (rate: Job.Rate | undefined): RateWindow | undefined => {
  if (rate === undefined) return undefined
  const checked = checkRate(rate)
  return "problem" in checked ? undefined : checked
}

const sameRate = (a: RateWindow | undefined, b: RateWindow | undefined) =>
  a === b || (a !== undefined && b !== undefined && a.starts === b.starts && a.perMs === b.perMs)

/**
 * Follows the limits of the worker's job names (`definitions`: each name's job definition limits)
 * for the life of the scope; calls `onChange` with the new limits whenever they change.
 */
export const watch = (
  definitions: ReadonlyMap<string, Job.Limits<never> | undefined>,
  onChange: (limits: ReadonlyMap<string, NameLimits>) => void,
  /** Called after a notice that the limits or holds changed (this process's, or by `NOTIFY`) when the re-read finds the limits as they were. */
  onNotice?: () => void
): Effect.Effect<LimitsView, never, Scope.Scope | Database | Notifier | QueueConfig> =>
  Effect.gen(function*() {
    const { driver } = yield* Database
    const notifier = yield* Notifier
    // The limits table compares names as the paused table does (PAD SPACE on MySQL/MariaDB).
    const key = nameKey(driver.capabilities.padSpaceKeys)
    const compute = (rows: ReadonlyArray<LimitRow>) => {
      const byName = new Map(rows.map((r) => [key(r.name), r]))
      const next = new Map<string, NameLimits>()
      for (const [name, defined] of definitions) {
        const limits = effective(defined, byName.get(key(name)))
        if (limits !== undefined) next.set(name, limits)
      }
      return next
    }
    let limits: ReadonlyMap<string, NameLimits> = compute([])
    const same = (a: ReadonlyMap<string, NameLimits>, b: ReadonlyMap<string, NameLimits>) =>
      a.size === b.size &&
      Array.from(a).every(([n, l]) => {
        const o = b.get(n)
        return o !== undefined && o.running === l.running && o.runningPerKey === l.runningPerKey && o.fair === l.fair &&
          sameRate(o.rate, l.rate) && sameRate(o.ratePerKey, l.ratePerKey)
      })
    /** A notice came since the last read (not the backstop's re-read alone). */
    let noticed = false
    const refresh = Effect.map(driver.limitList(), (rows) => {
      const next = compute(rows)
      const notice = noticed
      noticed = false
      if (same(limits, next)) {
        if (notice) onNotice?.()
        return
      }
      limits = next
      onChange(next)
    })
    onChange(limits)
    if (definitions.size > 0) {
      yield* follow("concurrency limits", refresh, (changed) =>
        notifier.onLimitsChanged(() => {
          noticed = true
          changed()
        }))
    }
    return { current: () => limits }
  })

/**
 * Sets the limit gauges of the names under a name limit (`sqlane_limit_running`,
 * `sqlane_limit_in_use`, `sqlane_jobs_held_back`), from the slots held now and `due` (each name's
 * due jobs, as the heartbeat counted them); `sqlane_jobs_held_back_by_key` of the names under a
 * per-key limit, from the keys at their limit; and `sqlane_jobs_held_back_by_rate` of the rated
 * names, from their window rows at `nowUs`.
 */
export const gauge = (
  driver: Driver,
  limits: ReadonlyMap<string, NameLimits>,
  due: ReadonlyArray<{ readonly name: string; readonly due: number }>,
  nowUs: number
): Effect.Effect<void, SqlError> =>
  Effect.gen(function*() {
    const dueOf = new Map(due.map((d) => [d.name, d.due]))
    const named = Array.from(limits).filter(([, l]) => l.running !== undefined)
    if (named.length > 0) {
      const inUse = new Map((yield* driver.limitUse(named.map(([n]) => n), false)).map((u) => [u.name, u.running]))
      for (const [name, l] of named) {
        const used = inUse.get(name) ?? 0
        const metrics = ofJobName(name)
        metrics.limitRunning.unsafeUpdate(l.running!, [])
        metrics.limitInUse.unsafeUpdate(used, [])
        metrics.heldBack.unsafeUpdate(used >= l.running! ? dueOf.get(name) ?? 0 : 0, [])
      }
    }
    const perKey = Array.from(limits).flatMap(([name, l]) => l.runningPerKey === undefined ? [] : [{ name, perKey: l.runningPerKey }])
    if (perKey.length > 0) {
      const held = new Map((yield* driver.jobCountHeldByKey(perKey, nowUs, 10_000)).map((h) => [h.name, h.held]))
      for (const { name } of perKey) ofJobName(name).heldBackByKey.unsafeUpdate(held.get(name) ?? 0, [])
    }
    const rated = Array.from(limits).filter(([, l]) => l.rate !== undefined || l.ratePerKey !== undefined)
    if (rated.length === 0) return
    const rows = new Map((yield* driver.rateNameList(rated.map(([n]) => n))).map((r) => [r.name, r]))
    for (const [name, l] of rated) {
      const w = rateWindowOf(l, rows.get(name), nowUs)
      const held = w !== undefined &&
        (w.heldUntil !== undefined || (l.rate !== undefined && (w.starts ?? 0) >= l.rate.starts))
      ofJobName(name).heldBackByRate.unsafeUpdate(held ? dueOf.get(name) ?? 0 : 0, [])
    }
  })

/**
 * A rated name's window at `nowUs` (undefined for a name without rates), from its own row of
 * `<prefix>rates` (`row` undefined: no claim counted in it yet), as claims read it (`rowWindow`):
 * the window of `nowUs`, or the row's when it is later (a claim whose clock ran ahead), the starts
 * counted in it, and its end or the end of the name's hold, if later.
 */
export const rateWindowOf = (l: NameLimits, row: RateNameRow | undefined, nowUs: number): RateWindowStatus | undefined => {
  const rate = l.rate ?? l.ratePerKey
  if (rate === undefined) return undefined
  const where = l.rate === undefined || row === undefined ? "earlier" : rowWindow(row.windowUs, nowUs, l.rate)
  const windowUs = where === "later" ? row!.windowUs : windowStartUs(nowUs, rate)
  const heldUs = row?.blockedUntilUs !== null && row?.blockedUntilUs !== undefined && row.blockedUntilUs > nowUs
    ? row.blockedUntilUs
    : undefined
  return {
    starts: l.rate === undefined ? undefined : where === "earlier" ? 0 : row!.starts,
    nextWindowAt: microsToDate(Math.max(windowUs + rate.perMs * 1000, heldUs ?? 0)),
    heldUntil: heldUs === undefined ? undefined : microsToDate(heldUs)
  }
}

/**
 * The limits of `names` (run-time rows over those the workers' definitions publish) with their
 * use now, and the rated names' windows at `nowUs`; names without limits are left out. `key`
 * compares names as the limits table does.
 */
export const ofNames = (
  driver: Driver,
  names: ReadonlyArray<string>,
  key: (name: string) => string,
  nowUs: number
): Effect.Effect<ReadonlyMap<string, NameLimitStatus>, SqlError> =>
  Effect.gen(function*() {
    const runTime = new Map((yield* driver.limitList()).map((r) => [key(r.name), r]))
    const published = yield* driver.workerJobLimits(0)
    const limited = new Map<string, NameLimits & { readonly setAtRunTime: boolean }>()
    for (const name of names) {
      const row = runTime.get(key(name))
      const defined = published.get(name)
      const l: NameLimits = {
        running: row?.running ?? defined?.running,
        runningPerKey: row?.runningPerKey ?? defined?.runningPerKey,
        rate: row?.rate ?? defined?.rate,
        ratePerKey: row?.ratePerKey ?? defined?.ratePerKey
      }
      if (Object.values(l).some((v) => v !== undefined)) limited.set(name, { ...l, setAtRunTime: row !== undefined })
    }
    if (limited.size === 0) return new Map()
    const use = new Map((yield* driver.limitUse(Array.from(limited.keys()))).map((u) => [u.name, u]))
    const rated = Array.from(limited).filter(([, l]) => l.rate !== undefined || l.ratePerKey !== undefined).map(([n]) => n)
    const windows = new Map((yield* driver.rateNameList(rated)).map((r) => [r.name, r]))
    return new Map(Array.from(limited, ([name, l]) => [name, {
      running: l.running,
      runningPerKey: l.runningPerKey,
      rate: l.rate,
      ratePerKey: l.ratePerKey,
      setAtRunTime: l.setAtRunTime,
      inUse: use.get(name)?.running ?? 0,
      keysInUse: use.get(name)?.keys ?? 0,
      rateWindow: rateWindowOf(l, windows.get(name), nowUs)
    }]))
  })

/** The limits `Admin.setLimits` takes (any other key is refused). */
const setLimitsOptions = ["running", "runningPerKey", "rate", "ratePerKey"] as const

/** What was typed, for a message: a bigint as written (`5n`), a string quoted. */
const typed = (u: unknown) =>
  typeof u === "bigint" ? `${u}n` : typeof u === "string" ? JSON.stringify(u.slice(0, 100)) : String(u)

/**
 * `Admin.setLimits`'s input as the driver's changes (a rate as `{ starts, perMs }`), or why it is
 * refused: a bad name, not an object, an unknown key, nothing given, a number that is not an
 * integer from 1 to `Job.maxLimit`, a rate `Job.make` would refuse (`checkRate`).
 */
export const changesOf = (name: string, limits: LimitChanges): LimitRowChanges | InvalidLimit => {
  // The names `Job.make` takes (no trailing space: MySQL/MariaDB would compare it equal to the name without).
  const nameProblem = checkJobName(name)
  if (nameProblem !== undefined) {
    return new InvalidLimit({
      name: String(name).slice(0, 300),
      option: "name",
      reason: typeof name === "string" && name.length > 0 && name.length <= 255 ? "characters" : "range",
      message: `a job name must be 1 to 255 UTF-16 code units without U+0000 or a trailing space; this one ${nameProblem}`
    })
  }
  if (typeof limits !== "object" || limits === null || Array.isArray(limits)) {
    return new InvalidLimit({
      name,
      option: "limits",
      reason: "type",
      message: `limits must be an object { running?, runningPerKey?, rate?, ratePerKey? }, got ${
        limits === null ? "null" : Array.isArray(limits) ? "an array" : typeof limits
      }`
    })
  }
  const unknown = unknownOption(limits, setLimitsOptions)
  if (unknown !== undefined) {
    return new InvalidLimit({
      name,
      option: "limits",
      reason: "type",
      message: `limits ${unknownOptionMessage(unknown, setLimitsOptions)}`
    })
  }
  if (setLimitsOptions.every((option) => limits[option] === undefined)) {
    return new InvalidLimit({
      name,
      option: "running",
      reason: "conflict",
      message: "give running, runningPerKey, rate or ratePerKey (a value sets it, null removes it)"
    })
  }
  for (const option of ["running", "runningPerKey"] as const) {
    const n = limits[option]
    if (n !== undefined && n !== null && !(Number.isInteger(n) && n >= 1 && n <= Job.maxLimit)) {
      return new InvalidLimit({
        name,
        option,
        reason: typeof n === "number" ? "range" : "type",
        message: `${option} must be an integer from 1 to ${Job.maxLimit} (or null to remove it), got ${typed(n)}`
      })
    }
  }
  const rates: { rate?: RateWindow | null; ratePerKey?: RateWindow | null } = {}
  for (const option of ["rate", "ratePerKey"] as const) {
    const rate: unknown = limits[option]
    if (rate === undefined || rate === null) {
      rates[option] = rate
      continue
    }
    const checked = checkRate(rate)
    if ("problem" in checked) {
      return new InvalidLimit({
        name,
        option,
        reason: checked.reason,
        message: `${option} (or null to remove it): ${checked.problem}`
      })
    }
    rates[option] = checked
  }
  return { running: limits.running, runningPerKey: limits.runningPerKey, ...rates }
}

/** A row of `<prefix>limits` as `Admin.setLimits` returns it (no row: nothing set at run time). */
export const runTimeLimits = (row: LimitRow | undefined): RunTimeLimits => ({
  running: row?.running ?? undefined,
  runningPerKey: row?.runningPerKey ?? undefined,
  rate: row?.rate ?? undefined,
  ratePerKey: row?.ratePerKey ?? undefined
})

/** `Admin.limits`: the run-time limits, with the slots their names' running attempts hold now. */
export const statuses = (driver: Driver): Effect.Effect<ReadonlyArray<LimitStatus>, SqlError> =>
  Effect.gen(function*() {
    const rows = yield* driver.limitList()
    const use = new Map((yield* driver.limitUse(rows.map((r) => r.name))).map((u) => [u.name, u]))
    return rows.map((r): LimitStatus => {
      const u = use.get(r.name)
      return {
        name: r.name,
        ...runTimeLimits(r),
        updatedAt: microsToDate(r.updatedAtUs),
        inUse: {
          running: u?.running ?? 0,
          runningKeyed: u?.runningKeyed ?? 0,
          keys: u?.keys ?? 0,
          busiestKey: u?.busiestKey,
          busiestKeyRunning: u?.busiestKeyRunning ?? 0
        }
      }
    })
  })

/** The limits of job definitions, by name, as a worker's claims apply them (no run-time rows). */
export const limitsOf = (jobs: ReadonlyArray<Job.Job.Any>): ReadonlyMap<string, NameLimits> => {
  const out = new Map<string, NameLimits>()
  for (const job of jobs) {
    const l = effective(job.limits as Job.Limits<never> | undefined, undefined)
    if (l !== undefined) out.set(job.name, l)
  }
  return out
}
