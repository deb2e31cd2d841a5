/**
 * Demands for slots (`Notifier.SlotDemand`) between workers under a concurrency limit whose slots
 * pass from attempt to attempt (`nameSlots.ts`).
 *
 * A worker with room whose claim of such a name came back short while jobs of it were left (the
 * claim came right after a probe found them due, or it brought some that wait for a slot) asks the
 * workers that hold more of the limit's slots to leave it some: to its process's workers at once,
 * to other processes by `NOTIFY` on PostgreSQL. At most one demand per name every `demandEveryMs`,
 * twice as long after each that did not raise this worker's slots (up to `maxDemandEveryMs`); none
 * once it holds half the limit, none while it stops. A worker that hears a demand and keeps more
 * slots than the demander leaves some as its attempts end (`Slots.demanded`) — where its claims can
 * be capped: one name whose slots pass, and jobs claimed ahead.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type { ClaimedRow, Group, NameLimits } from "../driver/Driver.js"
import * as Limits from "../limits.js"
import type * as Pauses from "../pauses.js"
import { Notifier } from "../../services/Notifier.js"
import type { Slots } from "./slots.js"

/**
 * The least time between two demands for slots of one name by one worker (wall clock, ms),
 * doubled after each demand that did not raise its slots, up to `maxDemandEveryMs`.
 */
export const demandEveryMs = 50
export const maxDemandEveryMs = 1600

/** What demands need of their worker. */
export interface DemandsHost {
  readonly workerId: string
  readonly slots: Slots
  readonly paused: Pauses.PausedView
  /** The limits of the worker's names now. */
  readonly limits: () => ReadonlyMap<string, NameLimits>
  /** Whether the worker claims jobs ahead now, its limited names' slots passing (`Passing.passes`, `prefetch` above 0). */
  readonly claimsAhead: () => boolean
  /** Whether the worker still claims: not stopping, its id not taken by another worker. */
  readonly claiming: () => boolean
}

/**
 * Listens to other workers' demands for as long as the scope lasts; gives what the claim loop calls
 * when a claim came back short (`LoopHost.claimedShort`): it sends this worker's demands.
 */
export const make = (
  host: DemandsHost
): Effect.Effect<
  (groups: ReadonlyArray<Group>, rows: ReadonlyArray<ClaimedRow>, probed: boolean) => void,
  never,
  Notifier | Scope.Scope
> =>
  Effect.gen(function*() {
    const notifier = yield* Notifier
    const { slots, workerId } = host
    /** Tells this worker's demands from those of an earlier worker of the same id. */
    const instance = Math.random().toString(36).slice(2, 10)
    let seq = 0
    const demandedOf = new Map<string, { atMs: number; held: number; everyMs: number }>()
    /** The last demand heard from each other worker (its instance and count): one heard twice (in this process and by `NOTIFY`) counts once. */
    const heard = new Map<string, readonly [instance: string, seq: number]>()
    /** Demands are acted on where claims can be capped: one name whose slots pass, jobs claimed ahead. */
    const actsOnDemands = () => host.claimsAhead() && Array.from(host.limits().values()).filter(Limits.passesSlots).length === 1
    yield* notifier.onWantsSlots((demand) => {
      if (demand.worker === workerId) return
      const last = heard.get(demand.worker)
      if (last !== undefined && last[0] === demand.instance && last[1] >= demand.seq) return
      if (heard.size >= 1000) heard.clear()
      heard.set(demand.worker, [demand.instance, demand.seq])
      if (actsOnDemands()) slots.demanded(demand.name, demand.held)
    })
    return (groups, rows, probed) => {
      if (!host.claiming() || !host.claimsAhead() || slots.active() >= slots.concurrency) return
      const nowMs = performance.now()
      const limits = host.limits()
      for (const { name } of host.paused.claimableGroups(groups)) {
        const limit = limits.get(name)
        if (limit === undefined || !Limits.passesSlots(limit)) continue
        if (!probed && !rows.some((r) => r.name === name && (r.nameSlot === null || r.nameSlot === undefined))) continue
        const heldHere = slots.keeps(name)
        // No other worker can hold two more than this one: none would leave a slot.
        if (2 * heldHere + 2 > limit.running!) continue
        const last = demandedOf.get(name)
        if (last !== undefined && nowMs - last.atMs < last.everyMs) continue
        const everyMs = last === undefined || heldHere > last.held ? demandEveryMs : Math.min(maxDemandEveryMs, 2 * last.everyMs)
        demandedOf.set(name, { atMs: nowMs, held: heldHere, everyMs })
        Effect.runFork(notifier.wantsSlots({ name, held: heldHere, worker: workerId, instance, seq: ++seq }))
      }
    }
  })
