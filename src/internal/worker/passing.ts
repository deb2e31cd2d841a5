/**
 * Claiming ahead under concurrency limits. A worker claims jobs ahead of those it runs (`prefetch`)
 * only where a waiting job holds nothing another worker could use now: not while a name has mutex
 * keys or limits (a waiting job would hold its key, its limit slot or its rate window's start) —
 * except names limited by `running` alone, whose jobs wait without a slot for one an ended attempt
 * passes on (`nameSlots.ts`); a name with a concurrency key only (fair shares) holds nothing while
 * it waits.
 */
import type { Ahead, NameLimits } from "../driver/Driver.js"
import * as Limits from "../limits.js"
import type { Slots } from "./slots.js"

/**
 * Whether the slots of names limited by `running` alone pass from attempt to attempt in a worker
 * with these limits (and mutex keys or not), so that it may claim their jobs ahead.
 */
export const passes = (limits: ReadonlyMap<string, NameLimits>, mutexKeys: boolean): boolean => {
  const all = Array.from(limits.values())
  return !mutexKeys &&
    all.every((l) => !Limits.holdsWhileWaiting(l) || Limits.passesSlots(l)) &&
    // Fair shares' claims cap no slots: with a name whose slots pass, the worker claims none ahead.
    !(all.some((l) => l.fair === true) && all.some(Limits.passesSlots))
}

/**
 * What the next keyed claim may take ahead (`undefined`: nothing) in a worker whose slots pass:
 * jobs wait ahead for the slots held here as they would for as many slots of a worker without
 * limits (`Slots.targetFor`: what those slots run while one end is written). `withEnds`: the claim
 * is made with the write of ends, and takes again the slots those ends free — but not a slot left
 * to other workers by that write: it gives no more slots than the write's ends free less those left.
 */
export const ahead = (
  limits: ReadonlyMap<string, NameLimits>,
  slots: Slots,
  concurrency: number,
  prefetch: number,
  withEnds: boolean
): Ahead | undefined => {
  if (prefetch === 0 || !Array.from(limits.values()).some(Limits.passesSlots)) return undefined
  const names = new Set<string>()
  let held = 0
  let heldNow = 0
  for (const [name, l] of limits) {
    const n = slots.heldOf(name, withEnds)
    if (n > 0 && Limits.passesSlots(l)) {
      names.add(name)
      held += n
      heldNow += slots.heldOf(name, false)
    }
  }
  // While other workers want slots of a name, a claim gives this worker none above what it keeps
  // (`Slots.demanded`); a cap holds only when every name whose slots pass is capped.
  let capped = 0
  for (const [name, l] of limits) {
    if (!Limits.passesSlots(l)) continue
    const cap = slots.newSlotsOf(name)
    capped = cap === undefined ? Infinity : capped + cap
  }
  const left = withEnds ? slots.takeLeft() : 0
  const waiting = Math.max(0, slots.targetFor(Math.min(held, concurrency)) - slots.waiting())
  return {
    slots: Math.min(capped, left === 0 ? slots.open() : Math.max(0, Math.min(slots.open(), held - heldNow - left))),
    waiting,
    // With none to take ahead, the claim reads only jobs it may give a slot.
    names: waiting === 0 ? new Set<string>() : names
  }
}
