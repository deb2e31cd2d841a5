/**
 * Wakes idle workers when jobs are enqueued, so they need not wait for their poll; and carries the
 * control plane: cancellations and changes of the paused job names.
 *
 * Wake-ups come four ways, cheapest first:
 * 1. an in-process hint (`internal/notifier/hub.ts`): a queue instance that enqueued a job tells every
 *    worker of this process on the same tables at once — or, when the enqueue ran inside a caller's
 *    transaction whose commit sqlane cannot observe, after `hintDelay` (20 ms);
 * 2. PostgreSQL `LISTEN/NOTIFY` (`internal/notifier/pgListen.ts`): the enqueue statement itself sends
 *    a `NOTIFY` carrying only job names, delivered to every listening process when the transaction
 *    commits, within the limits of the NOTIFY limiter;
 * 3. on MySQL/MariaDB, which have no `LISTEN/NOTIFY` (`internal/notifier/insertCheck.ts`): one fiber
 *    per layer reads the newest job id every `insertCheckInterval` (100 ms) while workers are
 *    subscribed, and when it changed (or on its first reading) wakes them all to probe, so jobs
 *    enqueued by other processes start without waiting for the poll;
 * 4. the worker's jittered poll (`pollInterval`, 5 s), the backstop for everything else.
 *
 * Which of 2 and 3 a Notifier uses is decided once, when it is built, by the driver's
 * `capabilities.listenNotify`. Cancellations and pauses (`internal/notifier/control.ts`) reach this
 * process's workers at once, other processes' by `NOTIFY` where there is one.
 *
 * Source: River's notifier + producer (notify wakes, debounced fetch, jittered poll as backstop).
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import { Database } from "../internal/Database.js"
import type { Group } from "../internal/driver/Driver.js"
import * as Control from "../internal/notifier/control.js"
import * as Hub from "../internal/notifier/hub.js"
import * as InsertCheck from "../internal/notifier/insertCheck.js"
import * as PgListen from "../internal/notifier/pgListen.js"
import { QueueConfig } from "./QueueConfig.js"

/**
 * A worker's subscription: wake-ups for the job names it handles, coalesced.
 *
 * @example
 * ```ts
 * const notifier = yield* Notifier.Notifier
 * const wakeups = yield* notifier.subscribe(["send-email"]) // scoped
 * const wake = yield* wakeups.take // waits for the next wake-up
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface Wakeups {
  /**
   * Waits for the next wake-up (returns at once if some arrived since the last `take`), and
   * returns what the wake-ups since the last `take` said: the groups with jobs due now, and
   * whether a probe is needed (delayed jobs, a retry, LISTEN re-established, or too many names).
   */
  readonly take: Effect.Effect<Wake>
  /**
   * As `take`, without waiting: what the wake-ups since the last `take` said, or `undefined` when
   * none arrived (a worker with a backlog checks this between claims, so a name that got due
   * jobs meanwhile is not left behind the backlog).
   */
  readonly poll: Effect.Effect<Wake | undefined>
  /** Wakes this subscriber for a probe (e.g. a worker that just rescheduled a job of its own). */
  readonly wake: Effect.Effect<void>
  /** Completes when every wake-up source is ready (on PostgreSQL: `LISTEN` is active). */
  readonly ready: Effect.Effect<void>
}

/**
 * One wake-up of a subscriber: the groups that got jobs due at once, and whether to probe.
 *
 * @example
 * ```ts
 * const wake: Notifier.Wake = yield* wakeups.take
 * const jobs = wake.probe
 *   ? yield* claimer.claim((yield* claimer.probe(["send-email"], nowUs)).due, 10, nowUs, workerId)
 *   : yield* claimer.claim(wake.groups, 10, nowUs, workerId)
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface Wake {
  /** (name, priority) groups of this subscriber's names that got jobs due at once. */
  readonly groups: ReadonlyArray<Group>
  /** Whether the subscriber must probe to learn what is due (and when). */
  readonly probe: boolean
  /**
   * Whether a mutex key or a limit slot of the subscriber's names was released (an end announced
   * with {@link keyReleased}): a probe finds what the release lets start. Absent: false.
   */
  readonly released?: boolean
}

