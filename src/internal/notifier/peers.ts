/**
 * How a Notifier reaches the workers of other processes on the same database, and hears of theirs:
 * one implementation per kind of database, chosen when the Notifier is built by the driver's
 * `capabilities.listenNotify` — PostgreSQL `LISTEN/NOTIFY` with its limiter (`pgListen.ts`), or the
 * MySQL/MariaDB insert check (`insertCheck.ts`), which hears and sends nothing else.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import type { Enqueued, SlotDemand } from "../../services/Notifier.js"

export interface Peers {
  /**
   * The payload of the `NOTIFY` an enqueue statement sends, or `undefined` when it sends none (the
   * database has no `NOTIFY`, or the limiter holds it back). A plain call: the enqueue's hot path.
   */
  readonly notifyPayload: (entries: ReadonlyArray<Enqueued>) => string | undefined
  /**
   * Entries written without a `NOTIFY` of their own: other processes are told later, no earlier than
   * `afterMillis` from now (after a caller's commit). A plain call: the enqueue's hot path.
   */
  readonly later: (entries: ReadonlyArray<Enqueued>, afterMillis: number) => void
  /** Tells other processes now that jobs of these entries are due (best effort; never fails). */
  readonly wake: (entries: ReadonlyArray<Enqueued>) => Effect.Effect<void>
  /** Tells other processes that these jobs were cancelled (best effort; never fails). */
  readonly cancelled: (ids: ReadonlyArray<string>) => Effect.Effect<void>
  /** Tells other processes that the paused job names changed (best effort; never fails). */
  readonly pausesChanged: Effect.Effect<void>
  /** Tells other processes that the run-time concurrency limits changed (best effort; never fails). */
  readonly limitsChanged: Effect.Effect<void>
  /** Tells other processes that a worker wants slots of a limit (best effort; never fails). */
  readonly wantsSlots: (demand: SlotDemand) => Effect.Effect<void>
  /** Starts hearing other processes (the first subscriber runs it; later runs do nothing). */
  readonly start: Effect.Effect<void>
  /** Completes once this instance hears other processes. */
  readonly ready: Effect.Effect<void>
}

/** What sends nothing: for a database that carries no messages between sessions. */
export const silent: Omit<Peers, "start"> = {
  notifyPayload: () => undefined,
  later: () => {},
  wake: () => Effect.void,
  cancelled: () => Effect.void,
  pausesChanged: Effect.void,
  limitsChanged: Effect.void,
  wantsSlots: () => Effect.void,
  ready: Effect.void
}
