/**
 * A worker's graceful shutdown, run when its scope closes — after the rescuer has stopped, before
 * liveness ends: stop claiming (a claim in flight releases what it brings back), wait for running
 * jobs up to `shutdownTimeout` (keeping liveness and heartbeats meanwhile), then interrupt the rest
 * and release them (back to pending, the attempt not counted). Every wait past `shutdownTimeout` is
 * bounded on the wall clock, and skipped while the database is unreachable: the ends not written by
 * then are the Completer's, and jobs left `running` go to the rescuers of other workers.
 *
 * @internal
 */
import * as Cause from "effect/Cause"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import { Database } from "../Database.js"
import { bounded, idList } from "../outage.js"
import { wallSleep } from "../wallClock.js"
import type { Slots } from "./slots.js"

/** After `shutdownTimeout`, how long the releases of interrupted jobs may take to be written. */
const releaseMillis = 500
/** At shutdown, how long a database found unreachable may take to answer once more (`Reachability.recheck`). */
const recheckMillis = 300

/** What the shutdown needs of its worker. */
export interface ShutdownHost {
  readonly workerId: string
  readonly slots: Slots
  readonly shutdownTimeout: Duration.Duration
  /** Stops claiming: jobs a claim in flight brings back are released. */
  readonly stop: () => void
  /** The claim loop's fiber, once forked. */
  readonly loopFiber: () => Fiber.RuntimeFiber<unknown, unknown> | undefined
}

/** Adds the graceful shutdown of a worker to the scope's finalizers. */
export const onClose = (host: ShutdownHost): Effect.Effect<void, never, Database | Scope.Scope> =>
  Effect.gen(function*() {
    const { reachability } = yield* Database
    const { shutdownTimeout, slots, workerId } = host
    const { claiming, inflight } = slots
    /**
     * Every handler has ended, and their ends wait for a database that is unreachable: nothing is left
     * to wait for at shutdown (those jobs stay running, for the rescuers of other workers).
     */
    const handlersDoneButUnwritable = Effect.gen(function*() {
      while (!(inflight.size === 0 && reachability.unreachable())) yield* wallSleep(20)
    })
    /** Every handler has ended (after their interruption at shutdown). */
    const handlersStopped = Effect.gen(function*() {
      while (inflight.size > 0) yield* wallSleep(5)
    })
    /** Every job this worker holds is one whose handler still runs: the others' ends are written. */
    const stoppedEndsWritten = Effect.gen(function*() {
      while (Array.from(claiming.keys()).some((id) => !inflight.has(id))) yield* wallSleep(5)
    })
    yield* Effect.addFinalizer(() =>
      Effect.gen(function*() {
        host.stop()
        const loopFiber = host.loopFiber()
        if (loopFiber !== undefined) yield* Fiber.interruptFork(loopFiber)
        // Finalizers run uninterruptibly: the waits are made interruptible so their timeouts work.
        const finished = yield* Effect.interruptible(Effect.raceFirst(slots.awaitIdle, handlersDoneButUnwritable)).pipe(
          Effect.timeoutOption(shutdownTimeout)
        )
        // The loop stopped meanwhile unless a claim of it is in flight to a database that does not answer.
        const loopDone = loopFiber === undefined ? Effect.void : Effect.asVoid(Fiber.await(loopFiber))
        const loopStopped = loopFiber === undefined || Option.isSome(yield* Fiber.poll(loopFiber))
        if (Option.isSome(finished) && loopStopped) return
        if (inflight.size > 0) {
          yield* Effect.logInfo(`sqlane: shutdown timeout; releasing ${inflight.size} running job(s)`)
        }
        for (const entry of inflight.values()) entry.reason = "shutdown"
        yield* Effect.forEach(Array.from(inflight.values()), (e) => Fiber.interruptFork(e.fiber), { discard: true })
        // Writing the releases needs the database: wait for them at most `releaseMillis` (wall clock),
        // and not at all while it is unreachable (asked once more first: it may be back by now). The
        // ends not written by then are the Completer's: it writes them, or says at its close which
        // it could not.
        if (yield* reachability.recheck(recheckMillis)) {
          // The handlers stop first (one that does not stop keeps its job, and says nothing of the
          // database); then the ends of those that stopped are written, or the database did not answer.
          yield* bounded(handlersStopped, releaseMillis)
          if (Option.isNone(yield* bounded(Effect.zipRight(loopDone, stoppedEndsWritten), releaseMillis))) {
            // No answer: what else closes skips the database too.
            yield* reachability.failed(
              "releasing jobs at shutdown",
              "",
              Cause.fail(new Cause.TimeoutException(`no answer within ${releaseMillis} ms`)),
              false
            )
          }
        } else yield* bounded(handlersStopped, 100)
        if (inflight.size > 0) {
          const ids = Array.from(inflight.keys())
          yield* Effect.logWarning(
            `sqlane: shutdown: ${ids.length} handler(s) did not stop when interrupted; their jobs stay running ` +
              `until other workers rescue them as a lost worker's: ${idList(ids)}`
          )
        }
        if (claiming.size > inflight.size) {
          yield* Effect.logDebug(`sqlane: shutdown: ${claiming.size - inflight.size} job end(s) not written yet`)
        }
      }).pipe(Effect.annotateLogs({ package: "sqlane", module: "Worker", "sqlane.worker.id": workerId }))
    )
  })
