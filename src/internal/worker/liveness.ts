/**
 * A worker's liveness: its session lock on a connection of its own, its row in `<prefix>workers` and
 * its heartbeat — and the rules by which rescuers tell a dead worker from one whose lock connection
 * was cut (`lockGraceMillis`).
 *
 * @internal
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as os from "node:os"
import { Database } from "../Database.js"
import type { NameLimits } from "../driver/Driver.js"
import { bounded, forkScopedBounded } from "../outage.js"
import { nowMicros } from "../time.js"
import { wallSleep } from "../wallClock.js"
import { QueueConfig } from "../../services/QueueConfig.js"
import { InvalidWorkerOptions } from "../../schema/Errors.js"

/**
 * How often, at least, a worker checks its lock's connection (`SELECT 1` on it): every
 * `min(100 ms, rescueInterval / 2, heartbeatInterval)`. Rescuers of every configuration count on it
 * (see {@link lockGraceMillis}).
 */
const lockCheckMaxMillis = 100

/**
 * The quick rule: a running job whose worker's session lock is free (its heartbeat fresh) is rescued
 * when a pass finds the lock still free at least `lockGraceMillis` (wall clock) after a pass first
 * found it free, the worker's row does not say it is taking its lock again (`relocking`), and the
 * row's `relocks` is unchanged since that first sight. The rescuer runs that check as a pass of its
 * own, between two passes `rescueInterval` apart: recovery from a crash is the wait for the next pass
 * (half a `rescueInterval` on average), plus `lockGraceMillis`, plus the rescue's write.
 *
 * A live worker whose lock connection was cut notices within {@link lockCheckMaxMillis}, and marks
 * its row `relocking` (through its pool) before it takes its lock again; taking it again clears the
 * mark and adds one to `relocks`. The 900 ms beyond its check cover the mark's write, or, when the
 * mark cannot be written (the pool's connections were cut in the same moment), the wait for it
 * (`relockMarkMillis`, 200 ms) and taking the lock again on a new connection — a few ms on an
 * idle machine, but measured at about 700 ms from the cut (the 200 ms wait included) for a worker
 * process a second old on a loaded 2-core machine (the soak), whose pool had to open new
 * connections: a grace of 300 ms let a rescuer take that worker's just-finished jobs, which then ran
 * twice. (A worker of an earlier sqlane version, during a rolling upgrade, checks every
 * `rescueInterval / 2` and writes no mark: it takes its lock again well inside the grace.)
 *
 * Why a live worker keeps its jobs: say a pass answered at `a` first found the lock of worker W free,
 * with `relocks` = `c`: the statement read the row (as of its start), then found the lock free at
 * `o <= a`, in a free period that began at `T <= o`. W notices by `T + lockCheckMaxMillis` and its mark commits before
 * `T + lockGraceMillis`. It takes its lock again after `o`, and only then clears the mark and sets
 * `relocks` to `c + 1` (which `c`, read before `o`, does not include). A later pass sent at
 * `b >= a + lockGraceMillis` reads the row after `b`, so after the mark committed: it finds
 * `relocking`, or, once the clear committed, `relocks` changed. Only a worker that noticed nothing, or
 * could not write its mark, within the grace — a dead one, or one cut off from the database — passes.
 * `relocks` matters when the lock connection is cut again soon after W took its lock again: the free
 * lock the later pass sees is then a new free period, not yet noticed by W.
 *
 * The server restarts (or fails over; any event that cuts every connection at once): every lock is free
 * when it is back, and every row says nothing — its workers' marks could not be written while it was
 * down. A rescuer's first sight comes after the server is back (`S`); each worker, having found its lock
 * connection lost while the server was down, tries to take its lock again every `lockCheckMaxMillis`
 * or so (plus what a failed try takes: little while the server refuses connections) and succeeds with
 * its first try after `S`, which needs a new connection and a few round trips: within the grace. The rescuer also lost its own lock connection then: it applies
 * the quick rule only to sights made at least `lockGraceMillis` after it took its own lock again (see
 * `steadySinceMs` of `liveness`), so a worker that comes back up to `2 × lockGraceMillis` later than
 * the rescuer itself still keeps its jobs. A rescuer whose lock has been held since its own start
 * counts as steady from then (`steadySinceMs` 0): a worker process started just after the server came
 * back gives the others one grace from its first sight, not two.
 *
 * The pass rule stays: a job whose worker's lock `lockGracePasses` passes in a row (the quick passes
 * not counted; `relocks` unchanged) found free, the last sent at least {@link lockGraceMarkedMillis}
 * after the first sight, is rescued whatever `relocking` says — a worker that died while taking its
 * lock again stays marked, and is rescued about `max(2 × rescueInterval, 2 s)` after the first sight. A worker whose
 * event loop is blocked for longer than the grace while its lock connection is cut may lose its jobs
 * (their writes are fenced by the attempt, and the attempt still running there is interrupted).
 */
