/**
 * Wakes idle workers when jobs are enqueued, so they need not wait for their poll.
 *
 * Three ways, cheapest first:
 * 1. an in-process hint: a queue instance that enqueued a job tells every worker of this process
 *    on the same tables at once — or, when the enqueue ran inside a caller's transaction whose
 *    commit sqlane cannot observe, after `hintDelay` (20 ms);
 * 2. PostgreSQL `LISTEN/NOTIFY` ({@link layerPg}): the enqueue statement itself sends a `NOTIFY`
 *    carrying only job names, delivered to every listening process when the transaction commits;
 * 3. on MySQL/MariaDB, which have no `LISTEN/NOTIFY` ({@link layerMysql}): one fiber per layer reads
 *    the newest job id every `insertCheckInterval` (100 ms) while workers are subscribed, and when it
 *    changed (or on its first reading) wakes them all to probe, so jobs enqueued by other processes
 *    start without waiting for the poll;
 * 4. the worker's jittered poll (`pollInterval`, 5 s), the backstop for everything else.
 *
 * Source: River's notifier + producer (notify wakes, debounced fetch, jittered poll as backstop).
 *
 * @since 0.1.0
 */
import * as PgClient from "@effect/sql-pg/PgClient"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import { globalValue } from "effect/GlobalValue"
import * as Layer from "effect/Layer"
import * as Queue from "effect/Queue"
import * as Runtime from "effect/Runtime"
import * as Schedule from "effect/Schedule"
import * as Scope from "effect/Scope"
import { Database } from "../internal/Database.js"
import { bounded, forkInBounded, forkScopedBounded } from "../internal/outage.js"
import { wallSleep } from "../internal/wallClock.js"
import type { Group } from "../internal/driver/Driver.js"
import * as PgListener from "../internal/pgListener.js"
import * as PgSession from "../internal/driver/pg/session.js"
import { QueueConfig } from "./QueueConfig.js"

/**
 * A worker's subscription: wake-ups for the job names it handles, coalesced.
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
 * @since 0.1.0
 * @category models
 */
export interface Wake {
  /** (name, priority) groups of this subscriber's names that got jobs due at once. */
  readonly groups: ReadonlyArray<Group>
  /** Whether the subscriber must probe to learn what is due (and when). */
  readonly probe: boolean
}

/**
 * What an enqueue tells the workers: a `[name, priority]` pair for jobs due at once (a worker
 * can claim them without probing), a name alone for jobs due later.
 *
 * @since 0.1.0
 * @category models
 */
export type Enqueued = string | readonly [name: string, priority: number]

/**
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
  readonly unsafeEnqueuedCommitted: (entries: ReadonlyArray<Enqueued>, notified: boolean) => void
  /**
   * The payload of the `NOTIFY` that the enqueue statement sends, or `undefined` when it sends
   * none: where the database has no `LISTEN/NOTIFY`, or when this process sent {@link notifyBurst}
   * within the last {@link notifyWindowMillis} — then `enqueued(…, notified: false)` after the write
   * has the names sent in one trailing `NOTIFY` when the window ends. Job names and priorities only,
   * never the job payload.
   */
  readonly notifyPayload: (entries: ReadonlyArray<Enqueued>) => Effect.Effect<string | undefined>
  /** `notifyPayload` as a plain call (the enqueue's hot path). */
  readonly unsafeNotifyPayload: (entries: ReadonlyArray<Enqueued>) => string | undefined
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
}

/**
 * @since 0.1.0
 * @category tags
 */
export class Notifier extends Context.Tag("sqlane/Notifier")<Notifier, NotifierShape>() {}

interface Subscriber {
  readonly deliver: (signal: Signal) => void
}

/** A wake-up as delivered: the entries of one or more enqueues, or `*` (everyone probes). */
type Signal = ReadonlyArray<Enqueued> | "*"

