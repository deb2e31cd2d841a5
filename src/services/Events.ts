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
 * The events are made from the facts the Claimer and the Completer tell (`internal/facts.ts`):
 * while nobody subscribes, they tell none.
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
import * as Runtime from "effect/Runtime"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { Database } from "../internal/Database.js"
import type { Finish } from "../internal/driver/Driver.js"
import { endKey } from "../internal/driver/shared.js"
import { Facts } from "../internal/facts.js"
import { microsToDate } from "../internal/time.js"

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
 * @example
 * ```ts
 * yield* Stream.runForEach(events.stream, Events.WorkerEvent.$match({
 *   Claimed: (e) => Effect.log(`claimed ${e.name} ${e.id}`),
 *   Completed: (e) => Effect.log(`completed ${e.name} ${e.id}`),
 *   Failed: (e) => Effect.log(`${e.name} ${e.id} failed, retry at ${e.retryAt.toISOString()}`),
 *   Dead: (e) => Effect.logWarning(`${e.name} ${e.id} is dead: ${e.error}`)
 * }))
 * ```
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
 * @example
 * ```ts
 * const event = Events.WorkerEvent.Completed({ id: "1", name: "send-email", attempt: 1, at: new Date() })
 * if (Events.WorkerEvent.$is("Completed")(event)) console.log(event.id)
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export const WorkerEvent = Data.taggedEnum<WorkerEvent>()

/**
 * Events each subscriber may fall behind before it loses the oldest.
 *
 * @example
 * ```ts
 * // A subscriber that falls more than bufferSize events behind loses the oldest
 * const lag = Events.bufferSize
 * ```
 *
 * @since 0.1.0
 * @category constants
 */
export const bufferSize = 4096

/**
 * What the `Events` service gives: the events of this process's workers as a stream or a
 * subscription.
 *
 * @example
 * ```ts
 * const events = yield* Events.Events
 * const dead = yield* events.subscribe // scoped
 * const first = yield* Queue.take(dead) // effect's Queue: the next event
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface EventsShape {
  /** Every event from the moment the stream is run (not earlier ones). */
  readonly stream: Stream.Stream<WorkerEvent>
  /** A subscription for the life of the scope: events from now on, taken one by one. */
  readonly subscribe: Effect.Effect<Queue.Dequeue<WorkerEvent>, never, Scope.Scope>
  /** Publishes an event to the subscribers of now (none: it is dropped). */
  readonly publish: (event: WorkerEvent) => Effect.Effect<void>
}

/**
 * What this process's workers do, as events: `Claimed`, `Completed`, `Failed`, `Dead`. Provided
 * by `QueueLive`.
 *
 * @example
 * ```ts
 * const events = yield* Events.Events
 * yield* events.stream.pipe(
 *   Stream.filter((e) => e._tag === "Dead"),
 *   Stream.runForEach((e) => Effect.logWarning(`job ${e.id} is dead`)),
 *   Effect.forkScoped
 * )
 * ```
 *
 * @since 0.1.0
 * @category tags
 */
export class Events extends Context.Tag("sqlane/Events")<Events, EventsShape>() {}

/**
 * Listens to the facts hub for the life of the scope and publishes the events made from its facts.
 *
 * @example
 * ```ts
 * // QueueLive provides Events; this is how it builds it
 * const EventsLive = Layer.scoped(Events.Events, Events.make)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make: Effect.Effect<EventsShape, never, Facts | Database | Scope.Scope> = Effect.gen(function*() {
  const hub = yield* Effect.acquireRelease(PubSub.sliding<WorkerEvent>(bufferSize), PubSub.shutdown)
  const facts = yield* Facts
  const { driver } = yield* Database
  const clock = yield* Effect.clock
  const runtime = yield* Effect.runtime<never>()
  let subscribers = 0
  const subscribe = Effect.acquireRelease(
    Effect.sync(() => void subscribers++),
    () => Effect.sync(() => void subscribers--)
  ).pipe(Effect.zipRight(PubSub.subscribe(hub)))
  const publish = (event: WorkerEvent) => void (subscribers > 0 && hub.unsafeOffer(event))

  /**
   * Names of the attempts claimed in this process while someone subscribed and not yet ended, by
   * `<id>:<attempt>`: a retry can be claimed before the end of the attempt before it is told.
   */
  const names = new Map<string, string>()
  /** The event of a written end (none for a release: the attempt is not counted). */
  const endEvent = (end: Finish, name: string, atUs: number): WorkerEvent | undefined => {
    if (end.state === "released") return undefined
    const common = { id: end.id, name, attempt: end.attempt, at: microsToDate(end.finishedAtUs ?? end.endedAtUs ?? atUs) }
    return end.state === "completed"
      ? WorkerEvent.Completed(common)
      : end.state === "dead"
      ? WorkerEvent.Dead({ ...common, error: end.lastError ?? "" })
      : WorkerEvent.Failed({ ...common, error: end.lastError ?? "", retryAt: microsToDate(end.runAtUs ?? atUs) })
  }
  /** Forgets the name of an ended attempt, and returns it. */
  const forget = (end: Finish): string | undefined => {
    const key = endKey(end.id, end.attempt)
    const name = names.get(key)
    if (name !== undefined) names.delete(key)
    return name ?? end.name
  }
  yield* facts.listen({
    // Also while names are left: their ends forget them.
    wants: () => subscribers > 0 || names.size > 0,
    claimed: (rows, workerId, nowUs) => {
      if (subscribers === 0) return
      for (const row of rows) {
        names.set(endKey(row.id, row.attempts), row.name)
        publish(WorkerEvent.Claimed({ id: row.id, name: row.name, attempt: row.attempts, workerId, at: microsToDate(nowUs) }))
      }
    },
    ended: (end) => {
      const name = forget(end)
      if (subscribers === 0 || end.state === "released") return
      const atUs = Number(clock.unsafeCurrentTimeNanos() / 1000n)
      if (name !== undefined) return void publish(endEvent(end, name, atUs)!)
      // An end this process neither claimed nor named (rare): its name is read from its row.
      Runtime.runFork(runtime)(driver.jobGet(end.id).pipe(
        Effect.map((row) => publish(endEvent(end, row?.name ?? "", atUs)!)),
        Effect.catchAllCause(() => Effect.void)
      ))
    },
    // A stale attempt's end changed nothing (the job was cancelled or rescued meanwhile): no event.
    stale: (end) => void forget(end)
  })
  return {
    stream: Stream.unwrapScoped(Effect.map(subscribe, (queue) => Stream.fromQueue(queue))),
    subscribe,
    publish: (event) => Effect.sync(() => publish(event))
  }
})

/**
 * @example
 * ```ts
 * // Part of QueueLive; an app provides QueueLive instead
 * const AppLive = QueueLive().pipe(Layer.provideMerge(ClientLive))
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<Events, never, Facts | Database> = Layer.scoped(Events, make)