export const lockGraceMillis = 1000

/**
 * The pass rule (see {@link lockGraceMillis}): rescued by the `lockGracePasses`-th pass in a row that
 * finds the lock free, sent at least {@link lockGraceMarkedMillis} after the first sight — about
 * `max(2 × rescueInterval, 2 s)` after it.
 */
export const lockGracePasses = 3

/** The pass rule's least wait from the first sight (wall clock, ms): a worker whose row says `relocking` gets this long. */
export const lockGraceMarkedMillis = 2 * lockGraceMillis

/** How long a worker waits, at most, for its row's `relocking` mark (or its clear) to be written. */
const relockMarkMillis = 200

/**
 * A worker's liveness for the life of the scope: a session lock (`pg_advisory_lock` /
 * `GET_LOCK`) on a connection reserved from the pool, a row in `<prefix>workers`, and a heartbeat
 * every `heartbeatInterval`. If the lock's connection fails, the lock is taken again on a new one.
 *
 * When the worker's process dies the server closes its connection and frees the lock at once, so
 * other workers rescue its jobs within `rescueInterval + lockGraceMillis`. When its lock connection
 * alone is cut, it marks its row `relocking` and takes its lock again, and keeps its jobs (see
 * `lockGraceMillis`). When its host freezes or is cut off, the
 * lock stays held until the server drops the connection (TCP keepalive), but the heartbeat stops:
 * its jobs are rescued after `leaseTimeout`.
 */