/**
 * What an enqueue tells the workers: a `[name, priority]` pair for jobs due at once (a worker
 * can claim them without probing), a name alone for jobs due later.
 *
 * @example
 * ```ts
 * const notifier = yield* Notifier.Notifier
 * const entries: ReadonlyArray<Notifier.Enqueued> = [["send-email", 0], "nightly-report"] // due now; due later
 * yield* notifier.enqueued(entries, true)
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export type Enqueued = string | readonly [name: string, priority: number]

/**
 * A worker's demand for slots of a job name's concurrency limit (`limits.running`): it has room to
 * run jobs of `name`, a claim of them came back short while jobs of it were left, and it holds `held`
 * of the limit's slots. A worker that holds more than `held + 1` of them (and whose only limited name
 * whose slots pass is this one, with `prefetch` above 0) keeps at most the midpoint of the two for
 * 200 ms (or two attempts' time): it leaves the slots above it to the others as its attempts end
 * (instead of passing them on) and claims none above it, so a worker that starts beside one that
 * holds every slot gets about half of them at once. `worker` is the demanding worker's id,
 * `instance` its start and `seq` counts its demands, so a demand heard twice is acted on once.
 *
 * @example
 * ```ts
 * const demand: Notifier.SlotDemand = { name: "send-email", held: 0, worker: "web-1", instance: "k3x9q1", seq: 1 }
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface SlotDemand {
  readonly name: string
  readonly held: number
  readonly worker: string
  /** The demanding worker's start (random), so that a worker id started again is heard from its first demand. */
  readonly instance: string
  readonly seq: number
}

/**
 * What the `Notifier` service does: tells workers (of this process, and of others through
 * `NOTIFY` or the insert check) about enqueued jobs, released keys, cancellations and pauses.
 *
 * @example
 * ```ts
 * const notifier = yield* Notifier.Notifier
 * yield* notifier.announce(["send-email"]) // wake every worker of send-email, in every process (NOTIFY on PostgreSQL)
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface NotifierShape {
  /**
   * Tells this process's workers that jobs of `names` were written (call it once the statement that
   * wrote them is done). With `committed: false` (inside a caller's transaction) the hint is sent
   * after `hintDelay`. With `notified: false` (the statement carried no `NOTIFY`: the limiter held it
   * back, or the write has none) other processes are told by the limiter's trailing `NOTIFY`, sent
   * after the write (after `hintDelay` inside a caller's transaction, whose commit sqlane cannot see).
   */
  readonly enqueued: (entries: ReadonlyArray<Enqueued>, committed: boolean, notified?: boolean) => Effect.Effect<void>
  /** `enqueued(entries, true, notified)` as a plain call, for a write that has committed (the enqueue's hot path). */
  readonly hintCommitted: (entries: ReadonlyArray<Enqueued>, notified: boolean) => void
  /**
   * The payload of the `NOTIFY` that the enqueue statement sends, or `undefined` when it sends
   * none: where the database has no `LISTEN/NOTIFY`, or when this process sent {@link notifyBurst}
   * within the last {@link notifyWindowMillis} — then `enqueued(…, notified: false)` after the write
   * has the names sent in one trailing `NOTIFY` when the window ends. Job names and priorities only,
   * never the job payload. A plain call (the enqueue's hot path); a payload it returns counts in the
   * limiter's window, so call it once per statement that sends it.
   */
  readonly takeNotifyPayload: (entries: ReadonlyArray<Enqueued>) => string | undefined
  /**
   * A job that may hold a mutex key ended, so jobs waiting for its key may now run: wakes the workers
   * of `names` and every worker that subscribed to {@link keyReleased} (those with keyed names) — this process's at once, other processes' by a `NOTIFY` on PostgreSQL (through the
   * same limiter as enqueues: within {@link notifyWindowMillis}), by their poll on MySQL/MariaDB.
   */
  readonly released: (names: ReadonlyArray<string>) => Effect.Effect<void>
  /** Subscribes to wake-ups for `names` for the life of the scope. */
  readonly subscribe: (names: ReadonlyArray<string>) => Effect.Effect<Wakeups, never, Scope.Scope>
  /**
   * Tells every worker (this process at once; other processes by `NOTIFY` on PostgreSQL, by their
   * rescue pass, every `rescueInterval`, on MySQL/MariaDB) that these jobs were cancelled.
   */
  readonly cancelled: (ids: ReadonlyArray<string>) => Effect.Effect<void>
  /** Calls `onCancel` with the ids of cancelled jobs, for the life of the scope. */
  readonly onCancel: (onCancel: (ids: ReadonlyArray<string>) => void) => Effect.Effect<void, never, Scope.Scope>
  /**
   * Wakes the workers of `names` in every process: this process at once, others by `NOTIFY` on
   * PostgreSQL (by their poll on MySQL/MariaDB). For jobs made due outside an enqueue (e.g. retries).
   */
  readonly announce: (names: ReadonlyArray<string>) => Effect.Effect<void>
  /**
   * Tells every worker that the paused job names changed: this process at once, others by `NOTIFY`
   * on PostgreSQL (on MySQL/MariaDB they re-read the paused names every `rescueInterval`).
   */
  readonly pausesChanged: Effect.Effect<void>
  /**
   * As `pausesChanged`, for a job name just paused: this process's workers leave it out before this
   * returns (a job of it enqueued afterwards is not claimed here).
   */
  readonly namePaused: (name: string) => Effect.Effect<void>
  /**
   * Calls `onChange` whenever the paused job names may have changed (with the name, when it is a
   * name paused in this process), for the life of the scope.
   */
  readonly onPausesChanged: (onChange: (paused: string | undefined) => void) => Effect.Effect<void, never, Scope.Scope>
  /**
   * Tells every worker that the concurrency limits set at run time changed: this process at once,
   * others by `NOTIFY` on PostgreSQL (on MySQL/MariaDB they re-read them every `rescueInterval`).
   */
  readonly limitsChanged: Effect.Effect<void>
  /** Calls `onChange` whenever the run-time concurrency limits may have changed, for the life of the scope. */
  readonly onLimitsChanged: (onChange: () => void) => Effect.Effect<void, never, Scope.Scope>
  /**
   * Tells every worker that a worker wants slots of a concurrency limit ({@link SlotDemand}): this
   * process at once, others by `NOTIFY` on PostgreSQL. MySQL/MariaDB carry no messages between
   * processes: there a worker that holds every slot still leaves one now and then (every 25 ms while
   * it holds them all), which is how a worker in another process gets its share.
   */
  readonly wantsSlots: (demand: SlotDemand) => Effect.Effect<void>
  /** Calls `onDemand` with every demand for slots heard (a worker's own too), for the life of the scope. */
  readonly onWantsSlots: (onDemand: (demand: SlotDemand) => void) => Effect.Effect<void, never, Scope.Scope>
}

