/**
 * The rate windows of a claim, alike on both databases: which windows a claim locks, how many
 * attempts each has left, what the claim holds back, and what it counts. Each driver owns the SQL
 * that locks and writes them (`driver/pg/rates.ts`, `driver/mysql/rates.ts`).
 *
 * A window is fixed: the multiple of its rate's period (µs since the epoch) at or before the claim's
 * `nowUs`. One row per (name, key) of `<prefix>rates` holds the window a claim last counted in and
 * its starts; key '' is the name's own row.
 *
 * @internal
 */
import type { Group, NameLimits, RateWindow } from "./rows.js"

/** The key of a name's own window row (a concurrency key is 1–255 characters, never ''). */
export const nameRow = ""

/** Whether a claim of `name` applies rate windows. */
export const isRated = (l: NameLimits | undefined): boolean => l?.rate !== undefined || l?.ratePerKey !== undefined

/** The rated names among `groups`, in order. */
export const ratedNames = (groups: ReadonlyArray<Group>, limits: ReadonlyMap<string, NameLimits>): Array<string> =>
  Array.from(new Set(groups.map((g) => g.name))).filter((n) => isRated(limits.get(n)))

/** The start (µs since the epoch) of the window of `rate` that holds `nowUs`. */
export const windowStartUs = (nowUs: number, rate: RateWindow): number => {
  const perUs = rate.perMs * 1000
  return Math.floor(nowUs / perUs) * perUs
}

/**
 * Where a window row that counts the window starting at `rowWindowUs` stands against the window of
 * `rate` that holds `nowUs`: `earlier` (its count is over: none started in this window yet),
 * `current` (its starts count in this window: the same window, or one that began within it under a
 * shorter period the rate had before a change), or `later` (a claim whose clock is behind another's:
 * none left until that window ends).
 */
export const rowWindow = (rowWindowUs: number, nowUs: number, rate: RateWindow): "earlier" | "current" | "later" => {
  const windowUs = windowStartUs(nowUs, rate)
  return rowWindowUs < windowUs ? "earlier" : rowWindowUs < windowUs + rate.perMs * 1000 ? "current" : "later"
}

/** A window row to lock: its name, key, and the window of the claim (0: no rate, never counted). */
export interface WindowWanted {
  readonly name: string
  readonly key: string
  readonly windowUs: number
}

/** A locked window row, as the claim's transaction read it. */
export interface WindowRow {
  readonly name: string
  readonly key: string
  readonly windowUs: number
  readonly starts: number
  readonly blockedUntilUs: number | null
  /** On a name's own row: the earliest end of a hold on one of its keys, after the claim's `nowUs`. */
  readonly keyBlockedUs?: number | null
}

const rateOf = (limits: ReadonlyMap<string, NameLimits>, name: string, key: string) =>
  key === nameRow ? limits.get(name)?.rate : limits.get(name)?.ratePerKey

/**
 * The rows to lock for a claim of the rated `names`, sorted (two claims lock shared rows in one
 * order, so they wait for each other, never in a cycle): each name's own row, and a row of each
 * concurrency key among `keys` (the keys of its candidates).
 */
export const windowsWanted = (
  names: ReadonlyArray<string>,
  keys: ReadonlyArray<{ readonly name: string; readonly key: string }>,
  limits: ReadonlyMap<string, NameLimits>,
  nowUs: number
): Array<WindowWanted> => {
  const seen = new Set<string>()
  const out: Array<WindowWanted> = []
  const add = (name: string, key: string) => {
    const id = `${name}\u0000${key}`
    if (seen.has(id)) return
    seen.add(id)
    const rate = rateOf(limits, name, key)
    out.push({ name, key, windowUs: rate === undefined ? 0 : windowStartUs(nowUs, rate) })
  }
  for (const name of names) add(name, nameRow)
  for (const k of keys) if (k.key !== nameRow && isRated(limits.get(k.name))) add(k.name, k.key)
  return out.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : a.key < b.key ? -1 : a.key > b.key ? 1 : 0))
}

/** The id of a window row in `Allowance.left`. */
export const windowId = (name: string, key: string) => `${name}\u0000${key}`

/** What the locked windows allow: starts left per window row, and what they hold back until when. */
export interface Allowance {
  /** Starts left per window row (`windowId`); a rated name's key without a row here has none left. */
  readonly left: Map<string, number>
  /** Names that may start nothing now, with the instant (µs) they may again. */
  readonly heldUntilUs: Map<string, number>
  /** Per key row with nothing left: the instant (µs) it may start again (and per name, its keys' earliest hold end). */
  readonly keyHeldUntilUs: Map<string, number>
}

/**
 * The starts each locked window allows at `nowUs`: none while it is held (`blocked_until_us`) or
 * when its row counts a window later than the claim's (a clock behind another process's); else
 * the rate's `starts` less those counted in this window (no rate: no cap). A row whose window began
 * within the claim's (its rate's period was made longer since) counts in it: the name does not wait
 * for a window of the new length to pass after the row's.
 */