export const liveness = (
  workerId: string,
  jobNames: ReadonlyArray<string>,
  /** The concurrency limits of its job definitions, published in its row. */
  jobLimits: ReadonlyMap<string, NameLimits>,
  onHeartbeat: Effect.Effect<void>,
  onIdTaken: Effect.Effect<void>,
  stopping: () => boolean
) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const config = yield* QueueConfig
    const { reachability, driver } = yield* Database
    const [lockSql, lockParams] = driver.workerLockStatement(workerId)
    /** How often the lock's connection is checked, and the longest wait between attempts to take the lock again. */
    const checkMillis = Math.max(
      10,
      Math.min(lockCheckMaxMillis, Duration.toMillis(config.rescueInterval) / 2, Duration.toMillis(config.heartbeatInterval))
    )
    /** How long the check waits for an answer (wall clock) before it counts the connection as lost. */
    const checkAnswerMillis = Math.max(2000, 4 * checkMillis)
    const unlockSql = driver.workerUnlockSql
    /** The connection that held the lock last (`pg_backend_pid()` / `CONNECTION_ID()`). */
    let heldBy: number | undefined
    /**
     * Since when (wall clock, ms) the lock has been held without a break: 0 when since the start,
     * undefined while it is being taken again. The rescuer's quick rule reads it (see `lockGraceMillis`).
     */
    let steadySinceMs: number | undefined
    /** The lock's connection was found lost after the start: the lock is being taken again. */
    let relocking = false
    const marked = (statement: Effect.Effect<void, unknown>) =>
      Effect.raceFirst(Effect.ignore(statement), wallSleep(relockMarkMillis))
    /** The lock's connection was found lost, or a try to take the lock again failed: mark the row. */
    const lockLost = Effect.suspend(() => {
      if (steadySinceMs === undefined && !relocking) return Effect.void // not taken yet: the start
      steadySinceMs = undefined
      relocking = true
      return marked(driver.workerRelocking(workerId))
    })
    /** The lock was taken: when again, the mark is cleared and `relocks` counts it. */
    const lockTaken = Effect.suspend(() => {
      if (!relocking) return Effect.sync(() => void (steadySinceMs = 0))
      relocking = false
      steadySinceMs = Date.now()
      return marked(driver.workerRelocked(workerId))
    })
    /**
     * The lock is held by someone else. If that is this worker's own earlier connection — cut on the
     * client's side while the server still runs its session (a network failure without a FIN) — end
     * it and try again; otherwise another live worker has this id.
     */
    const lockHeld = Effect.gen(function*() {
      const holder = yield* driver.workerLockHolder(workerId)
      if (holder !== null && holder === heldBy) {
        yield* Effect.ignore(driver.endConnection(holder))
        return yield* Effect.fail(new Error("sqlane: the worker's earlier lock connection still held its lock; ended it"))
      }
      // Freed meanwhile: try again.
      if (holder === null) return yield* Effect.fail(new Error("sqlane: the worker's lock was freed meanwhile"))
      // A defect here, so that the retries below stop; the start fails with it (see `acquired`).
      return yield* Effect.die(
        new InvalidWorkerOptions({
          option: "id",
          reason: "inUse",
          message: `worker id "${workerId}" is in use by another live worker; give each worker its own id`
        })
      )
    })
    const hold = (acquired: Deferred.Deferred<void>) =>
      Effect.gen(function*() {
        const conn = yield* sql.reserve
        /** The lock connection's check got no answer. */
        let silent = false
        const connectionId = Number((yield* conn.executeValues(driver.connectionIdStatement, []))[0]?.[0])
        yield* Effect.acquireRelease(
          conn.executeValues(lockSql, lockParams).pipe(
            Effect.flatMap((rows: ReadonlyArray<ReadonlyArray<unknown>>) => {
              const got = rows[0]?.[0]
              return got === true || Number(got) === 1 ? Effect.sync(() => void (heldBy = connectionId)) : lockHeld
            })
          ),
          // Not worth waiting for with the database gone: the server frees the lock with the connection.
          // Nor on a connection that stopped answering (its check is still in flight). At the worker's
          // end (this fiber interrupted) its row goes first, while it still holds the id, so a process
          // that takes the id once the lock is free (and writes its row when it does) keeps its row.
          (_, exit) =>
            reachability.unreachable() || silent
              ? Effect.void
              : Effect.zipRight(
                Exit.isInterrupted(exit) ? removeRow : Effect.void,
                Effect.ignore(bounded(conn.executeRaw(unlockSql, lockParams), 500))
              )
        )
        yield* lockTaken
        if (!(yield* Deferred.isDone(acquired))) {
          // The row once more, now that this worker holds its id: a worker that had the id before
          // may have marked it ended (its end) after this one registered and before it took the lock.
          yield* driver.workerHeartbeat(workerId, yield* nowMicros, started)
          ownsRow = true
          yield* Deferred.succeed(acquired, undefined)
        }
        if (lost) {
          lost = false
          yield* Effect.logInfo("sqlane: worker lock taken again")
        }
        yield* reachability.succeeded
        // Check the lock's connection every `checkMillis` (a failure marks the row and re-acquires
        // the lock, before rescuers take the jobs: see `lockGraceMillis`), and heartbeat when due: at
        // once when the lock was taken again (the row may be gone — pruned while this worker was cut
        // off — and the `relocked` write above finds none), else a `heartbeatInterval` after the start.
        let beatAtMs = (yield* Clock.currentTimeMillis) + (holds === 0 ? Duration.toMillis(config.heartbeatInterval) : 0)
        holds++
        while (true) {
          // The check's cadence is wall-clock time (housekeeping, like the rescuer's and the pruner's):
          // under TestClock an `adjust` must not replay it; the heartbeat stays on Effect's Clock.
          yield* wallSleep(checkMillis)
          // A connection that does not answer (packets dropped) counts as lost, like a closed one.
          const answered = yield* bounded(conn.executeRaw(driver.connectionCheckStatement, []), checkAnswerMillis)
          if (Option.isNone(answered)) {
            silent = true
            return yield* Effect.fail(
              new Cause.TimeoutException(`the worker's lock connection did not answer within ${checkAnswerMillis} ms`)
            )
          }
          yield* reachability.succeeded
          if ((yield* Clock.currentTimeMillis) < beatAtMs) continue
          beatAtMs = (yield* Clock.currentTimeMillis) + Duration.toMillis(config.heartbeatInterval)
          // A stopping worker's row is about to be removed: a heartbeat in flight must not write it again.
          yield* driver.workerHeartbeat(workerId, yield* nowMicros, stopping() ? undefined : started)
          yield* onHeartbeat
        }
      }).pipe(Effect.scoped)
    /** The lock was lost and is not yet taken again (logged once per loss). */
    let lost = false
    /** How many times the lock was taken: 0 before the start. */
    let holds = 0
    const nowUs = yield* nowMicros
    // The row; a heartbeat writes it again if it is gone (pruned while this worker was stopped).
    const started = { startedAtUs: nowUs, host: os.hostname(), pid: process.pid, jobNames, jobLimits }
    yield* driver.workerRegister(workerId, nowUs, started.host, started.pid, jobNames, jobLimits)
    /** This worker took its lock, and no other live worker took its id since: the row is its own. */
    let ownsRow = false
    /**
     * Removes the row at the worker's end, once: before its lock is released (see `hold`), or, when
     * the lock was not held then, after. With the database gone the row stays; rescuers and the
     * pruner of worker rows handle it. A worker that never took its lock (its id is in use) or whose
     * id was taken leaves the row to the other.
     */
    const removeRow = Effect.suspend(() => {
      if (reachability.unreachable() || !ownsRow) return Effect.void
      ownsRow = false
      return Effect.ignore(bounded(driver.workerRemove(workerId), 500))
    })
    yield* Effect.addFinalizer(() => removeRow)
    const acquired = yield* Deferred.make<void>()
    // A defect (the id is taken) fails the start; connection failures are retried. After the start,
    // the id taken by another live worker while this one took its lock again (its connection was
    // cut) means two workers share an id: this one stops claiming (`onIdTaken`), since the other's
    // rescuer now sees this one's jobs as its own.
    yield* hold(acquired).pipe(
      Effect.catchAllDefect((defect) =>
        Effect.flatMap(Deferred.isDone(acquired), (started) =>
          started
            ? Effect.zipRight(
              Effect.logError(
                `sqlane: worker id "${workerId}" was taken by another live worker while this one took its lock again; ` +
                  "this worker stops claiming (give each worker its own id)"
              ),
              Effect.zipRight(Effect.sync(() => void (ownsRow = false)), onIdTaken)
            )
            : Deferred.die(acquired, defect))
      ),
      Effect.tapErrorCause(() => lockLost),
      // Once per loss (a lost connection to a database that is gone: once per outage), not per retry.
      Effect.tapErrorCause((cause) =>
        lost ? Effect.logDebug("sqlane: worker lock not taken yet", cause) : Effect.zipRight(
          Effect.sync(() => void (lost = true)),
          reachability.failed("worker lock", "sqlane: worker lock connection lost; taking the lock again", cause)
        )
      ),
      // A worker that is stopping does not take its lock again: its jobs are rescued as a lost worker's.
      Effect.retry({
        schedule: Schedule.exponential("50 millis").pipe(Schedule.union(Schedule.spaced(checkMillis))),
        while: () => !stopping()
      }),
      Effect.ignore,
      Effect.annotateLogs({ package: "sqlane", module: "Worker", "sqlane.worker.id": workerId }),
      // The close waits for the row's removal and the unlock (500 ms at most each; none with the
      // database gone).
      (effect) => forkScopedBounded(effect, 1000)
    )
    yield* Deferred.await(acquired).pipe(
      Effect.catchSomeDefect((defect) =>
        defect instanceof InvalidWorkerOptions ? Option.some(Effect.fail(defect)) : Option.none()
      )
    )
    return { steadySinceMs: () => steadySinceMs }
  }).pipe(Effect.catchAll((error) => error instanceof InvalidWorkerOptions ? Effect.fail(error) : Effect.die(error)))

