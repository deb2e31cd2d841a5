/**
 * The facts of the claim path that others observe, told by the services that make them: jobs
 * claimed (the Claimer, once the claim committed), and attempts' ends written (the Completer) —
 * `ended` when the end changed its job, `stale` when it changed nothing. One hub per `QueueLive`;
 * `Events` listens to it and turns the facts into its events.
 *
 * A listener is called synchronously, on the fiber that made the fact, after the fact is written to
 * the database: it must neither block nor throw. While no listener wants facts (`wanted` false), the
 * services tell none, so the hot path allocates nothing for them.
 *
 * @internal
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import type { ClaimedRow, Finish } from "./driver/Driver.js"

/** What a listener is told. */
export interface FactListener {
  /** Whether it wants facts now. */
  readonly wants: () => boolean
  /** `workerId` claimed `rows` at `nowUs` (µs since the epoch); the claim committed. */
  readonly claimed: (rows: ReadonlyArray<ClaimedRow>, workerId: string, nowUs: number) => void
  /** `end` was written and changed its job. */
  readonly ended: (end: Finish) => void
  /**
   * `end` changed nothing: its attempt was stale (the job was cancelled, or rescued from a worker
   * taken for lost, while it ran), or neither it nor the dead letter in its place could be written.
   */
  readonly stale: (end: Finish) => void
}

export interface FactsShape {
  /** Whether any listener wants facts now: when not, tell none. */
  readonly wanted: () => boolean
  readonly claimed: FactListener["claimed"]
  readonly ended: FactListener["ended"]
  readonly stale: FactListener["stale"]
  /** Listens for the life of the scope. */
  readonly listen: (listener: FactListener) => Effect.Effect<void, never, Scope.Scope>
}

export class Facts extends Context.Tag("sqlane/internal/Facts")<Facts, FactsShape>() {}

export const make: Effect.Effect<FactsShape> = Effect.sync(() => {
  let listeners: ReadonlyArray<FactListener> = []
  return {
    wanted: () => {
      for (const listener of listeners) if (listener.wants()) return true
      return false
    },
    claimed: (rows, workerId, nowUs) => {
      for (const listener of listeners) listener.claimed(rows, workerId, nowUs)
    },
    ended: (end) => {
      for (const listener of listeners) listener.ended(end)
    },
    stale: (end) => {
      for (const listener of listeners) listener.stale(end)
    },
    listen: (listener) =>
      Effect.acquireRelease(
        Effect.sync(() => void (listeners = [...listeners, listener])),
        () => Effect.sync(() => void (listeners = listeners.filter((l) => l !== listener)))
      )
  }
})

export const layer: Layer.Layer<Facts> = Layer.effect(Facts, make)