/** Workers of this process, by database and table prefix: the in-process hint reaches every queue instance. */
const localSubscribers = globalValue(
  Symbol.for("sqlane/Notifier/localSubscribers"),
  () => new Map<string, Set<Subscriber>>()
)
/** Cancellation listeners of this process, by database and table prefix. */
const localCancelListeners = globalValue(
  Symbol.for("sqlane/Notifier/localCancelListeners"),
  () => new Map<string, Set<(ids: ReadonlyArray<string>) => void>>()
)
const CANCEL = "cancel:"
/** Listeners for changes of the paused job names in this process, by database and table prefix. */
const localPauseListeners = globalValue(
  Symbol.for("sqlane/Notifier/localPauseListeners"),
  () => new Map<string, Set<(paused: string | undefined) => void>>()
)
const PAUSES = "pauses"

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
 * @since 0.1.0
 * @category constants
 */
export const notifyWindowMillis = 10

/**
 * `NOTIFY`s that ride inside enqueues within one {@link notifyWindowMillis}: sparse enqueues (a
 * few per window) each wake other processes on their own commit; a burst sends a few and then one
 * trailing `NOTIFY` per window.
 *
 * @since 0.1.0
 * @category constants
 */
export const notifyBurst = 3

/**
 * The pseudo job name a keyed job's end is announced with, besides its worker's keyed names: a
 * mutex key is shared by every job name, so workers of other keyed names (which may have jobs
 * waiting for that key) subscribe to it as well. Not a name a job can have in practice.
 *
 * @since 0.1.0
 * @category constants
 */
export const keyReleased = "\u0001sqlane:key-released"

const deliver = (subscribers: Iterable<Subscriber>, signal: Signal) => {
  for (const s of subscribers) s.deliver(signal)
}

const encodeSignal = (entries: ReadonlyArray<Enqueued>): string => {
  if (entries.length === 1) {
    const json = JSON.stringify(entries)
    return json.length <= 7000 ? json : "*"
  }
  const unique = new Map(entries.map((e) => [typeof e === "string" ? e : `${e[1]}:${e[0]}`, e]))
  const json = JSON.stringify(Array.from(unique.values()))
  return json.length <= 7000 ? json : "*"
}

const decodeSignal = (payload: string): Signal | undefined => {
  if (payload === "*") return "*"
  try {
    const parsed = JSON.parse(payload)
    if (!Array.isArray(parsed)) return undefined
    return parsed.filter((e): e is Enqueued =>
      typeof e === "string" ||
      (Array.isArray(e) && e.length === 2 && typeof e[0] === "string" && Number.isSafeInteger(e[1]))
    )
  } catch {
    return undefined
  }
}

const decodeIds = (payload: string): ReadonlyArray<string> | undefined => {
  try {
    const parsed = JSON.parse(payload)
    return Array.isArray(parsed) ? parsed.filter((n): n is string => typeof n === "string") : undefined
  } catch {
    return undefined
  }
}