/**
 * The wake-up service: in-process hints, `LISTEN/NOTIFY` on PostgreSQL, the insert check on
 * MySQL/MariaDB. Provided by `QueueLive`.
 *
 * @example
 * ```ts
 * // Provided by QueueLive; wake the workers of a name, e.g. after writing jobs with your own SQL
 * const wakeSendEmail = Effect.flatMap(Notifier.Notifier, (n) => n.announce(["send-email"]))
 * ```
 *
 * @since 0.1.0
 * @category tags
 */
export class Notifier extends Context.Tag("sqlane/Notifier")<Notifier, NotifierShape>() {}

/**
 * At most {@link notifyBurst} `NOTIFY`s per window per process and table prefix ride inside
 * enqueues; the names of the enqueues past that are sent in one trailing `NOTIFY` when the window
 * ends. On PostgreSQL a transaction that notifies takes a database-wide lock from its pre-commit to
 * its end, so notifying commits cannot share a WAL flush: one per enqueue would serialize every
 * enqueue of the database. The window is wall-clock time (it protects the server, it decides
 * nothing about jobs), so it behaves the same under `TestClock`.
 *
 * Source: River's insert notification limiter.
 *
 * @example
 * ```ts
 * // At most notifyBurst NOTIFYs ride inside enqueues per window; the rest share one trailing NOTIFY
 * const perSecond = Notifier.notifyBurst * (1000 / Notifier.notifyWindowMillis)
 * ```
 *
 * @since 0.1.0
 * @category constants
 */
export const notifyWindowMillis: number = PgListen.notifyWindowMillis

