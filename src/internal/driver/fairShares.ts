/**
 * Fair shares by concurrency key: the keyed claim of a name with a concurrency key (`limits.key`)
 * takes its jobs round-robin across the keys with due jobs, one key after another from where its
 * last claim stopped, instead of in `run_at` order across the name. A tenant with 10 jobs behind
 * another tenant's 10,000 has its jobs started by the next claim, not after the backlog (as
 * pg-boss's groups and Hatchet's `GROUP_ROUND_ROBIN` do).
 *
 * The rotation of each (name, priority) is kept here, per process: the key after which the next
 * claim begins (the last key its last claim took a job of). Claims of other processes rotate on
 * their own; every claim still reads each key from its first due job, so no key waits for more than
 * one turn of the keys a claim reads.
 *
 * @internal
 */

/** A claimed job's place in its claim's rotation: its key, and the key's position (`ord`, 0: not rotated). */
export interface Rotated {
  readonly name: string
  readonly priority: number
  readonly key: string | null
  readonly ord: number
}

/** The first position of the keys read after wrapping around (those up to the cursor). */
export const wrapped = 2 ** 31

/** The rotations of a driver's claims: per (name, priority), the key the next claim begins after. */
export interface FairCursors {
  readonly after: (name: string, priority: number) => string | undefined
  /**
   * Moves each rotation to the last key (highest `ord`) its claim took a job of; returns the
   * rotations it moved (`groupId`).
   */
  readonly remember: (claimed: ReadonlyArray<Rotated>) => ReadonlySet<string>
}

/** A (name, priority) group's rotation, as `FairCursors.remember` names those it moved. */
export const groupId = (name: string, priority: number) => `${priority}\u0000${name}`

export const make = (): FairCursors => {
  const cursors = new Map<string, string>()
  const id = groupId
  return {
    after: (name, priority) => cursors.get(id(name, priority)),
    remember: (claimed) => {
      const last = new Map<string, Rotated>()
      for (const r of claimed) {
        if (r.ord <= 0 || r.key === null) continue
        const k = id(r.name, r.priority)
        const before = last.get(k)
        if (before === undefined || r.ord > before.ord) last.set(k, r)
      }
      // A bound on names × priorities a process claims; past it, rotations begin again.
      if (cursors.size + last.size > 10_000) cursors.clear()
      for (const [k, r] of last) cursors.set(k, r.key!)
      return new Set(last.keys())
    }
  }
}