export const allowance = (rows: ReadonlyArray<WindowRow>, limits: ReadonlyMap<string, NameLimits>, nowUs: number): Allowance => {
  const left = new Map<string, number>()
  const heldUntilUs = new Map<string, number>()
  const keyHeldUntilUs = new Map<string, number>()
  for (const r of rows) {
    const rate = rateOf(limits, r.name, r.key)
    let n = Number.MAX_SAFE_INTEGER
    let until: number | undefined
    if (r.blockedUntilUs !== null && r.blockedUntilUs > nowUs) {
      n = 0
      until = r.blockedUntilUs
    }
    if (rate !== undefined) {
      const windowUs = windowStartUs(nowUs, rate)
      const where = rowWindow(r.windowUs, nowUs, rate)
      const started = where === "current" ? r.starts : where === "later" ? rate.starts : 0
      const rateLeft = Math.max(0, rate.starts - started)
      if (rateLeft === 0) {
        const next = (where === "later" ? r.windowUs : windowUs) + rate.perMs * 1000
        until = Math.max(until ?? 0, next)
      }
      n = Math.min(n, rateLeft)
    }
    if (r.keyBlockedUs !== undefined && r.keyBlockedUs !== null) keyHeldUntilUs.set(`${r.name}\u0000\u0000`, r.keyBlockedUs)
    left.set(windowId(r.name, r.key), n)
    if (n === 0 && until !== undefined) {
      if (r.key === nameRow) heldUntilUs.set(r.name, until)
      else keyHeldUntilUs.set(windowId(r.name, r.key), until)
    }
  }
  return { left, heldUntilUs, keyHeldUntilUs }
}

/**
 * Whether a candidate of `name` (concurrency key `key`) may start within what is `left`, and if so
 * takes one start of each window it counts in. For the drivers that choose in the client.
 */
export const takeStart = (left: Map<string, number>, limits: ReadonlyMap<string, NameLimits>, name: string, key: string | null) => {
  if (!isRated(limits.get(name))) return true
  const own = left.get(windowId(name, nameRow)) ?? 0
  const ofKey = key === null ? Number.MAX_SAFE_INTEGER : left.get(windowId(name, key)) ?? 0
  if (own <= 0 || ofKey <= 0) return false
  left.set(windowId(name, nameRow), own - 1)
  if (key !== null) left.set(windowId(name, key), ofKey - 1)
  return true
}

/** The starts a claim adds to each window row with a rate: its claimed jobs, by name and by key. */
export const startsTaken = (
  claimed: ReadonlyArray<{ readonly name: string; readonly key: string | null }>,
  limits: ReadonlyMap<string, NameLimits>
): Array<{ readonly name: string; readonly key: string; readonly n: number }> => {
  const counts = new Map<string, { name: string; key: string; n: number }>()
  const add = (name: string, key: string) => {
    if (rateOf(limits, name, key) === undefined) return
    const id = windowId(name, key)
    const c = counts.get(id)
    if (c === undefined) counts.set(id, { name, key, n: 1 })
    else c.n++
  }
  for (const c of claimed) {
    if (!isRated(limits.get(c.name))) continue
    add(c.name, nameRow)
    if (c.key !== null) add(c.name, c.key)
  }
  return Array.from(counts.values())
}

/**
 * What a rated claim reports: the names held back (those whose windows left nothing before the
 * claim, and those the claim used up), and the earliest instant a key it left out may start again
 * (a held key, or the next window of a rated name's keys: at worst one claim too many per window);
 * `keyAdmitsUs` counts only the keys it knows were held back (held, or their window used up by it).
 */
export const heldAfter = (
  allowed: Allowance,
  taken: ReadonlyArray<{ readonly name: string; readonly key: string; readonly n: number }>,
  limits: ReadonlyMap<string, NameLimits>,
  nowUs: number,
  names: ReadonlyArray<string>
): { heldUntilUs: Map<string, number>; keyWakeUs: number | undefined; keyAdmitsUs: number | undefined } => {
  const heldUntilUs = new Map(allowed.heldUntilUs)
  let keyAdmitsUs: number | undefined
  for (const until of allowed.keyHeldUntilUs.values()) keyAdmitsUs = keyAdmitsUs === undefined ? until : Math.min(keyAdmitsUs, until)
  let keyWakeUs = keyAdmitsUs
  // Keys the claim's reads left out (their windows used up, as the reads saw them) are not among
  // the windows it locked; all keys of a name share their windows' bounds, so the next one of each
  // name with a per-key rate admits them again.
  for (const name of names) {
    const rate = limits.get(name)?.ratePerKey
    if (rate === undefined) continue
    const until = windowStartUs(nowUs, rate) + rate.perMs * 1000
    keyWakeUs = keyWakeUs === undefined ? until : Math.min(keyWakeUs, until)
  }
  for (const t of taken) {
    const rate = rateOf(limits, t.name, t.key)
    if (rate === undefined || (allowed.left.get(windowId(t.name, t.key)) ?? 0) > t.n) continue
    const until = windowStartUs(nowUs, rate) + rate.perMs * 1000
    if (t.key === nameRow) heldUntilUs.set(t.name, Math.max(heldUntilUs.get(t.name) ?? 0, until))
    else {
      keyWakeUs = keyWakeUs === undefined ? until : Math.min(keyWakeUs, until)
      keyAdmitsUs = keyAdmitsUs === undefined ? until : Math.min(keyAdmitsUs, until)
    }
  }
  return { heldUntilUs, keyWakeUs, keyAdmitsUs }
}

/**
 * The condition a key's rate window must meet for a claim to read past the key's jobs: held, used
 * up in the claim's window (a row whose window began within it: `rowWindow`'s `current`), or
 * counting a later window (at or after `endUs`). Each driver writes it as SQL over its
 * `<prefix>rates` row (`r`); given here as the numbers it compares.
 */
export const keyRateBounds = (limits: ReadonlyMap<string, NameLimits>, name: string, nowUs: number) => {
  const rate = limits.get(name)?.ratePerKey
  if (rate === undefined) return undefined
  const windowUs = windowStartUs(nowUs, rate)
  return { windowUs, endUs: windowUs + rate.perMs * 1000, starts: rate.starts }
}
