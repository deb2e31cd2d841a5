/**
 * A worker's copy of a small table it must follow (the paused names, the run-time limits): read
 * when the worker starts, again whenever the Notifier says it changed (at once in this process, by
 * `NOTIFY` on PostgreSQL), and every `rescueInterval` of wall-clock time as the backstop (the only
 * way on MySQL/MariaDB).
 *
 * @internal
 */
import type * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Queue from "effect/Queue"
import type * as Scope from "effect/Scope"
import { QueueConfig } from "../services/QueueConfig.js"
import { Database } from "./Database.js"
import { forkScopedBounded } from "./outage.js"
import { wallSleep } from "./wallClock.js"

/**
 * Runs `refresh` now (before the worker's first claim) and then for the life of the scope, after
 * each change `listen` reports and every `rescueInterval`. A failed read is reported as `what`.
 */
export const follow = (
  what: string,
  refresh: Effect.Effect<void, unknown>,
  listen: (changed: () => void) => Effect.Effect<void, never, Scope.Scope>
): Effect.Effect<void, never, Scope.Scope | Database | QueueConfig> =>
  Effect.gen(function*() {
    const { reachability } = yield* Database
    const config = yield* QueueConfig
    const failed = (cause: Cause.Cause<unknown>) => reachability.failed(what, `sqlane: cannot read ${what}`, cause)
    yield* refresh.pipe(Effect.catchAllCause(failed))
    const changed = yield* Queue.sliding<void>(1)
    yield* listen(() => Queue.unsafeOffer(changed, undefined))
    // The backstop re-read every rescueInterval runs on the wall clock (not replayed by TestClock).
    yield* Effect.race(Queue.take(changed), wallSleep(config.rescueInterval)).pipe(
      Effect.zipRight(refresh),
      Effect.catchAllCause(failed),
      Effect.forever,
      Effect.annotateLogs({ package: "sqlane", module: "Worker" }),
      (effect) => forkScopedBounded(effect, 100)
    )
  })
