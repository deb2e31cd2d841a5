/**
 * The in-process hub of wake-ups: every worker of this process on one database and table prefix
 * subscribes here, and a queue instance that wrote jobs tells them all at once (a hint). What other
 * processes say reaches only the subscribers of the instance that heard it (`deliverOwn`): each
 * listening instance hears every message once.
 *
 * A subscription coalesces its wake-ups: the groups due now (claimable without a probe) and whether
 * a probe is needed, drained by each `take`.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import { globalValue } from "effect/GlobalValue"
import * as Queue from "effect/Queue"
import type * as Scope from "effect/Scope"
import type { Enqueued, Wake, Wakeups } from "../../services/Notifier.js"
import type { Group } from "../driver/Driver.js"

/** A wake-up as delivered: the entries of one or more enqueues, or `*` (everyone probes). */
export type Signal = ReadonlyArray<Enqueued> | "*"

interface Subscriber {
  readonly deliver: (signal: Signal) => void
  readonly handled: ReadonlySet<string>
}

/** The pseudo job name an end that releases a key or a limit slot is announced with (`Notifier.keyReleased`). */
export const keyReleased = "\u0001sqlane:key-released"

/** Workers of this process, by database and table prefix: the in-process hint reaches every queue instance. */
const localSubscribers = globalValue(
  Symbol.for("sqlane/Notifier/localSubscribers"),
  () => new Map<string, Set<Subscriber>>()
)

const deliver = (subscribers: Iterable<Subscriber>, signal: Signal) => {
  for (const s of subscribers) s.deliver(signal)
}

/** The key of `entry` among the entries of one signal: one per job name, one per (name, priority). */
export const entryKey = (entry: Enqueued): string => typeof entry === "string" ? entry : `${entry[1]}:${entry[0]}`

export interface Hub {
  /** Delivers `signal` to every subscriber of this process on the same database and prefix. */
  readonly hint: (signal: Signal) => void
  /** Delivers `signal` to this instance's subscribers (what this instance heard from other processes). */
  readonly deliverOwn: (signal: Signal) => void
  /** Whether this instance has subscribers now. */
  readonly subscribed: () => boolean
  /** The job names of this instance's subscribers that wait for releases ({@link keyReleased}). */
  readonly releaseNames: () => ReadonlyArray<string>
  /**
   * Subscribes to wake-ups for `names` for the life of the scope; `start` (run after the
   * subscription is in place) starts what hears other processes, `ready` completes once it hears.
   */
  readonly subscribe: (
    names: ReadonlyArray<string>,
    start: Effect.Effect<void>,
    ready: Effect.Effect<void>
  ) => Effect.Effect<Wakeups, never, Scope.Scope>
}

/** The hub of one queue instance; `key` names its database and table prefix. */
export const make = (key: string): Hub => {
  const local = localSubscribers.get(key) ?? new Set<Subscriber>()
  localSubscribers.set(key, local)
  /** This instance's own subscribers: a message from another process reaches them once per listening instance. */
  const own = new Set<Subscriber>()
  return {
    hint: (signal) => deliver(local, signal),
    deliverOwn: (signal) => deliver(own, signal),
    subscribed: () => own.size > 0,
    releaseNames: () => {
      const names = new Set<string>()
      for (const s of own) {
        if (!s.handled.has(keyReleased)) continue
        for (const n of s.handled) if (n !== keyReleased) names.add(n)
      }
      return Array.from(names)
    },
    subscribe: (names, start, ready) =>
      Effect.gen(function*() {
        const handled = new Set(names)
        const signal = yield* Queue.sliding<void>(1)
        let groups = new Map<string, Group>()
        let probe = false
        let released = false
        const subscriber: Subscriber = {
          handled,
          deliver: (received) => {
            let woken = false
            if (received === "*") {
              probe = woken = true
            } else {
              // An end's release names its job names and `keyReleased` (sent apart from enqueues,
              // `pgListen.ts`): a release, not a probe.
              const releases = received.includes(keyReleased)
              for (const e of received) {
                if (typeof e === "string") {
                  if (!handled.has(e)) continue
                  woken = true
                  if (releases) released = true
                  else probe = true
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
        yield* start
        const drain = (): Wake => {
          const wake: Wake = { groups: Array.from(groups.values()), probe, released }
          groups = new Map()
          probe = released = false
          return wake
        }
        return {
          take: Effect.map(Queue.take(signal), drain),
          poll: Effect.map(Queue.poll(signal), (o) => (o._tag === "Some" ? drain() : undefined)),
          wake: Effect.sync(() => subscriber.deliver("*")),
          ready
        }
      })
  }
}
