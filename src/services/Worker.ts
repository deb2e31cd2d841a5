/**
 * Runs jobs: claims due jobs of the job names it has handlers for and runs each on a fiber,
 * at most `concurrency` at a time. It never claims more jobs than it has free slots; a slot is
 * free again once the attempt's end is written.
 *
 * The loop: wait for a free slot; probe which names have due jobs; claim up to the free slots;
 * if the claim filled every slot, claim again as soon as slots free (without a probe); otherwise
 * sleep until a wake-up (in-process hint, PostgreSQL `NOTIFY`, or `LISTEN` re-established), the
 * next pending job's `run_at`, or the jittered poll (`pollInterval`), whichever comes first.
 * While a backlog lasts, the claims are made with the writes of the worker's ends: one transaction
 * and one commit end a batch of attempts and claim the slots they free (`Claimer.finishAndClaim`,
 * called by the Completer's batch), so the slots are never over-filled and the claim costs no
 * commit of its own.
 *
 * A handler's typed failure or defect is recorded as the attempt's error; the job is retried at
 * the time its retry `Schedule` gives, or dead-lettered when the schedule is done or the failure
 * is permanent. A payload that does not decode dead-letters the job with the decode error.
 * All times come from Effect's `Clock`.
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import { type Claimant, type ClaimAnswer } from "../internal/claimsOnEnds.js"
import { Database, poolSizeOf } from "../internal/Database.js"
import { bounded, idList } from "../internal/outage.js"
import { wallSleep } from "../internal/wallClock.js"
import * as Pauses from "../internal/pauses.js"
import { fitRecord } from "../internal/sanitize.js"
import { stepper } from "../internal/schedule.js"
import { nowMicros } from "../internal/time.js"
import { ofJobName } from "./Metrics.js"
import type { Handler } from "../schema/Job.js"
import { type ClaimedJob, Claimer, type Group } from "./Claimer.js"
import { Completer, type Outcome } from "./Completer.js"
import { keyReleased, Notifier } from "./Notifier.js"
import { QueueConfig } from "./QueueConfig.js"
import * as Attempts from "../internal/worker/attempt.js"
import { liveness } from "../internal/worker/liveness.js"
import * as Outcomes from "../internal/worker/outcomes.js"
import * as Rescuer from "../internal/worker/rescuer.js"
import * as Slots from "../internal/worker/slots.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface WorkerOptions<R> {
  /** One handler per job name (`Job.handler(job, run)`). */
  readonly handlers: ReadonlyArray<Handler<R>>
  /** Jobs run at once by this worker: a positive integer (anything else dies at `make`). Default 10. */
  readonly concurrency?: number | undefined
  /**
   * Recorded on the jobs this worker claims. Default: a random UUID. At most 55 characters (on
   * MySQL the worker's lock name, `sqw<scope>:<id>`, must fit `GET_LOCK`'s 64). Unique within one
   * queue (database and table prefix); workers of other queues may use the same id. A worker whose
   * id is held by another live worker fails to start. One whose lock connection was cut takes its
   * lock again; if the server still runs the cut session (a network failure the server has not
   * noticed), the worker ends that session first. If another live worker holds the lock by then,
   * it logs an error and stops claiming.
   */
  readonly id?: string | undefined
  /**
   * When the worker's scope closes, how long running jobs may take to finish before they are
   * interrupted and released (back to pending, the attempt not counted). Default 30 seconds.
   */
  readonly shutdownTimeout?: Duration.DurationInput | undefined
}

/**
 * @since 0.1.0
 * @category models
 */
export interface WorkerHandle {
  readonly id: string
  /** Jobs claimed and not yet finished (running, or their end not yet written). */
  readonly running: Effect.Effect<number>
}

/** `extra` groups (first, so a claim that takes only the first few groups sees them) and then `groups`, each once. */
const mergeGroups = (groups: ReadonlyArray<Group>, extra: ReadonlyArray<Group>): ReadonlyArray<Group> => {
  const seen = new Set(extra.map((g) => `${g.priority}:${g.name}`))
  return [...extra, ...groups.filter((g) => !seen.has(`${g.priority}:${g.name}`))]
}

/** In a worker's answers: a write of its ends carried no claim of it (or the ride ended). */
const passed = "passed" as const

/** The workers running on each SQL client (its pool), to check that its pool can hold their locks. */
const workersOn = new WeakMap<object, number>()

