/**
 * The control plane: cancellations, changes of the paused job names and of the concurrency
 * limits set at run time, and workers' demands for slots of a limit, apart from wake-ups. In
 * this process they reach every listener on the same database and table prefix at once; between
 * processes they travel as messages of their own (`cancelMessage`, `pausesMessage`, `limitsMessage`,
 * `demandMessage`) where the database delivers messages (PostgreSQL `NOTIFY`); otherwise
 * cancellations, pauses and limits are found by the workers' own passes (the rescuer, the paused
 * names' and the limits' re-reads), and demands do not leave their process.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import { globalValue } from "effect/GlobalValue"
import type * as Scope from "effect/Scope"
import type { SlotDemand } from "../../services/Notifier.js"

type CancelListener = (ids: ReadonlyArray<string>) => void
type PauseListener = (paused: string | undefined) => void
type LimitsListener = () => void
type DemandListener = (demand: SlotDemand) => void


/** Cancellation listeners of this process, by database and table prefix. */
const localCancelListeners = globalValue(
  Symbol.for("sqlane/Notifier/localCancelListeners"),
  () => new Map<string, Set<CancelListener>>()
)
/** Listeners for changes of the paused job names in this process, by database and table prefix. */
const localPauseListeners = globalValue(
  Symbol.for("sqlane/Notifier/localPauseListeners"),
  () => new Map<string, Set<PauseListener>>()
)

/** Listeners for changes of the run-time concurrency limits in this process, by database and table prefix. */
const localLimitsListeners = globalValue(
  Symbol.for("sqlane/Notifier/localLimitsListeners"),
  () => new Map<string, Set<LimitsListener>>()
)

/** Listeners for demands for slots, in this process, by database and table prefix. */
const localDemandListeners = globalValue(
  Symbol.for("sqlane/Notifier/localDemandListeners"),
  () => new Map<string, Set<DemandListener>>()
)

const CANCEL = "cancel:"
const WANTS = "wants:"

/** The message that tells other processes a worker wants slots of a limit. */
export const demandMessage = (demand: SlotDemand): string =>
  WANTS + JSON.stringify([demand.name, demand.held, demand.worker, demand.instance, demand.seq])

const decodeDemand = (payload: string): SlotDemand | undefined => {
  try {
    const parsed = JSON.parse(payload)
    if (!Array.isArray(parsed) || parsed.length !== 5) return undefined
    const [name, held, worker, instance, seq] = parsed
    return typeof name === "string" && Number.isSafeInteger(held) && typeof worker === "string" &&
        typeof instance === "string" && Number.isSafeInteger(seq)
      ? { name, held, worker, instance, seq }
      : undefined
  } catch {
    return undefined
  }
}

/** The message that tells other processes these jobs were cancelled. */
export const cancelMessage = (ids: ReadonlyArray<string>): string => CANCEL + JSON.stringify(ids)

/** The message that tells other processes the paused job names changed. */
export const pausesMessage = "pauses"

/** The message that tells other processes the run-time concurrency limits changed. */
export const limitsMessage = "limits"

const decodeIds = (payload: string): ReadonlyArray<string> | undefined => {
  try {
    const parsed = JSON.parse(payload)
    return Array.isArray(parsed) ? parsed.filter((n): n is string => typeof n === "string") : undefined
  } catch {
    return undefined
  }
}

export interface Control {
  /** Tells this process's listeners that these jobs were cancelled. */
  readonly cancelled: (ids: ReadonlyArray<string>) => void
  /** Tells this process's listeners that the paused names changed (`paused`: a name just paused here). */
  readonly pausesChanged: (paused?: string) => void
  /** Tells this process's listeners that the run-time concurrency limits changed. */
  readonly limitsChanged: () => void
  /** Tells this process's listeners that a worker wants slots. */
  readonly wantsSlots: (demand: SlotDemand) => void
  /** Calls `onDemand` with every demand for slots heard, for the life of the scope. */
  readonly onWantsSlots: (onDemand: DemandListener) => Effect.Effect<void, never, Scope.Scope>
  /** Calls `onChange` whenever the run-time concurrency limits may have changed, for the life of the scope. */
  readonly onLimitsChanged: (onChange: LimitsListener) => Effect.Effect<void, never, Scope.Scope>
  /** Calls `onCancel` with the ids of cancelled jobs, for the life of the scope. */
  readonly onCancel: (onCancel: CancelListener) => Effect.Effect<void, never, Scope.Scope>
  /** Calls `onChange` whenever the paused names may have changed, for the life of the scope. */
  readonly onPausesChanged: (onChange: PauseListener) => Effect.Effect<void, never, Scope.Scope>
  /**
   * Delivers a message heard from another process when it is a control message; returns whether it
   * was one (otherwise it is a wake-up).
   */
  readonly receive: (message: string) => boolean
}

const listening = <L>(listeners: Set<L>, listener: L): Effect.Effect<void, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.sync(() => void listeners.add(listener)),
    () => Effect.sync(() => void listeners.delete(listener))
  )

/** The control plane of one queue instance; `key` names its database and table prefix. */
export const make = (key: string): Control => {
  const cancelListeners = localCancelListeners.get(key) ?? new Set<CancelListener>()
  localCancelListeners.set(key, cancelListeners)
  const pauseListeners = localPauseListeners.get(key) ?? new Set<PauseListener>()
  localPauseListeners.set(key, pauseListeners)
  const limitsListeners = localLimitsListeners.get(key) ?? new Set<LimitsListener>()
  localLimitsListeners.set(key, limitsListeners)
  const demandListeners = localDemandListeners.get(key) ?? new Set<DemandListener>()
  localDemandListeners.set(key, demandListeners)
  const wantsSlots = (demand: SlotDemand) => {
    for (const listener of demandListeners) listener(demand)
  }
  const limitsChanged = () => {
    for (const listener of limitsListeners) listener()
  }
  const cancelled = (ids: ReadonlyArray<string>) => {
    for (const listener of cancelListeners) listener(ids)
  }
  const pausesChanged = (paused?: string) => {
    for (const listener of pauseListeners) listener(paused)
  }
  return {
    cancelled,
    pausesChanged,
    limitsChanged,
    wantsSlots,
    onWantsSlots: (onDemand) => listening(demandListeners, onDemand),
    onLimitsChanged: (onChange) => listening(limitsListeners, onChange),
    onCancel: (onCancel) => listening(cancelListeners, onCancel),
    onPausesChanged: (onChange) => listening(pauseListeners, onChange),
    receive: (message) => {
      if (message === pausesMessage) {
        pausesChanged()
        return true
      }
      if (message === limitsMessage) {
        limitsChanged()
        return true
      }
      if (message.startsWith(WANTS)) {
        const demand = decodeDemand(message.slice(WANTS.length))
        if (demand !== undefined) wantsSlots(demand)
        return true
      }
      if (message.startsWith(CANCEL)) {
        const ids = decodeIds(message.slice(CANCEL.length))
        if (Array.isArray(ids)) cancelled(ids)
        return true
      }
      return false
    }
  }
}
