/**
 * The ticks of a periodic job's cron across daylight-saving changes. Effect's `Cron` parses and
 * matches the expression; this module corrects its stepping where a zone's clock goes back.
 *
 * At a fall-back (a zone's offset decreases, e.g. 02:00 PDT → 01:00 PST) an hour of wall time
 * happens twice. `Cron.next` (effect 3.x) returns only the first of the two, and from an instant
 * inside the second it steps backwards into the first. The rule here is classic cron's (Vixie
 * cron, cronie: "wildcard" jobs run by elapsed time, fixed-time jobs run once):
 *
 * - a cron whose hour field is a wildcard or a step (`*`, `*∕2`: see {@link wildHours}) fires
 *   through both copies of the repeated hour, e.g. `* * * * *` every real minute of them;
 * - a cron at fixed hours (`30 1 * * *`) fires at the first copy only: once that day.
 *
 * At a spring-forward (the offset increases, wall time skips ahead) a wall time that does not exist
 * is read in the offset before the gap (JavaScript's / Temporal's "compatible" disambiguation), each
 * one once: `30 2 * * *` in America/Los_Angeles fires at 03:30 PDT (10:30 UTC) on the day of the
 * change, `*∕20 2 * * *` at 10:00, 10:20 and 10:40 UTC (`Cron.next` gives the first of those only);
 * cronie runs such jobs at 03:00 PDT, right after the jump.
 *
 * @internal
 */
import * as Cron from "effect/Cron"
import * as DateTime from "effect/DateTime"
import * as Option from "effect/Option"

/** How far back (ms) an instant is checked for being inside a repeated hour: offsets drop by at most 3 h. */
const lookBack = 3 * 60 * 60 * 1000
/** Offsets are sampled this far apart (ms) to find a change: zones change at most once a day. */
const sampleStep = 24 * 60 * 60 * 1000

/** The zone the cron is read in: its own, or (as `Cron` does) the process's local zone. */
const zoneOf = (cron: Cron.Cron): DateTime.TimeZone => Option.getOrElse(cron.tz, () => DateTime.zoneMakeLocal())

const offsetAt = (zone: DateTime.TimeZone, ms: number): number =>
  DateTime.zonedOffset(DateTime.unsafeMakeZoned(ms, { timeZone: zone }))

/**
 * The second copy of a repeated stretch of wall time: `[start, end)` in UTC ms, `start` the
 * instant the offset fell from `offsetBefore` to `offsetAfter` (ms east of UTC), and `end` =
 * `start + offsetBefore - offsetAfter`. Its first copy is `[start - (end - start), start)`.
 */
export interface Repeat {
  readonly start: number
  readonly end: number
  readonly offsetAfter: number
}

/**
 * The fall-backs of `zone` whose instant lies in `(fromMs, toMs]`, in order: the offset is sampled
 * once a day (and at both ends) and a drop is searched down to the millisecond.
 *
 * @example
 * ```ts
 * fallBacks(DateTime.zoneUnsafeMakeNamed("America/Los_Angeles"), Date.parse("2026-10-31T00:00Z"),
 *   Date.parse("2026-11-02T00:00Z"))
 * // [{ start: Date.parse("2026-11-01T09:00Z"), end: Date.parse("2026-11-01T10:00Z"), offsetAfter: -8 * 3600_000 }]
 * ```
 */
export const fallBacks = (zone: DateTime.TimeZone, fromMs: number, toMs: number): ReadonlyArray<Repeat> =>
  changes(zone, fromMs, toMs).filter((c) => c.after < c.before).map((c) => ({
    start: c.at,
    end: c.at + (c.before - c.after),
    offsetAfter: c.after
  }))

/**
 * A skipped stretch of wall time (the offset rose from `offsetBefore`): the instants `[start, end)`
 * at which its wall times, read in `offsetBefore`, fall. `start` is the instant of the change.
 */
export interface Gap {
  readonly start: number
  readonly end: number
  readonly offsetBefore: number
}

/** The spring-forwards of `zone` whose instant lies in `(fromMs, toMs]`, in order (as {@link fallBacks}). */
export const springForwards = (zone: DateTime.TimeZone, fromMs: number, toMs: number): ReadonlyArray<Gap> =>
  changes(zone, fromMs, toMs).filter((c) => c.after > c.before).map((c) => ({
    start: c.at,
    end: c.at + (c.after - c.before),
    offsetBefore: c.before
  }))