/**
 * `NOTIFY`s that ride inside enqueues within one {@link notifyWindowMillis}: sparse enqueues (a
 * few per window) each wake other processes on their own commit; a burst sends a few and then one
 * trailing `NOTIFY` per window.
 *
 * @example
 * ```ts
 * const riding = Math.min(enqueuesInWindow, Notifier.notifyBurst) // NOTIFYs sent with their enqueue
 * ```
 *
 * @since 0.1.0
 * @category constants
 */
export const notifyBurst: number = PgListen.notifyBurst

/**
 * The pseudo job name a keyed job's end is announced with, besides its worker's keyed names: a
 * mutex key is shared by every job name, so workers of other keyed names (which may have jobs
 * waiting for that key) subscribe to it as well. Not a name a job can have in practice.
 *
 * @example
 * ```ts
 * // A worker with keyed job names also listens for released keys
 * const wakeups = yield* notifier.subscribe([...names, Notifier.keyReleased])
 * ```
 *
 * @since 0.1.0
 * @category constants
 */
export const keyReleased: string = Hub.keyReleased

/**
 * Builds the Notifier of one `QueueLive`: the in-process hub and control plane, and — by the
 * driver's `capabilities.listenNotify` — PostgreSQL `LISTEN/NOTIFY` with its limiter, or the
 * MySQL/MariaDB insert check.
 *
 * @example
 * ```ts
 * // QueueLive provides Notifier; this is how it builds it
 * const NotifierLive = Layer.scoped(Notifier.Notifier, Notifier.make)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make: Effect.Effect<NotifierShape, never, QueueConfig | Database | Scope.Scope> = Effect.gen(function*() {
  const config = yield* QueueConfig
  const { identity, driver } = yield* Database
  const scope = yield* Effect.scope
  const key = `${identity}/${config.prefix}`
  const hub = Hub.make(key)
  const control = Control.make(key)
  const peers = driver.capabilities.listenNotify
    ? yield* PgListen.make(hub, control)
    : yield* InsertCheck.make(hub)
  const hintDelayMillis = Duration.toMillis(config.hintDelay)

  const hintCommitted = (entries: ReadonlyArray<Enqueued>, notified: boolean) => {
    hub.hint(entries)
    if (!notified) peers.later(entries, 0)
  }
  return {
    enqueued: (entries, committed, notified = true) =>
      committed
        ? Effect.sync(() => hintCommitted(entries, notified))
        : Effect.zipRight(
          Effect.asVoid(Effect.forkIn(Effect.delay(Effect.sync(() => hub.hint(entries)), config.hintDelay), scope)),
          notified ? Effect.void : Effect.sync(() => peers.later(entries, hintDelayMillis))
        ),
    hintCommitted,
    takeNotifyPayload: peers.notifyPayload,
    released: (releasedNames) =>
      Effect.sync(() => {
        const names = [...releasedNames, keyReleased]
        hub.hint(names)
        peers.later(names, 0)
      }),
    cancelled: (ids) => Effect.zipRight(Effect.sync(() => control.cancelled(ids)), peers.cancelled(ids)),
    announce: (names) => Effect.zipRight(Effect.sync(() => hub.hint(names)), peers.wake(names)),
    pausesChanged: Effect.zipRight(Effect.sync(() => control.pausesChanged()), peers.pausesChanged),
    namePaused: (name) => Effect.zipRight(Effect.sync(() => control.pausesChanged(name)), peers.pausesChanged),
    onPausesChanged: control.onPausesChanged,
    limitsChanged: Effect.zipRight(Effect.sync(() => control.limitsChanged()), peers.limitsChanged),
    onLimitsChanged: control.onLimitsChanged,
    wantsSlots: (demand) => Effect.zipRight(Effect.sync(() => control.wantsSlots(demand)), peers.wantsSlots(demand)),
    onWantsSlots: control.onWantsSlots,
    onCancel: control.onCancel,
    subscribe: (names) => hub.subscribe(names, peers.start, peers.ready)
  }
})

/**
 * The Notifier of a `QueueLive` (see {@link make}).
 *
 * @example
 * ```ts
 * // Part of QueueLive; an app provides QueueLive instead
 * const AppLive = QueueLive().pipe(Layer.provideMerge(ClientLive))
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<Notifier, never, QueueConfig | Database> = Layer.scoped(Notifier, make)
