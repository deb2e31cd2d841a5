/**
 * A typed stream of what the workers of one `QueueLive` do: a job was claimed, completed, failed
 * (and will be retried), or dead-lettered.
 *
 * Events are published after the fact is written to the database: `Claimed` once the claim
 * committed, `Completed`, `Failed` and `Dead` once the attempt's end was written by the Completer.
 * `Failed` and `Dead` also cover jobs of lost workers that a worker of this process rescued
 * (error `"worker lost"`). Attempts released at shutdown and cancelled attempts emit nothing, nor
 * does the end of an attempt that was stale when written (every write is guarded by the attempt:
 * the job was cancelled, or rescued from a worker taken for lost, while the attempt ran).
 *
 * Each subscriber has a buffer of {@link bufferSize} events; one that falls further behind loses the
 * oldest ones (workers never wait for subscribers).
 *
 * ```ts
 * const events = yield* Events.Events
 * yield* events.stream.pipe(
 *   Stream.filter((e) => e._tag === "Dead"),
 *   Stream.runForEach((e) => Effect.logError(`job ${e.id} (${e.name}) is dead: ${e.error}`)),
 *   Effect.forkScoped
 * )
 * ```
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as PubSub from "effect/PubSub"
import type * as Queue from "effect/Queue"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { Database } from "../internal/Database.js"
import { endKey } from "../internal/driver/shared.js"
import { microsToDate, nowMicros } from "../internal/time.js"
import { type ClaimedJob, Claimer } from "./Claimer.js"
import { Completer, type Outcome, type Rider, type RiderClaim } from "./Completer.js"

/**
 * One event. Every event has the job's `id`, `name`, the `attempt` (from 1) and when it happened
 * (`at`, Effect's `Clock`).
 *
 * - `Claimed`: a worker (`workerId`) claimed the job and starts this attempt;
 * - `Completed`: the handler succeeded and its end is written (the job completed and its result
 *   stored; with `retention.completed` 0, its row deleted instead);
 * - `Failed`: the attempt failed (`error`, one line) and the job is pending again, due at `retryAt`;
 * - `Dead`: the attempt failed and the job is dead-lettered (no attempts left, a permanent failure,
 *   or a payload that does not decode).
 *
 * @since 0.1.0
 * @category models
 */
export type WorkerEvent = Data.TaggedEnum<{
  Claimed: { readonly id: string; readonly name: string; readonly attempt: number; readonly workerId: string; readonly at: Date }
  Completed: { readonly id: string; readonly name: string; readonly attempt: number; readonly at: Date }
  Failed: {
    readonly id: string
    readonly name: string
    readonly attempt: number
    readonly error: string
    readonly retryAt: Date
    readonly at: Date
  }
  Dead: { readonly id: string; readonly name: string; readonly attempt: number; readonly error: string; readonly at: Date }
}>

/**
 * Constructors and matchers of {@link WorkerEvent} (`WorkerEvent.$is("Dead")`, `WorkerEvent.$match`).
 *
 * @since 0.1.0
 * @category models
 */
export const WorkerEvent = Data.taggedEnum<WorkerEvent>()

/**
 * Events each subscriber may fall behind before it loses the oldest.
 *
 * @since 0.1.0
 * @category constants
 */
export const bufferSize = 4096

/**
 * @since 0.1.0
 * @category models
 */
export interface EventsShape {
  /** Every event from the moment the stream is run (not earlier ones). */
  readonly stream: Stream.Stream<WorkerEvent>
  /** A subscription for the life of the scope: events from now on, taken one by one. */
  readonly subscribe: Effect.Effect<Queue.Dequeue<WorkerEvent>, never, Scope.Scope>
  /** Publishes an event (used by the workers' Claimer and Completer). */
  readonly publish: (event: WorkerEvent) => Effect.Effect<void>
  /** Publishes an event without an effect (the worker's hot path). */
  readonly unsafePublish: (event: WorkerEvent) => void
  /** Whether anyone subscribes now: with nobody listening, the workers skip building events. */
  readonly unsafeHasSubscribers: () => boolean
}

/**
 * @since 0.1.0
 * @category tags
 */
export class Events extends Context.Tag("sqlane/Events")<Events, EventsShape>() {}

/**
 * @since 0.1.0
 * @category constructors
 */
export const make: Effect.Effect<EventsShape, never, Scope.Scope> = Effect.gen(function*() {
  const hub = yield* Effect.acquireRelease(PubSub.sliding<WorkerEvent>(bufferSize), PubSub.shutdown)
  let subscribers = 0
  const subscribe = Effect.acquireRelease(
    Effect.sync(() => void subscribers++),
    () => Effect.sync(() => void subscribers--)
  ).pipe(Effect.zipRight(PubSub.subscribe(hub)))
  return {
    stream: Stream.unwrapScoped(Effect.map(subscribe, (queue) => Stream.fromQueue(queue))),
    subscribe,
    publish: (event) => subscribers === 0 ? Effect.void : Effect.asVoid(PubSub.publish(hub, event)),
    unsafePublish: (event) => void (subscribers > 0 && hub.unsafeOffer(event)),
    unsafeHasSubscribers: () => subscribers > 0
  }
})