/**
 * The offset changes of `zone` in `(fromMs, toMs]`: the offset is sampled once a day (and at both
 * ends) and a change is searched down to the millisecond (`at`: the first instant of the new offset).
 */
const changes = (
  zone: DateTime.TimeZone,
  fromMs: number,
  toMs: number
): ReadonlyArray<{ readonly at: number; readonly before: number; readonly after: number }> => {
  if (DateTime.isTimeZoneOffset(zone) || zone.id === "UTC" || toMs <= fromMs) return []
  const out: Array<{ at: number; before: number; after: number }> = []
  let a = fromMs
  let offsetA = offsetAt(zone, a)
  while (a < toMs) {
    const b = Math.min(a + sampleStep, toMs)
    const offsetB = offsetAt(zone, b)
    if (offsetB !== offsetA) {
      // The first instant in (a, b] with the later offset.
      let lo = a
      let hi = b
      while (hi - lo > 1) {
        const mid = Math.floor((lo + hi) / 2)
        if (offsetAt(zone, mid) === offsetB) hi = mid
        else lo = mid
      }
      out.push({ at: hi, before: offsetA, after: offsetB })
    }
    a = b
    offsetA = offsetB
  }
  return out
}

/**
 * Whether the cron's hour field is a wildcard or a step: its parsed hours are empty (`*`), or
 * `{0, s, 2s, …}` up to 23 as `*∕s` parses (`0-23` and `*∕1` are all 24 hours). Decided from the
 * parsed set, so a list spelling the same hours (`0,12`) counts as the step (`*∕12`).
 * Classic cron's flag (cronie's `HR_STAR`) is the field's text starting with `*`.
 */
export const wildHours = (cron: Cron.Cron): boolean => {
  const hours = Array.from(cron.hours).sort((a, b) => a - b)
  if (hours.length === 0) return true
  if (hours.length < 2 || hours[0] !== 0) return false
  const step = hours[1]
  return hours.every((h, i) => h === i * step) && hours[hours.length - 1] + step > 23
}

/** The same cron read at a fixed offset: the wall time of a repeated hour's second copy. */
const atOffset = (cron: Cron.Cron, offset: number): Cron.Cron =>
  Cron.make({
    seconds: cron.seconds,
    minutes: cron.minutes,
    hours: cron.hours,
    days: cron.days,
    months: cron.months,
    weekdays: cron.weekdays,
    // `and` (day and weekday both required) is marked internal in effect's types, set by `Cron.parse`.
    and: (cron as unknown as { readonly and?: boolean }).and,
    tz: DateTime.zoneMakeOffset(offset)
  })

/**
 * The first tick of `cron` strictly after `after`, in its time zone, with the fall-back rule of
 * classic cron (see the module's description): `Cron.next`, plus the matching instants of a
 * repeated hour's second copy for a cron with wildcard or step hours, minus them for one at fixed
 * hours. Ticks are whole seconds, as `Cron.next` gives them. Pure: the same answer for the same
 * arguments. Throws as `Cron.next` does when no tick is found.
 *
 * Source: cronie's `cron.c` (time moved backward: only wildcard jobs run; fixed-time jobs already
 * ran) and Vixie cron 3.0's, where the rule comes from.
 *
 * @example
 * ```ts
 * const la = Cron.unsafeParse("0 * * * *", "America/Los_Angeles")
 * nextTick(la, new Date("2026-11-01T08:00:00Z")) // 2026-11-01T09:00:00Z: the second 01:00 (PST)
 * // Cron.next(la, …) gives 10:00Z, skipping it
 * const once = Cron.unsafeParse("30 1 * * *", "America/Los_Angeles")
 * nextTick(once, new Date("2026-11-01T08:30:00Z")) // 2026-11-02T09:30:00Z: not 09:30Z that day
 * ```
 */
