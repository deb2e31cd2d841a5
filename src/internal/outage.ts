/**
 * Living with a database that is gone: telling a lost connection from other failures, saying so
 * once rather than at every retry, and closing within a bound whatever the database does.
 *
 * - `Reachability`, one per `QueueLive`: the background fibers (worker locks and heartbeats,
 *   rescuers, the Completer, LISTEN, the insert check, paused names) report their failures to it.
 *   The first failure to reach the database is logged once at `Warning`, later ones at `Debug`,
 *   and the first success after them at `Info`; other failures are logged as they come.
 * - `forkScopedBounded` and `bounded`: a close waits a bounded time for a fiber or a statement.
 *   Interrupting a statement in flight is not immediate: `@effect/sql-pg` cancels it with
 *   `pg_cancel_backend` on a new connection and waits up to 5 s for that, and with the server gone
 *   (or its packets dropped) the statement itself never answers.
 *
 * @internal
 */
import { SqlError } from "@effect/sql/SqlError"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Scope from "effect/Scope"
import { errorKind, errorKindOfCause, isTransient, isTransientCause } from "./driver/errors.js"
import { wallSleep } from "./wallClock.js"

/**
 * Whether `error` says the database could not be reached or the connection is gone (`errorKind`
 * "unavailable", a deadlock aside), or is a timeout of our own — not that it refused a statement.
 */
export const isConnectionError = (error: unknown): boolean => {
  if (typeof error !== "object" || error === null) return false
  const tag = (error as { _tag?: unknown })._tag
  if (tag === "TimeoutException") return true
  // The LISTEN connection's failures carry the driver's error as their cause.
  if (tag === "ListenError") {
    const cause = (error as Error).cause
    return errorKindOfCause(cause) === "unavailable" && !isTransientCause(cause)
  }
  if (!(error instanceof SqlError)) return false
  return errorKind(error) === "unavailable" && !isTransient(error)
}

/** The first line of what failed, for a one-line log. */
const firstLine = (cause: Cause.Cause<unknown>): string => {
  const failure = Option.orElse(Cause.failureOption(cause), () => Cause.dieOption(cause))
  const value: any = Option.getOrUndefined(failure)
  const inner = value?.cause?.message ?? value?.message ?? Cause.pretty(cause)
  return String(inner).split("\n")[0]
}

export interface Reachability {
  /**
   * Logs a failure of `what` (e.g. "worker lock"): a lost connection once per outage, anything else
   * at `Warning` with `message` and its cause. `retrying: false` for a failure at close, which is
   * not tried again.
   */
  readonly failed: (
    what: string,
    message: string,
    cause: Cause.Cause<unknown>,
    retrying?: boolean
  ) => Effect.Effect<void>
  /** A statement answered: ends an outage (logged once). */
  readonly succeeded: Effect.Effect<void>
  /** Whether the last word on the database was a failure to reach it. */
  readonly unreachable: () => boolean
  /**
   * Whether the database answers: `true` at once unless it was unreachable; then it is asked once
   * more (`ping`), waiting at most `millis` of wall-clock time, and an answer ends the outage. For a
   * close, which skips the database while it is unreachable: it may have come back meanwhile.
   */
  readonly recheck: (millis: number) => Effect.Effect<boolean>
}

/** `ping`: a statement that only needs the database to answer (`SELECT 1`). */
export const makeReachability = (ping: Effect.Effect<unknown, unknown>): Reachability => {
  let down = false
  const succeeded = Effect.suspend(() => {
    if (!down) return Effect.void
    down = false
    return Effect.logInfo("sqlane: the database answers again")
  })
  return {
    failed: (what, message, cause, retrying = true) =>
      Effect.suspend(() => {
        if (Cause.isInterruptedOnly(cause)) return Effect.void
        const failure = Option.getOrUndefined(Option.orElse(Cause.failureOption(cause), () => Cause.dieOption(cause)))
        if (!isConnectionError(failure)) return Effect.logWarning(message, cause)
        if (down) return Effect.logDebug(`sqlane: ${what}: the database is still unreachable`, cause)
        down = true
        return Effect.logWarning(
          `sqlane: the database is unreachable (${what}: ${firstLine(cause)})${retrying ? "; retrying until it answers" : ""}`
        )
      }),
    succeeded,
    unreachable: () => down,
    recheck: (millis) =>
      Effect.suspend(() => {
        if (!down) return Effect.succeed(true)
        return bounded(Effect.either(ping), millis).pipe(
          Effect.flatMap((answer) =>
            answer._tag === "Some" && answer.value._tag === "Right" ? Effect.as(succeeded, true) : Effect.succeed(false)
          )
        )
      })
  }
}

/**
 * Waits for `effect` at most `millis` of wall-clock time (whatever `Clock` the caller runs under);
 * if it has not ended by then it is left to end on its own, interrupted, and `None` is returned.
 * For statements at close: their answer may never come.
 */
export const bounded = <A, E, R>(effect: Effect.Effect<A, E, R>, millis: number): Effect.Effect<Option.Option<A>, E, R> =>
  Effect.raceFirst(
    // `disconnect` restores the caller's interruptibility around its join: in a finalizer (run
    // uninterruptibly) the race could not stop waiting without the outer `interruptible`.
    Effect.map(Effect.interruptible(Effect.disconnect(effect)), Option.some),
    Effect.as(Effect.interruptible(wallSleep(millis)), Option.none<A>())
  )

/**
 * `Effect.forkScoped`, except that the scope's close waits at most `millis` (wall clock) for the
 * fiber to stop; a fiber still stopping then (a statement in flight to a database that does not
 * answer) ends on its own.
 */
export const forkScopedBounded = <A, E, R>(
  effect: Effect.Effect<A, E, R>,
  millis: number
): Effect.Effect<Fiber.RuntimeFiber<A, E>, never, R | Scope.Scope> =>
  Effect.gen(function*() {
    const fiber = yield* Effect.forkDaemon(Effect.interruptible(effect))
    yield* Effect.addFinalizer(() => stopWithin(fiber, millis))
    return fiber
  })

/** `Effect.forkIn(scope)`, except that the scope's close waits at most `millis` (wall clock) for the fiber to stop. */
export const forkInBounded = <A, E, R>(
  effect: Effect.Effect<A, E, R>,
  scope: Scope.Scope,
  millis: number
): Effect.Effect<Fiber.RuntimeFiber<A, E>, never, R> =>
  Effect.gen(function*() {
    const fiber = yield* Effect.forkDaemon(Effect.interruptible(effect))
    yield* Scope.addFinalizer(scope, stopWithin(fiber, millis))
    return fiber
  })

const stopWithin = (fiber: Fiber.RuntimeFiber<unknown, unknown>, millis: number) =>
  Effect.zipRight(
    Fiber.interruptFork(fiber),
    Effect.raceFirst(Effect.interruptible(Fiber.await(fiber)), Effect.interruptible(wallSleep(millis)))
  )

/** Job ids for a log line: the first 20, then "…". */
export const idList = (ids: ReadonlyArray<string>): string =>
  `${ids.slice(0, 20).join(", ")}${ids.length > 20 ? ", …" : ""}`