const make = (
  listenOn: ((channel: string, onReady: () => void, onPayload: (p: string) => void) => Effect.Effect<never, unknown>) | undefined,
  notify: (channel: string, payload: string) => Effect.Effect<unknown, unknown>,
  /** Check the newest job id every `insertCheckInterval` while workers are subscribed (MySQL/MariaDB). */
  checkInserts = false
) =>
  Effect.gen(function*() {
    const config = yield* QueueConfig
    const { identity, reachability, statements } = yield* Database
    const scope = yield* Effect.scope
    // Log lines from the LISTEN client's callbacks go through the app's logger, not the default one.
    const runFork = Runtime.runFork(yield* Effect.runtime<never>())
    const channel = `${config.prefix}jobs`
    const key = `${identity}/${config.prefix}`
    const local = localSubscribers.get(key) ?? new Set<Subscriber>()
    localSubscribers.set(key, local)
    const cancelListeners = localCancelListeners.get(key) ?? new Set<(ids: ReadonlyArray<string>) => void>()
    localCancelListeners.set(key, cancelListeners)
    const deliverCancel = (ids: ReadonlyArray<string>) => {
      for (const listener of cancelListeners) listener(ids)
    }
    const pauseListeners = localPauseListeners.get(key) ?? new Set<(paused: string | undefined) => void>()
    localPauseListeners.set(key, pauseListeners)
    const deliverPauses = (paused?: string) => {
      for (const listener of pauseListeners) listener(paused)
    }
    /** This instance's own subscribers: a NOTIFY reaches them once per listening instance. */
    const own = new Set<Subscriber>()
    const listening = yield* Deferred.make<void>()
    let listenStarted = false

    const hint = (entries: ReadonlyArray<Enqueued>) => Effect.sync(() => deliver(local, entries))

    // The NOTIFY limiter: a leading NOTIFY inside the enqueue, then one trailing NOTIFY (outside any
    // transaction, from this layer's own fiber) for the names enqueued during the window.
    let lastNotifyAt = -Infinity
    /** When the last `notifyBurst` NOTIFYs inside enqueues were sent (a ring, oldest at `ringAt`). */
    const ring: Array<number> = Array.from({ length: notifyBurst }, () => -Infinity)
    let ringAt = 0
    const trailing = new Map<string, Enqueued>()
    /** The trailing NOTIFY goes no earlier than this (wall-clock ms): after a caller's commit. */
    let trailNotBefore = 0
    const trailingSignal = yield* Queue.sliding<void>(1)
    const trail = (entries: ReadonlyArray<Enqueued>, afterMillis: number) => {
      for (const e of entries) trailing.set(typeof e === "string" ? e : `${e[1]}:${e[0]}`, e)
      trailNotBefore = Math.max(trailNotBefore, Date.now() + afterMillis)
      Queue.unsafeOffer(trailingSignal, undefined)
    }
    const hintDelayMillis = Duration.toMillis(config.hintDelay)
    if (listenOn !== undefined) {
      yield* Queue.take(trailingSignal).pipe(
        Effect.zipRight(Effect.suspend(() =>
          wallSleep(Math.max(0, Math.max(lastNotifyAt + notifyWindowMillis, trailNotBefore) - Date.now()))
        )),
        Effect.zipRight(Effect.suspend(() => {
          const entries = Array.from(trailing.values())
          trailing.clear()
          lastNotifyAt = Date.now()
          return entries.length === 0 ? Effect.void : Effect.ignore(notify(channel, encodeSignal(entries)))
        })),
        Effect.forever,
        (effect) => forkScopedBounded(effect, 100)
      )
      // A process that enqueues and closes within a window (a script, a function) still tells the
      // others: what the window held is sent at once when the layer closes (at most 500 ms; not at
      // all while the database is unreachable).
      yield* Effect.addFinalizer(() =>
        Effect.suspend(() => {
          if (trailing.size === 0 || reachability.unreachable()) return Effect.void
          const entries = Array.from(trailing.values())
          trailing.clear()
          return Effect.ignore(bounded(notify(channel, encodeSignal(entries)), 500))
        })
      )
    }

    // The LISTEN connection is opened by the first subscriber and kept for the layer's life;
    // when it dies it is opened again with backoff, and polling covers the gap. Each time LISTEN
    // becomes active every subscriber re-probes, so a job enqueued meanwhile is not missed.
    const startListening = Effect.suspend(() => {
      if (listenOn === undefined || listenStarted) return Effect.void
      listenStarted = true
      let attempt = 0
      const onReady = () => {
        if (attempt++ > 0) runFork(Effect.logInfo("sqlane: LISTEN re-established"))
        Deferred.unsafeDone(listening, Effect.void)
        deliver(own, "*")
      }
      const onPayload = (payload: string) => {
        if (payload === PAUSES) {
          deliverPauses()
          return
        }
        if (payload.startsWith(CANCEL)) {
          const ids = decodeIds(payload.slice(CANCEL.length))
          if (Array.isArray(ids)) deliverCancel(ids)
          return
        }
        const signal = decodeSignal(payload)
        if (signal !== undefined) deliver(own, signal)
      }
      return listenOn(channel, onReady, onPayload).pipe(
        Effect.tapErrorCause((cause) =>
          reachability.failed("LISTEN", "sqlane: LISTEN connection lost; reconnecting", cause)
        ),
        Effect.retry(Schedule.exponential("100 millis").pipe(Schedule.union(Schedule.spaced("10 seconds")))),
        Effect.annotateLogs({ package: "sqlane", module: "Notifier", channel }),
        (effect) => forkInBounded(effect, scope, 100),
        Effect.asVoid
      )
    })

    const unsafeEnqueuedCommitted = (entries: ReadonlyArray<Enqueued>, notified: boolean) => {
      deliver(local, entries)
      if (!notified && listenOn !== undefined) trail(entries, 0)
    }
    const unsafeNotifyPayload = (entries: ReadonlyArray<Enqueued>): string | undefined => {
      if (listenOn === undefined) return undefined
      const now = Date.now()
      // Fewer than `notifyBurst` NOTIFYs in the window: this one rides inside the enqueue.
      if (now - ring[ringAt] >= notifyWindowMillis) {
        ring[ringAt] = now
        ringAt = (ringAt + 1) % notifyBurst
        lastNotifyAt = now
        return encodeSignal(entries)
      }
      return undefined
    }

    // The insert check: started by the first subscriber, kept for the layer's life, reading only while
    // this layer has subscribers. Wall-clock sleeps: it decides when to look, never when a job is due,
    // so it behaves the same under `TestClock`. Its statements make no spans (10 a second would drown
    // a trace exporter).
    let checkStarted = false
    const checkIntervalMillis = Duration.toMillis(config.insertCheckInterval)
    const startInsertCheck = Effect.suspend(() => {
      if (!checkInserts || checkStarted || !Number.isFinite(checkIntervalMillis)) return Effect.void
      checkStarted = true
      /** The newest id seen; `undefined`: none yet, so the next reading wakes everyone (a job may have
       * committed between a new subscriber's first probe and this reading). */
      let seen: string | null | undefined
      let failures = 0
      const check = Effect.suspend(() => {
        if (own.size === 0) {
          seen = undefined
          return Effect.void
        }
        return statements.jobNewestId().pipe(
          Effect.map((newest) => {
            if (newest !== seen) deliver(own, "*")
            seen = newest
            failures = 0
          }),
          // Any failure, a defect too, must not end the check: the database may be unreachable (the
          // workers' own statements say so); the first failure of a run is logged, then it backs off.
          Effect.catchAllCause((cause) =>
            failures++ === 0
              ? reachability.failed("insert check", "sqlane: insert check failed; retrying with backoff", cause)
              : Effect.void
          )
        )
      })
      return check.pipe(
        Effect.zipRight(Effect.suspend(() =>
          wallSleep(failures === 0 ? checkIntervalMillis : Math.min(5000, checkIntervalMillis * 2 ** Math.min(failures, 10)))
        )),
        Effect.forever,
        Effect.withTracerEnabled(false),
        Effect.annotateLogs({ package: "sqlane", module: "Notifier" }),
        (effect) => forkInBounded(effect, scope, 100),
        Effect.asVoid
      )
    })

    const service: NotifierShape = {
      enqueued: (entries, committed, notified = true) =>
        committed
          ? Effect.sync(() => unsafeEnqueuedCommitted(entries, notified))
          : Effect.zipRight(
            Effect.asVoid(Effect.forkIn(Effect.delay(hint(entries), config.hintDelay), scope)),
            notified || listenOn === undefined ? Effect.void : Effect.sync(() => trail(entries, hintDelayMillis))
          ),
      unsafeEnqueuedCommitted,
      notifyPayload: (entries) => Effect.sync(() => unsafeNotifyPayload(entries)),
      unsafeNotifyPayload,
      released: (releasedNames) =>
        Effect.sync(() => {
          const names = [...releasedNames, keyReleased]
          deliver(local, names)
          if (listenOn === undefined) return
          trail(names, 0)
        }),
      cancelled: (ids) =>
        Effect.sync(() => deliverCancel(ids)).pipe(
          Effect.zipRight(
            listenOn === undefined || ids.length === 0
              ? Effect.void
              : Effect.ignore(notify(channel, CANCEL + JSON.stringify(ids)))
          )
        ),
      announce: (names) =>
        hint(names).pipe(
          Effect.zipRight(
            listenOn === undefined || names.length === 0 ? Effect.void : Effect.ignore(notify(channel, encodeSignal(names)))
          )
        ),
      pausesChanged: Effect.sync(() => deliverPauses()).pipe(
        Effect.zipRight(listenOn === undefined ? Effect.void : Effect.ignore(notify(channel, PAUSES)))
      ),
      namePaused: (name) =>
        Effect.sync(() => deliverPauses(name)).pipe(
          Effect.zipRight(listenOn === undefined ? Effect.void : Effect.ignore(notify(channel, PAUSES)))
        ),
      onPausesChanged: (onChange) =>
        Effect.acquireRelease(
          Effect.sync(() => void pauseListeners.add(onChange)),
          () => Effect.sync(() => void pauseListeners.delete(onChange))
        ),
      onCancel: (onCancel) =>
        Effect.acquireRelease(
          Effect.sync(() => void cancelListeners.add(onCancel)),
          () => Effect.sync(() => void cancelListeners.delete(onCancel))
        ),
      subscribe: (names) =>
        Effect.gen(function*() {
          const handled = new Set(names)
          const signal = yield* Queue.sliding<void>(1)
          let groups = new Map<string, Group>()
          let probe = false
          const subscriber: Subscriber = {
            deliver: (received) => {
              let woken = false
              if (received === "*") {
                probe = woken = true
              } else {
                for (const e of received) {
                  if (typeof e === "string") {
                    if (handled.has(e)) probe = woken = true
                  } else if (handled.has(e[0])) {
                    groups.set(`${e[1]}:${e[0]}`, { name: e[0], priority: e[1] })
                    woken = true
                  }
                }
              }
              if (woken) Queue.unsafeOffer(signal, undefined)
            }
          }
          yield* Effect.acquireRelease(
            Effect.sync(() => {
              local.add(subscriber)
              own.add(subscriber)
            }),
            () =>
              Effect.sync(() => {
                local.delete(subscriber)
                own.delete(subscriber)
              })
          )
          yield* startListening
          yield* startInsertCheck
          const drain = (): Wake => {
            const wake: Wake = { groups: Array.from(groups.values()), probe }
            groups = new Map()
            probe = false
            return wake
          }
          return {
            take: Effect.map(Queue.take(signal), drain),
            poll: Effect.map(Queue.poll(signal), (o) => (o._tag === "Some" ? drain() : undefined)),
            wake: Effect.sync(() => subscriber.deliver("*")),
            ready: listenOn === undefined ? Effect.void : Deferred.await(listening)
          }
        })
    }
    return service
  })

/**
 * In-process hints only: other processes' enqueues are found by the workers' polls.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerLocal: Layer.Layer<Notifier, never, QueueConfig | Database> = Layer.scoped(
  Notifier,
  make(undefined, () => Effect.void)
)

/**
 * For MySQL/MariaDB: in-process hints, plus the insert check (`insertCheckInterval`, 100 ms) that
 * wakes this process's workers when another process enqueued jobs.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerMysql: Layer.Layer<Notifier, never, QueueConfig | Database> = Layer.scoped(
  Notifier,
  make(undefined, () => Effect.void, true)
)

/**
 * In-process hints plus PostgreSQL `LISTEN/NOTIFY` on one dedicated connection per layer,
 * opened when the first worker subscribes. The channel is `<prefix>jobs`.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerPg: Layer.Layer<Notifier, never, QueueConfig | Database | PgClient.PgClient> = Layer.scoped(
  Notifier,
  Effect.gen(function*() {
    const pg = yield* PgClient.PgClient
    const sql = pg.withoutTransforms()
    return yield* make(
      (channel, onReady, onPayload) => PgListener.listen(pg.config, channel, onReady, onPayload),
      PgSession.notify(sql)
    )
  })
)
