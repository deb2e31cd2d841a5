/**
 * The keyed claim's choice among locked candidates, where a driver makes it in the client
 * (MySQL/MariaDB): one job per mutex key, and a free slot of each concurrency limit a job is under.
 * PostgreSQL makes the same choice inside its claim statement (`driver/pg/jobs.ts`).
 *
 * @internal
 */
import type { Ahead, ClaimedRow, NameLimits } from "./rows.js"
import { byClaimOrder } from "./shared.js"

/** A locked candidate: the claimed row it would become, and its keys as the database compares them. */
export interface Candidate {
  readonly claimed: ClaimedRow
  readonly mutexKey: string | null
  readonly limitKey: string | null
  /**
   * With fair shares (`fairShares.ts`): the job's turn and its place in it ({@link Turn});
   * candidates are taken by priority, then turn, then place (`byTurns`).
   */
  readonly turn?: Turn | undefined
}

/**
 * A candidate's turn in a claim with fair shares: the turn (`rnd`: 1 for a key's first job); its
 * place among its group's jobs of that turn (`sub`: 1 for a plain name's job and for a fair name's
 * first key in its rotation); the group's age in that turn (`gatUs`: the oldest `run_at` of those
 * jobs); its key's place in the rotation (`ord`, 0: not rotated).
 */
export interface Turn {
  readonly rnd: number
  readonly sub: number
  readonly gatUs: number
  readonly ord: number
}

/**
 * Claim order, by turns where candidates have them (fair shares): in each turn every group's first
 * job, oldest group first, then every group's second (a fair name's next keys), and so on.
 */
const byTurns = (a: Candidate, b: Candidate) =>
  a.claimed.priority - b.claimed.priority ||
  (a.turn?.rnd ?? 0) - (b.turn?.rnd ?? 0) ||
  (a.turn?.sub ?? 0) - (b.turn?.sub ?? 0) ||
  (a.turn?.gatUs ?? 0) - (b.turn?.gatUs ?? 0) ||
  (a.turn?.ord ?? 0) - (b.turn?.ord ?? 0) ||
  byClaimOrder(a.claimed, b.claimed)

/** A slot held by a running attempt: of its name (`key` null) or of its concurrency key. */
export interface HeldSlot {
  readonly name: string
  readonly key: string | null
  readonly slot: number
}

/** A picked job and the slots it takes (null: none), and its concurrency key. */
export interface Picked extends ClaimedRow {
  readonly nameSlot: number | null
  readonly keySlot: number | null
  readonly limitKey: string | null
}

const keyOfSlot = (name: string, key: string | null) => (key === null ? name : `${name}\u0000${key}`)

/**
 * Picks up to `limit` of `candidates` in claim order: a job whose mutex key another picked job has
 * is left out; a job of a limited name takes the lowest slot below the limit of its name (and of its
 * key) that no running attempt (`held`) and no job picked before it holds, and is left out when
 * `admit` refuses it (its rate windows have no start left), when there is none or when the slots held are as many as the limit (after a limit was lowered, running
 * attempts may hold numbers above it). With `ahead`, at most `ahead.slots` picked jobs take a name
 * slot, and up to `ahead.waiting` jobs of names in `ahead.names` with none are picked without one
 * (they wait in the worker for a slot handed over).
 */
export const pickWithSlots = (
  candidates: ReadonlyArray<Candidate>,
  limit: number,
  limits: ReadonlyMap<string, NameLimits>,
  held: ReadonlyArray<HeldSlot>,
  /** Whether a job that has its slots may start (rate windows: it takes a start when so). */
  admit: (candidate: Candidate) => boolean = () => true,
  ahead?: Ahead
): Array<Picked> => {
  let slotted = 0
  let waiting = 0
  const taken = new Map<string, Set<number>>()
  const takenOf = (k: string) => {
    let set = taken.get(k)
    if (set === undefined) taken.set(k, set = new Set())
    return set
  }
  for (const h of held) takenOf(keyOfSlot(h.name, h.key)).add(h.slot)
  const lowestFree = (set: Set<number>, below: number) => {
    if (set.size >= below) return null
    for (let s = 0; s < below; s++) if (!set.has(s)) return s
    return null
  }
  const sorted = [...candidates].sort(byTurns)
  const mutexKeys = new Set<string>()
  const picked: Array<Picked> = []
  for (const c of sorted) {
    if (picked.length >= limit) break
    if (c.mutexKey !== null && mutexKeys.has(c.mutexKey)) continue
    const l = limits.get(c.claimed.name)
    let keySlot: number | null = null
    let keySet: Set<number> | undefined
    if (l?.runningPerKey !== undefined && c.limitKey !== null) {
      keySet = takenOf(keyOfSlot(c.claimed.name, c.limitKey))
      keySlot = lowestFree(keySet, l.runningPerKey)
      if (keySlot === null) continue
    }
    let nameSlot: number | null = null
    let nameSet: Set<number> | undefined
    if (l?.running !== undefined) {
      nameSet = takenOf(keyOfSlot(c.claimed.name, null))
      nameSlot = ahead !== undefined && slotted >= ahead.slots ? null : lowestFree(nameSet, l.running)
      if (nameSlot === null && (ahead?.names.has(c.claimed.name) !== true || waiting >= ahead.waiting)) continue
    }
    if (!admit(c)) continue
    if (c.mutexKey !== null) mutexKeys.add(c.mutexKey)
    if (keySlot !== null) keySet!.add(keySlot)
    if (nameSlot !== null) {
      nameSet!.add(nameSlot)
      slotted++
    } else if (l?.running !== undefined) waiting++
    picked.push({ ...c.claimed, nameSlot, keySlot, limitKey: c.limitKey })
  }
  return picked
}