export const nextTick = (cron: Cron.Cron, after: Date): Date => {
  const zone = zoneOf(cron)
  const wild = wildHours(cron)
  let cursor = after.getTime()
  for (let i = 0; i < 1000; i++) {
    const inside = fallBacks(zone, cursor - lookBack, cursor).find((r) => r.start <= cursor && cursor < r.end)
    if (inside !== undefined) {
      if (wild) {
        const candidate = Cron.next(atOffset(cron, inside.offsetAfter), new Date(cursor))
        if (candidate.getTime() < inside.end) return candidate
      }
      // Leave the second copy: `Cron.next` reads the wall time just before its end, and the wall
      // times after it are not repeated.
      cursor = inside.end - 1
    }
    const next = Cron.next(cron, new Date(cursor))
    if (next.getTime() <= after.getTime()) throw new Error(`sqlane: Cron.next went back from ${after.toISOString()}`)
    // Wall times in a skipped stretch, read in the offset before it: `Cron.next` gives the first only.
    for (const gap of springForwards(zone, cursor - lookBack, next.getTime())) {
      if (gap.end <= cursor) continue
      const candidate = Cron.next(atOffset(cron, gap.offsetBefore), new Date(Math.max(cursor, gap.start - 1)))
      if (candidate.getTime() < Math.min(gap.end, next.getTime())) return candidate
    }
    let skipTo: number | undefined
    for (const repeat of fallBacks(zone, cursor, next.getTime())) {
      if (wild) {
        const candidate = Cron.next(atOffset(cron, repeat.offsetAfter), new Date(repeat.start - 1))
        if (candidate.getTime() < Math.min(repeat.end, next.getTime())) return candidate
      } else if (repeat.start <= next.getTime() && next.getTime() < repeat.end) {
        // A fixed-hour tick in the second copy: its wall time already fired in the first.
        skipTo = repeat.end - 1
        break
      }
    }
    if (skipTo === undefined) return next
    cursor = skipTo
  }
  throw new Error("sqlane: unable to find the next cron tick")
}

/**
 * The latest tick at or before `nowMs` (`undefined`: none found), `lastUs` (µs) the latest tick
 * enqueued: for a scheduler that starts after ticks were missed.
 *
 * `Cron.prev` is strictly before its start, in whole seconds, and (effect 3.x) throws "Unable to
 * find next cron date" for about a day after a DST gap when the expression's time falls in the
 * skipped hour (e.g. `30 2 * * *` in Europe/Berlin); then the ticks are walked forward from the
 * last one enqueued. Near a fall-back `Cron.prev` does not follow {@link nextTick} (it reads a
 * repeated wall time as its second copy, or jumps an hour back), nor near a spring-forward (it finds
 * at most one of the skipped wall times), so there the ticks are walked forward with `nextTick` from
 * before the change.
 *
 * @internal
 */
export const latestTick = (cron: Cron.Cron, nowMs: number, lastUs: number): Date | undefined => {
  const estimate = prevTick(cron, nowMs, lastUs)
  const from = Math.min(estimate?.getTime() ?? nowMs, nowMs) - 2 * lookBack
  const zone = zoneOf(cron)
  // Where the clock changes, `Cron.prev` and `nextTick` may disagree: the first copy of a repeated
  // hour, and a skipped stretch's wall times (which `Cron.prev` finds one of at most).
  const starts = [
    ...fallBacks(zone, from, nowMs + lookBack).map((r) => r.start - (r.end - r.start)),
    ...springForwards(zone, from, nowMs + lookBack).map((g) => g.start)
  ]
  if (starts.length === 0) return estimate
  // Before the earliest of them they agree.
  const before = Math.min(...starts) - 1
  if (before >= nowMs) return estimate
  let latest = prevTick(cron, before, lastUs)
  let cursor = latest ?? new Date(before)
  for (let i = 0; i < 100_000; i++) {
    const next = nextTick(cron, cursor)
    if (next.getTime() > nowMs) return latest
    latest = cursor = next
  }
  return latest
}

/** The latest instant at or before `nowMs` matching the cron, by `Cron.prev`. */
const prevTick = (cron: Cron.Cron, nowMs: number, lastUs: number): Date | undefined => {
  try {
    let latest = Cron.prev(cron, new Date(nowMs + 1000))
    while (latest.getTime() > nowMs) latest = Cron.prev(cron, latest)
    return latest
  } catch {
    let latest: Date | undefined
    let cursor = new Date(Math.floor(lastUs / 1000))
    for (let i = 0; i < 100_000; i++) {
      const next = Cron.next(cron, cursor)
      if (next.getTime() > nowMs) return latest
      latest = cursor = next
    }
    return latest
  }
}
