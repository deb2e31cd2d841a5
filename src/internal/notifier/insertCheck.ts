/**
 * The insert check, for databases without `LISTEN/NOTIFY` (MySQL/MariaDB): one fiber per Notifier
 * reads the newest job id (`jobNewestId`) every `insertCheckInterval` (100 ms) while this instance
 * has subscribers, and when it changed (or on its first reading) wakes them all to probe, so jobs
 * enqueued by other processes start without waiting for the poll. While a subscriber waits for
 * releases (a worker with mutex keys or limits), it also reads the slots and mutex keys running
 * attempts hold (`slotsHeld`), and a count that fell since the last reading wakes those subscribers
 * as a release: a slot or key freed by another process is taken without waiting for the poll. It
 * sends nothing: cancellations and pauses reach other processes by their own passes.
 *
 * The fiber is started by the first subscriber and kept for the Notifier's life. Wall-clock sleeps:
 * it decides when to look, never when a job is due, so it behaves the same under `TestClock`. Its
 * statements make no spans (10 a second would drown a trace exporter).
 *
 * @internal
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { QueueConfig } from "../../services/QueueConfig.js"
import { Database } from "../Database.js"
import { forkInBounded } from "../outage.js"
import { wallSleep } from "../wallClock.js"
import { type Hub, keyReleased } from "./hub.js"
import { type Peers, silent } from "./peers.js"

export const make = (hub: Hub): Effect.Effect<Peers, never, QueueConfig | Database | Scope.Scope> =>
  Effect.gen(function*() {
    const config = yield* QueueConfig
    const { reachability, driver } = yield* Database
    const scope = yield* Effect.scope
    let started = false
    const intervalMillis = Duration.toMillis(config.insertCheckInterval)
    const start = Effect.suspend(() => {
      if (started || !Number.isFinite(intervalMillis)) return Effect.void
      started = true
      /** The newest id seen; `undefined`: none yet, so the next reading wakes everyone (a job may have
       * committed between a new subscriber's first probe and this reading). */
      let seen: string | null | undefined
      /** The slots and keys held at the last reading (`slotsHeld`), while a subscriber waits for releases. */
      let held: ReadonlyMap<string, number> | undefined
      /** Reads the slots and keys held; a count that fell since the last reading wakes the subscribers waiting for releases. */
      const releases = Effect.suspend(() => {
        const names = hub.releaseNames()
        if (names.length === 0 || driver.slotsHeld === undefined) {
          held = undefined
          return Effect.void
        }
        return Effect.map(driver.slotsHeld(names), (rows) => {
          const now = new Map(rows.map((r) => [r.key, r.held]))
          if (held !== undefined) {
            for (const [key, n] of held) {
              if ((now.get(key) ?? 0) < n) {
                hub.deliverOwn([keyReleased])
                break
              }
            }
          }
          held = now
        })
      })
      let failures = 0
      const check = Effect.suspend(() => {
        if (!hub.subscribed()) {
          seen = held = undefined
          return Effect.void
        }
        return driver.jobNewestId().pipe(
          Effect.map((newest) => {
            if (newest !== seen) hub.deliverOwn("*")
            seen = newest
          }),
          Effect.zipRight(releases),
          Effect.tap(() => {
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
          wallSleep(failures === 0 ? intervalMillis : Math.min(5000, intervalMillis * 2 ** Math.min(failures, 10)))
        )),
        Effect.forever,
        Effect.withTracerEnabled(false),
        Effect.annotateLogs({ package: "sqlane", module: "Notifier" }),
        (effect) => forkInBounded(effect, scope, 100),
        Effect.asVoid
      )
    })
    return { ...silent, start }
  })