/**
 * Starts a worker in the current scope. When the scope closes it stops claiming, lets running
 * jobs finish for up to `shutdownTimeout` (keeping its liveness and heartbeats meanwhile), then
 * interrupts the rest and releases them to pending without counting the attempt.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = <R>(
  options: WorkerOptions<R>
): Effect.Effect<
  WorkerHandle,
  never,
  Scope.Scope | R | Claimer | Completer | Notifier | QueueConfig | Database | SqlClient.SqlClient
> =>
  Effect.gen(function*() {
    const config = yield* QueueConfig
    const claimer = yield* Claimer
    const completer = yield* Completer
    const notifier = yield* Notifier
    const concurrency = options.concurrency ?? 10
    if (!Number.isSafeInteger(concurrency) || concurrency < 1) {
      return yield* Effect.dieMessage(`sqlane: concurrency must be a positive integer, got ${options.concurrency}`)
    }
    const workerId = options.id ?? crypto.randomUUID()
    const handlers = new Map<string, Handler<R>>()
    for (const h of options.handlers) {
      if (handlers.has(h.job.name)) {
        return yield* Effect.dieMessage(`sqlane: two handlers for job name "${h.job.name}"`)
      }
      handlers.set(h.job.name, h)
    }
    const names = Array.from(handlers.keys())
    /** Names whose jobs may carry mutex keys: claims that include one take the keyed claim. */
    const keyed = new Set(names.filter((n) => handlers.get(n)!.job.mutexKey !== undefined))
    const keyedNames = Array.from(keyed)
    const { reachability, statements } = yield* Database
    const { maxStatementBytes } = statements.capabilities
    // Each worker's lock holds one connection for the worker's life: with none left over, the
    // first claim would wait forever for one.
    const client = yield* SqlClient.SqlClient
    const poolSize = poolSizeOf(client)
    const workers = (workersOn.get(client) ?? 0) + 1
    if (poolSize !== undefined && poolSize < workers + 1) {
      return yield* Effect.dieMessage(
        `sqlane: ${workers === 1 ? "a worker needs" : `${workers} workers on one pool need`} a pool of at least ` +
          `${workers + 1} connections (each worker's lock holds one for its whole life; claims, ends and ` +
          `handlers use the others); maxConnections is ${poolSize}`
      )
    }
    workersOn.set(client, workers)
    yield* Effect.addFinalizer(() => Effect.sync(() => workersOn.set(client, (workersOn.get(client) ?? 1) - 1)))
    const shutdownTimeout = Duration.decode(options.shutdownTimeout ?? "30 seconds")
    /** After `shutdownTimeout`, how long the releases of interrupted jobs may take to be written. */
    const releaseMillis = 500
    /** At shutdown, how long a database found unreachable may take to answer once more (`Reachability.recheck`). */
    const recheckMillis = 300
    // MySQL refuses a GET_LOCK name over 64 characters (error 3057); the lock is `sqw<scope>:<id>`.
    if (workerId.length > 55) return yield* Effect.dieMessage("sqlane: a worker id is at most 55 characters")

    // Liveness: a session lock held on a dedicated connection for the worker's life, plus a
    // heartbeat row. Taken before the first claim; released (and the row deleted) last.
    const startedAtUs = yield* nowMicros
    // Every heartbeat also sets the `sqlane_jobs_due` gauge of the names this worker handles.
    const gaugeDue = Effect.gen(function*() {
      if (names.length === 0) return
      const counts = yield* statements.jobCountDue(names, yield* nowMicros, 10_000)
      for (const { due, name } of counts) ofJobName(name).due.unsafeUpdate(due, [])
    }).pipe(Effect.catchAllCause((cause) => Effect.logDebug("sqlane: counting due jobs failed", cause)))
    /** Another live worker took this worker's id (see `liveness`): claim and rescue no more. */
    let idTaken = false
    /** The worker's scope is closing: it claims no more, and jobs a claim in flight brings back are released. */
    let stopping = false
    const lock = yield* liveness(workerId, names, gaugeDue, Effect.suspend(() => {
      idTaken = true
      return wakeSelf
    }), () => stopping)

    const slots = yield* Slots.make(concurrency)
    const { inflight, claiming } = slots
    /** Wakes this worker's loop: an attempt was rescheduled, re-probe to learn its new run_at. */
    let wakeSelf: Effect.Effect<void> = Effect.void
    /** Effect's Clock (TestClock in tests), read outside a fiber in the hot path. */
    const clock = yield* Effect.clock
    const outcomes = Outcomes.make(handlers, Duration.isZero(config.retention.completed))
    const { released } = outcomes
    const attempts = yield* Attempts.make<R>({ handlers, inflight, outcomes, submit: (row, end) => submit(row, end) })

    // Paused job names are left out of every probe and claim; a resume wakes the loop.
    const paused = yield* Pauses.watch(names, Effect.suspend(() => wakeSelf))

    /** Counts a written attempt's end in the job name's metrics. */
    const count = (name: string, outcome: Outcome) => {
      const metrics = ofJobName(name)
      switch (outcome.state) {
        case "completed":
          return metrics.completed.unsafeUpdate(1, [])
        case "pending":
          metrics.failed.unsafeUpdate(1, [])
          return metrics.retried.unsafeUpdate(1, [])
        case "dead":
          metrics.failed.unsafeUpdate(1, [])
          return metrics.dead.unsafeUpdate(1, [])
      }
    }

    /** Queues an attempt's end; its slot is free once the end is written. */
    const submit = (row: ClaimedJob, end: Outcome) => {
      // A record larger than the database takes in one statement dead-letters the job (internal/sanitize.ts).
      const outcome = fitRecord(end, maxStatementBytes)
      const callsBefore = riderCalls
      completer.submit(outcome, (changed, unwritten) => {
        if (riderWanted && !riderInFlight && riderCalls === callsBefore) {
          // A completer (a wrapper of it) that does not pass the claimant on: stop riding, or the
          // loop would wait for a claim that never comes.
          riderWanted = false
          Queue.unsafeOffer(riderDone, passed)
        }
        // A stale attempt's end (the job was cancelled or rescued while it ran) changed nothing.
        if (changed !== false) count(row.name, outcome)
        slots.ended(row, unwritten)
        if (outcome.state === "pending") Effect.runFork(wakeSelf)
        // Its mutex key is free again: wake the workers of jobs that may wait for it.
        if (keyed.has(row.name)) Effect.runFork(notifier.released(keyedNames))
      }, claimant)
    }

    const batchMin = Math.ceil(concurrency / 2)
    const pollDelay = stepper(Schedule.spaced(config.pollInterval).pipe(Schedule.jittered))

    /** Starts the jobs a claim took; returns how many. */
    const took = (rows: ReadonlyArray<ClaimedJob>) => {
      slots.take(rows)
      const nowMs = clock.unsafeCurrentTimeMillis()
      for (const row of rows) {
        // A claim that was in flight when the worker began to stop: back to pending, not run.
        if (stopping) {
          submit(row, released(row))
          continue
        }
        const metrics = ofJobName(row.name)
        metrics.claimed.unsafeUpdate(1, [])
        metrics.pickupLatency.unsafeUpdate(Math.max(0, nowMs - Math.max(row.runAtUs, row.createdAtUs) / 1000), [])
        attempts.start(row)
      }
      return rows.length
    }

    /**
     * The claim made with the write of this worker's ends (`internal/claimsOnEnds.ts`).
     * While a backlog lasts (`riderWanted`: set when a claim fills every slot it asked for), each
     * write of this worker's ends claims, in the same transaction and commit, every slot those ends
     * free; the loop then claims nothing itself and reads `riderDone`: the jobs a write claimed (it
     * starts them), or `passed` when a write of its ends carried no claim of it. A claim that comes
     * back short ends the ride (the groups are drained), and so does the loop when it has to probe.
     */
    const riding = claimer.claimsOnEnds && keyed.size === 0
    let riderWanted = false
    /** A claim made with a write is in flight, or its answer not yet taken: the loop must not claim beside it. */
    let riderInFlight = false
    let riderDue: ReadonlyArray<Group> = []
    const riderDone = yield* Queue.unbounded<ClaimAnswer | typeof passed>()
    /** Calls of the claimant by the completer: a write of this worker's ends that made none did not pass it on. */
    let riderCalls = 0
    /** Ends the ride: the loop claims again itself. */
    const pass = () => {
      if (!riderWanted) return undefined
      riderWanted = false
      Queue.unsafeOffer(riderDone, passed)
      return undefined
    }
    const claimant: Claimant | undefined = !riding ? undefined : {
      answers: riderDone,
      claimWith: (ended, offered) => {
        riderCalls++
        // The last answer is not taken yet (its jobs are not counted): claim with a later write.
        if (riderInFlight) return undefined
        if (!riderWanted || !offered || stopping || idTaken) return pass()
        const groups = paused.claimableGroups(riderDue)
        const limit = slots.free() + ended
        if (groups.length === 0 || limit <= 0) return pass()
        slots.claimStarted(true)
        riderInFlight = true
        return { groups, limit, nowUs: Number(clock.unsafeCurrentTimeNanos() / 1000n), workerId }
      }
    }
    /** Starts the jobs a write of this worker's ends claimed. */
    const answered = (answer: ClaimAnswer) => {
      riderInFlight = false
      if (answer.rows.length < answer.asked) riderWanted = false
      try {
        took(answer.rows)
      } finally {
        slots.claimEnded(true)
      }
    }

    /** Claims up to `free` jobs of `groups` and starts them; returns how many it claimed. */
    const claimAndStart = (groups: ReadonlyArray<Group>, free: number, nowUs: number) =>
      // A claim is never cut short: jobs it claimed are started, so shutdown can account for them.
      Effect.uninterruptible(Effect.suspend(() => {
        slots.claimStarted(false)
        return Effect.ensuring(
          Effect.map(claimer.claim(groups, free, nowUs, workerId, keyed), (rows) => {
            if (riding && rows.length === free) {
              // A backlog: the writes of these jobs' ends claim the slots they free (armed before
              // the jobs start, so that even their first ends carry a claim).
              riderWanted = true
              riderDue = groups
            }
            return took(rows)
          }),
          Effect.sync(() => slots.claimEnded(false))
        )
      }))

    const loop = Effect.gen(function*() {
      // A worker with keyed names also wakes when a keyed job of any name ends (its key may be one
      // that jobs of this worker's names wait for).
      const wakeups = yield* notifier.subscribe(keyed.size > 0 ? [...names, keyReleased] : names)
      wakeSelf = wakeups.wake
      /** Groups believed to have due jobs, claimed from without a probe. */
      let due: ReadonlyArray<Group> = []
      let probeNext = true
      /** The last claim filled every slot: jobs are waiting, claim in batches. */
      let backlog = false
      /** The earliest `run_at` (µs) of the pending jobs not yet due at the last probe. */
      let laterUs: number | undefined
      /**
       * Claims from the same groups while a backlog lasts must not starve other names: take in the
       * groups that got due jobs meanwhile (hints, NOTIFY), and probe again when a job that was not
       * yet due at the last probe now is (or when a wake-up asks for a probe).
       */
      const takeWakes = (nowUs: number) =>
        Effect.map(wakeups.poll, (wake) => {
          if (wake !== undefined) {
            if (wake.probe) probeNext = true
            else if (wake.groups.length > 0) due = mergeGroups(due, wake.groups)
          }
          if (laterUs !== undefined && laterUs <= nowUs) probeNext = true
        })
      while (true) {
        // Running jobs still finish and their ends are written (guarded by attempt and state).
        if (idTaken) return yield* Effect.never
        if (riderWanted || riderInFlight) {
          // Riding (see `rider`): the writes of this worker's ends claim for it.
          let signal: ClaimAnswer | typeof passed | undefined
          if (!riderInFlight && slots.free() > 0) {
            // Slots free beside the ride (the last claim asked for half the slots, or slots were
            // freed while it was in flight): the next write of this worker's ends claims them too.
            // If none comes within about 2 ms (long jobs), stop riding and claim them below, as
            // the half-slot rule does: no slot idle for long while jobs wait.
            signal = yield* Effect.raceFirst(Queue.take(riderDone), Effect.as(wallSleep(2), undefined))
            if (signal === undefined) {
              if (!riderInFlight) riderWanted = false
              continue
            }
          } else {
            signal = yield* Queue.take(riderDone)
          }
          if (signal === passed) continue // a write passed without the claim: claim as below
          answered(signal)
          backlog = signal.rows.length === signal.asked
          if (!backlog) {
            probeNext = true
            continue
          }
          yield* takeWakes(yield* nowMicros)
          if (probeNext) riderWanted = false
          else riderDue = paused.claimableGroups(due)
          continue
        }
        if (slots.free() <= 0) {
          yield* slots.slotFreed
          continue
        }
        if (backlog && slots.free() < batchMin) {
          // Jobs are waiting: claim when half the slots are free (fewer, larger claims), but
          // leave no slot idle for more than about 2 ms (wall-clock: this is not job timing).
          const deadline = Date.now() + 2
          while (slots.free() < batchMin && slots.running() > 0 && Date.now() < deadline) {
            yield* Effect.raceFirst(slots.slotFreed, wallSleep(Math.max(1, deadline - Date.now())))
          }
        }
        const nowUs = yield* nowMicros
        if (backlog && !probeNext) yield* takeWakes(nowUs)
        const probed = probeNext
        let nextUs: number | undefined
        if (probeNext) {
          const probe = yield* claimer.probe(paused.claimable(names), nowUs)
          due = probe.due
          nextUs = probe.nextUs
          laterUs = probe.nextUs
          probeNext = false
        }
        // With a backlog, claim at most half the slots at a time: two halves in flight, one being
        // claimed or run while the other's ends are written, so round trips overlap.
        const free: number = backlog ? Math.min(slots.free(), batchMin) : slots.free()
        // Names paused since they were found due (or hinted) are left out.
        due = paused.claimableGroups(due)
        const claimed: number = due.length === 0 ? 0 : yield* claimAndStart(due, free, nowUs)
        // Every slot asked for filled: more jobs are likely due; claim again from the same groups
        // when slots free, without a probe.
        backlog = claimed === free
        if (backlog) continue
        if (claimed > 0 || !probed) {
          // A short claim: these groups are drained (or were taken by other workers). Probe before
          // sleeping, to learn what else is due and when the next pending job is.
          probeNext = true
          continue
        }
        // Sleep until an absolute time, read against the clock again just before sleeping: the
        // clock may have moved during the probe (under TestClock, by a whole `adjust`).
        const nowMs = Math.floor(nowUs / 1000)
        const poll = Option.getOrElse(yield* pollDelay(nowMs), () => 5000)
        const wakeAtMs = Math.min(nowMs + poll, nextUs === undefined ? Infinity : Math.ceil(nextUs / 1000))
        // Whole milliseconds: TestClock cannot represent a fractional instant in nanoseconds.
        const sleepMs = Math.max(0, Math.ceil(wakeAtMs - (yield* Clock.currentTimeMillis)))
        const wake = yield* Effect.timeoutOption(wakeups.take, sleepMs)
        if (Option.isSome(wake) && !wake.value.probe && wake.value.groups.length > 0) {
          // Jobs enqueued due now, with their priorities: claim them at once (no probe first).
          due = wake.value.groups
        } else {
          probeNext = true
        }
      }
    }).pipe(
      // A stopped (or restarting) loop takes no more claims from the writes of its ends, and,
      // like its own claims, waits for a ride claim in flight, so that shutdown accounts for its jobs.
      Effect.ensuring(Effect.suspend(() => {
        riderWanted = false
        return Effect.whileLoop({
          while: () => riderInFlight,
          body: () => Queue.take(riderDone),
          step: (signal) => signal === passed ? undefined : answered(signal)
        })
      })),
      Effect.scoped,
      // A defect must not end the loop for good: log it and restart like any failure.
      Effect.catchAllDefect((defect) => Effect.fail(defect)),
      Effect.tapErrorCause((cause) => reachability.failed("worker loop", "sqlane: worker loop failed; restarting", cause)),
      Effect.retry(Schedule.exponential("100 millis").pipe(Schedule.union(Schedule.spaced("5 seconds")))),
      Effect.annotateLogs({ package: "sqlane", module: "Worker", "sqlane.worker.id": workerId })
    )

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
    /** The claim loop (forked below). */
    let loopFiber: Fiber.RuntimeFiber<unknown, unknown> | undefined
    // Graceful shutdown, run when the scope closes — after the rescuer has stopped, before liveness
    // ends: stop claiming (a claim in flight releases what it brings back), wait for running jobs up
    // to `shutdownTimeout`, then interrupt the rest and release them.
    yield* Effect.addFinalizer(() =>
      Effect.gen(function*() {
        stopping = true
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

    yield* notifier.onCancel(attempts.cancel)

    // The rescuer (internal/worker/rescuer.ts): lost workers' jobs of these names, and cancellations of jobs
    // running here that no NOTIFY announced.
    yield* Rescuer.start({
      workerId,
      names,
      concurrency,
      startedAtUs,
      idTaken: () => idTaken,
      running: () => inflight,
      holds: slots.holds,
      claimsStarted: slots.claimsStarted,
      claimsEnded: slots.claimsEnded,
      steadySinceMs: lock.steadySinceMs,
      lostEnd: (row) => outcomes.failure(row, handlers.get(row.name)!, "lost", undefined, "worker lost"),
      releasedEnd: released,
      counted: count,
      cancel: attempts.cancel,
      wake: Effect.suspend(() => wakeSelf)
    })

    // Stopped by the graceful shutdown above, which waits for it.
    loopFiber = yield* Effect.forkDaemon(Effect.interruptible(loop))
    return { id: workerId, running: Effect.sync(slots.running) } satisfies WorkerHandle
  })

/**
 * A worker as a layer: it runs while the layer is alive.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = <R>(
  options: WorkerOptions<R>
): Layer.Layer<never, never, R | Claimer | Completer | Notifier | QueueConfig | Database | SqlClient.SqlClient> =>
  Layer.scopedDiscard(make(options))