/**
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<Events> = Layer.scoped(Events, make)

/**
 * Wraps a `Claimer` and a `Completer` so that claims and attempt ends are published as events.
 * `QueueLive` builds its services this way.
 *
 * @since 0.1.0
 * @category layers
 */
export const observe: Layer.Layer<Claimer | Completer, never, Claimer | Completer | Events | Database> = Layer
  .effectContext(
    Effect.gen(function*() {
      const claimer = yield* Claimer
      const completer = yield* Completer
      const events = yield* Events
      const { statements } = yield* Database
      const clock = yield* Effect.clock
      /**
       * Names of the attempts claimed in this process and not yet ended, by `<id>:<attempt>`: a retry
       * can be claimed before the end of the attempt before it has been reported.
       */
      const names = new Map<string, string>()
      const keyOf = endKey
      const nameOf = (id: string, attempt: number) => {
        const known = names.get(keyOf(id, attempt))
        if (known !== undefined) return Effect.succeed(known)
        // A job of a lost worker, rescued here: look its name up (rare).
        return statements.jobGet(id).pipe(
          Effect.map((row) => row?.name ?? ""),
          Effect.orElseSucceed(() => "")
        )
      }
      const ended = (outcome: Outcome, name: string, atUs: number): WorkerEvent | undefined => {
        if (outcome.state === "released") return undefined
        const common = { id: outcome.id, name, attempt: outcome.attempt, at: microsToDate(outcome.finishedAtUs ?? outcome.endedAtUs ?? atUs) }
        return outcome.state === "completed"
          ? WorkerEvent.Completed(common)
          : outcome.state === "dead"
          ? WorkerEvent.Dead({ ...common, error: outcome.lastError ?? "" })
          : WorkerEvent.Failed({ ...common, error: outcome.lastError ?? "", retryAt: microsToDate(outcome.runAtUs ?? atUs) })
      }
      const claimed = (rows: ReadonlyArray<ClaimedJob>, workerId: string, nowUs: number) => {
        if (!events.unsafeHasSubscribers()) return
        for (const row of rows) {
          names.set(keyOf(row.id, row.attempts), row.name)
          events.unsafePublish(WorkerEvent.Claimed({
            id: row.id,
            name: row.name,
            attempt: row.attempts,
            workerId,
            at: microsToDate(nowUs)
          }))
        }
      }
      /** Each worker's rider, wrapped once (the completer groups a batch's ends by rider). */
      const riders = new WeakMap<Rider, Rider>()
      const wrap = (rider: Rider | undefined): Rider | undefined => {
        if (rider === undefined) return undefined
        let wrapped = riders.get(rider)
        if (wrapped === undefined) {
          let claim: RiderClaim | undefined
          wrapped = {
            claimWith: (ended) => (claim = rider.claimWith(ended)),
            claimed: (rows) => {
              rider.claimed(rows)
              if (claim !== undefined) claimed(rows, claim.workerId, claim.nowUs)
            },
            passed: () => rider.passed()
          }
          riders.set(rider, wrapped)
        }
        return wrapped
      }
      return Context.make(Claimer, {
        ...claimer,
        claim: (groups, limit, nowUs, workerId, keyed) =>
          Effect.tap(
            claimer.claim(groups, limit, nowUs, workerId, keyed),
            (rows) => Effect.sync(() => claimed(rows, workerId, nowUs))
          )
      }).pipe(Context.add(Completer, {
        ...completer,
        // The worker's hot path: published from the completer's callback once the end is written.
        // An end is published if someone subscribed before it was queued, also when its claim came
        // earlier (its name then comes with the outcome).
        unsafeFinish: (outcome, onWritten, rider) =>
          names.size === 0 && !events.unsafeHasSubscribers()
            ? completer.unsafeFinish(outcome, onWritten, wrap(rider))
            : completer.unsafeFinish(outcome, (changed, unwritten) => {
              onWritten(changed, unwritten)
              const key = keyOf(outcome.id, outcome.attempt)
              const name = names.get(key) ?? outcome.name
              names.delete(key)
              // A stale attempt's end changed nothing (the job was cancelled or rescued meanwhile).
              if (name === undefined || changed === false) return
              const event = ended(outcome, name, Number(clock.unsafeCurrentTimeNanos() / 1000n))
              if (event !== undefined) events.unsafePublish(event)
            }, wrap(rider)),
        finish: (outcome) =>
          Effect.gen(function*() {
            const changed = (yield* completer.finish(outcome)) !== false
            const key = keyOf(outcome.id, outcome.attempt)
            if (!changed || outcome.state === "released" || !events.unsafeHasSubscribers()) {
              names.delete(key)
              return changed
            }
            const name = outcome.name ?? (yield* nameOf(outcome.id, outcome.attempt))
            names.delete(key)
            const event = ended(outcome, name, yield* nowMicros)
            if (event !== undefined) yield* events.publish(event)
            return changed
          })
      }))
    })
  )
