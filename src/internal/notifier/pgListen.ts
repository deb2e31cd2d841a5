/**
 * PostgreSQL `LISTEN/NOTIFY` between processes, for drivers with `capabilities.listenNotify`:
 *
 * - the NOTIFY limiter: an enqueue statement carries its own `NOTIFY` (its job names and priorities,
 *   never the payload) while this process sent fewer than `notifyBurst` within `notifyWindowMillis`;
 *   the names of the enqueues past that go out in one trailing `NOTIFY` when the window ends;
 * - the LISTEN source: one connection per Notifier (`channelListen`), opened by the first subscriber
 *   and kept for the Notifier's life; when it dies it is opened again with backoff (polling covers the
 *   gap), and each time LISTEN becomes active every subscriber probes, so a job enqueued meanwhile is
 *   not missed. Control messages go to the control plane, wake-ups to this instance's subscribers.
 *
 * The channel is `<prefix>jobs`. Source: River's notifier and its insert notification limiter.
 *
 * @internal
 */
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Queue from "effect/Queue"
import * as Runtime from "effect/Runtime"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import type { Enqueued } from "../../services/Notifier.js"
import { QueueConfig } from "../../services/QueueConfig.js"
import { Database } from "../Database.js"
import { bounded, forkInBounded, forkScopedBounded } from "../outage.js"
import { wallSleep } from "../wallClock.js"
import { cancelMessage, type Control, demandMessage, limitsMessage, pausesMessage } from "./control.js"
import { entryKey, type Hub, keyReleased, type Signal } from "./hub.js"
import type { Peers } from "./peers.js"

/**
 * The limiter's window (wall-clock ms): on PostgreSQL a transaction that notifies takes a
 * database-wide lock from its pre-commit to its end, so notifying commits cannot share a WAL flush:
 * one per enqueue would serialize every enqueue of the database.
 */
export const notifyWindowMillis = 10

/** `NOTIFY`s that ride inside enqueues within one {@link notifyWindowMillis}. */
export const notifyBurst = 3

/** The largest wake-up message sent as it is; a larger one is sent as `*` (everyone probes). */
const maxMessageChars = 7000

const encodeSignal = (entries: ReadonlyArray<Enqueued>): string => {
  if (entries.length === 1) {
    const json = JSON.stringify(entries)
    return json.length <= maxMessageChars ? json : "*"
  }
  const unique = new Map(entries.map((e) => [entryKey(e), e]))
  const json = JSON.stringify(Array.from(unique.values()))
  return json.length <= maxMessageChars ? json : "*"
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

export const make = (hub: Hub, control: Control): Effect.Effect<Peers, never, QueueConfig | Database | Scope.Scope> =>
  Effect.gen(function*() {
    const config = yield* QueueConfig
    const { reachability, driver } = yield* Database
    const scope = yield* Effect.scope
    // Log lines from the LISTEN client's callbacks go through the app's logger, not the default one.
    const runFork = Runtime.runFork(yield* Effect.runtime<never>())
    const channel = `${config.prefix}jobs`
    const send = (message: string) => Effect.ignore(driver.channelNotify(channel, message))

    // The limiter: a leading NOTIFY inside the enqueue, then one trailing NOTIFY (outside any
    // transaction, from this Notifier's own fiber) for the names enqueued during the window.
    let lastNotifyAt = -Infinity
    /** When the last `notifyBurst` NOTIFYs inside enqueues were sent (a ring, oldest at `ringAt`). */
    const ring: Array<number> = Array.from({ length: notifyBurst }, () => -Infinity)
    let ringAt = 0
    const trailing = new Map<string, Enqueued>()
    /** Releases (entries with `keyReleased`) trail in a message of their own: a release is not an enqueue. */
    const trailingReleases = new Map<string, Enqueued>()
    /** The trailing NOTIFY goes no earlier than this (wall-clock ms): after a caller's commit. */
    let trailNotBefore = 0
    const trailingSignal = yield* Queue.sliding<void>(1)
    /** The trailing messages: the enqueues', the releases', each when not empty. */
    const takeTrailing = () => {
      const messages = [trailing, trailingReleases].filter((m) => m.size > 0).map((m) => encodeSignal(Array.from(m.values())))
      trailing.clear()
      trailingReleases.clear()
      return messages
    }
    yield* Queue.take(trailingSignal).pipe(
      Effect.zipRight(Effect.suspend(() =>
        wallSleep(Math.max(0, Math.max(lastNotifyAt + notifyWindowMillis, trailNotBefore) - Date.now()))
      )),
      Effect.zipRight(Effect.suspend(() => {
        const messages = takeTrailing()
        lastNotifyAt = Date.now()
        return Effect.forEach(messages, send, { discard: true })
      })),
      Effect.forever,
      (effect) => forkScopedBounded(effect, 100)
    )
    // A process that enqueues and closes within a window (a script, a function) still tells the
    // others: what the window held is sent at once when the Notifier closes (at most 500 ms; not at
    // all while the database is unreachable).
    yield* Effect.addFinalizer(() =>
      Effect.suspend(() =>
        (trailing.size === 0 && trailingReleases.size === 0) || reachability.unreachable()
          ? Effect.void
          : Effect.ignore(bounded(Effect.forEach(takeTrailing(), send, { discard: true }), 500))
      )
    )

    const listening = yield* Deferred.make<void>()
    let started = false
    const start = Effect.suspend(() => {
      if (started) return Effect.void
      started = true
      let attempt = 0
      const onReady = () => {
        if (attempt++ > 0) runFork(Effect.logInfo("sqlane: LISTEN re-established"))
        Deferred.unsafeDone(listening, Effect.void)
        hub.deliverOwn("*")
      }
      const onPayload = (payload: string) => {
        if (control.receive(payload)) return
        const signal = decodeSignal(payload)
        if (signal !== undefined) hub.deliverOwn(signal)
      }
      return driver.channelListen(channel, onReady, onPayload).pipe(
        Effect.tapErrorCause((cause) =>
          reachability.failed("LISTEN", "sqlane: LISTEN connection lost; reconnecting", cause)
        ),
        Effect.retry(Schedule.exponential("100 millis").pipe(Schedule.union(Schedule.spaced("10 seconds")))),
        Effect.annotateLogs({ package: "sqlane", module: "Notifier", channel }),
        (effect) => forkInBounded(effect, scope, 100),
        Effect.asVoid
      )
    })

    return {
      notifyPayload: (entries) => {
        const now = Date.now()
        // Fewer than `notifyBurst` NOTIFYs in the window: this one rides inside the enqueue.
        if (now - ring[ringAt] >= notifyWindowMillis) {
          ring[ringAt] = now
          ringAt = (ringAt + 1) % notifyBurst
          lastNotifyAt = now
          return encodeSignal(entries)
        }
        return undefined
      },
      later: (entries, afterMillis) => {
        const into = entries.includes(keyReleased) ? trailingReleases : trailing
        for (const e of entries) into.set(entryKey(e), e)
        trailNotBefore = Math.max(trailNotBefore, Date.now() + afterMillis)
        Queue.unsafeOffer(trailingSignal, undefined)
      },
      wake: (entries) => (entries.length === 0 ? Effect.void : send(encodeSignal(entries))),
      cancelled: (ids) => (ids.length === 0 ? Effect.void : send(cancelMessage(ids))),
      pausesChanged: send(pausesMessage),
      limitsChanged: send(limitsMessage),
      wantsSlots: (demand) => send(demandMessage(demand)),
      start,
      ready: Deferred.await(listening)
    }
  })
