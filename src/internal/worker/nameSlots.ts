/**
 * The slots of concurrency limits a worker holds, for names limited by `running` alone, and their
 * passing from one attempt to the next without a write in between.
 *
 * A claim writes a free slot number into the row of each job it starts (`ClaimedRow.nameSlot`),
 * and may take further jobs of such a name without one, to wait in the worker (`Ahead`). When an
 * attempt that holds a slot ends and such a job waits, the job starts at once in that slot: the
 * end names it (`Finish.handTo`), and the write of the end passes the slot in the database in the
 * same transaction (the ended row stops holding it, the waiting job's row takes it). In between,
 * the database still shows the ended attempt's row holding the slot, so no other worker can take
 * it, and this worker runs one attempt in it at a time.
 *
 * The slot passes only if the write of the end finds the ended attempt still holding it (it was
 * not cancelled or rescued meanwhile). When it does not, whoever runs in that slot here now runs
 * without one, and is stopped (`lost`); so is the holder of a slot number a claim of this worker
 * got afresh (the database took it for free). A passing reported lost stops only an attempt that
 * runs in the slot as it was passed, never one in a slot of the same number a later claim gave.
 *
 * @internal
 */
import type { ClaimedRow } from "../driver/Driver.js"

/** Where an ended attempt's slot passes (`Finish.handTo`). */
export interface HandTo {
  readonly id: string
  readonly attempt: number
  readonly slot: number
}

/** A slot held here (one object per claim that gave it): its name and number, the attempt running in it. */
interface Held {
  readonly name: string
  readonly slot: number
  holder: ClaimedRow | undefined
}

export interface NameSlots {
  /**
   * A claimed job that took a slot (`nameSlot`) holds it from now. Returns the attempt that ran in
   * a slot of that number until now, if any: its slot was lost (stop it).
   */
  readonly claimed: (row: ClaimedRow) => ClaimedRow | undefined
  /** The slot an attempt holds here, if any. */
  readonly of: (row: ClaimedRow) => { readonly name: string; readonly slot: number } | undefined
  /** The attempt `from` ended: its slot passes to `to` (which starts in it now). */
  readonly pass: (from: ClaimedRow, to: ClaimedRow) => HandTo
  /** The attempt `row` ended without passing its slot: the slot is free once its end is written. */
  readonly free: (row: ClaimedRow) => void
  /**
   * The write of `giver`'s end did not pass its slot: returns the attempt running in that slot
   * now, if the slot is still the one `giver` passed (stop it); the slot is no longer held here.
   */
  readonly lost: (giver: ClaimedRow) => ClaimedRow | undefined
  /** `row`'s end was written: what it passed or freed is settled. */
  readonly settled: (row: ClaimedRow) => void
  /**
   * How many slots of `name` are held here; with `freeing`, also those that ends not yet written
   * freed (a claim made with the write of those ends takes them again).
   */
  readonly heldOf: (name: string, freeing: boolean) => number
}

export const make = (): NameSlots => {
  /** By name and number. */
  const held = new Map<string, Held>()
  /** The slot each attempt running here holds. */
  const byRow = new Map<ClaimedRow, Held>()
  /** Ends that passed a slot and are not written yet: the slot they passed. */
  const passing = new Map<ClaimedRow, Held>()
  /** Per name, the slots held here and those freed by ends not yet written (and those alone). */
  const counts = new Map<string, number>()
  const freeingCounts = new Map<string, number>()
  /** Ends that freed a slot and are not written yet, by their name. */
  const freeing = new Map<ClaimedRow, string>()
  const keyOf = (name: string, slot: number) => `${slot}\u0000${name}`
  const uncount = (name: string) => counts.set(name, (counts.get(name) ?? 1) - 1)
  /** The slot is no longer held here; `by`: the end that freed it, counted until it is written. */
  const drop = (h: Held, by?: ClaimedRow) => {
    if (held.get(keyOf(h.name, h.slot)) !== h) return
    held.delete(keyOf(h.name, h.slot))
    if (by === undefined) uncount(h.name)
    else {
      freeing.set(by, h.name)
      freeingCounts.set(h.name, (freeingCounts.get(h.name) ?? 0) + 1)
    }
    if (h.holder !== undefined) byRow.delete(h.holder)
    h.holder = undefined
  }
  return {
    claimed: (row) => {
      if (row.nameSlot === undefined || row.nameSlot === null) return undefined
      const key = keyOf(row.name, row.nameSlot)
      const before = held.get(key)
      const lostHolder = before?.holder
      if (before !== undefined) drop(before)
      const h: Held = { name: row.name, slot: row.nameSlot, holder: row }
      held.set(key, h)
      byRow.set(row, h)
      counts.set(row.name, (counts.get(row.name) ?? 0) + 1)
      return lostHolder
    },
    of: (row) => byRow.get(row),
    pass: (from, to) => {
      const h = byRow.get(from)!
      byRow.delete(from)
      h.holder = to
      byRow.set(to, h)
      passing.set(from, h)
      return { id: to.id, attempt: to.attempts, slot: h.slot }
    },
    free: (row) => {
      const h = byRow.get(row)
      if (h !== undefined) drop(h, row)
    },
    lost: (giver) => {
      const h = passing.get(giver)
      passing.delete(giver)
      if (h === undefined || held.get(keyOf(h.name, h.slot)) !== h) return undefined
      const holder = h.holder
      drop(h)
      return holder
    },
    settled: (row) => {
      passing.delete(row)
      const name = freeing.get(row)
      if (name !== undefined) {
        freeing.delete(row)
        uncount(name)
        freeingCounts.set(name, (freeingCounts.get(name) ?? 1) - 1)
      }
    },
    heldOf: (name, withFreeing) => (counts.get(name) ?? 0) - (withFreeing ? 0 : freeingCounts.get(name) ?? 0)
  }
}
