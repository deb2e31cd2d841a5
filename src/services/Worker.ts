/**
 * Runs jobs: claims due jobs of the job names it has handlers for and runs each on a fiber,
 * at most `concurrency` at a time. While a backlog lasts it keeps jobs claimed ahead of the running
 * ones (at most `prefetch`, as many as its measured attempt and write times call for), so a slot
 * whose attempt ends starts the next job at once; with `prefetch: 0` it claims only for free slots,
 * and a slot is free again once the attempt's end is written.
 *
 * The loop: wait for a free slot; probe which names have due jobs; claim up to the free slots;
 * if the claim filled every slot, claim again as soon as slots free (without a probe); otherwise
 * sleep until a wake-up (in-process hint, PostgreSQL `NOTIFY`, or `LISTEN` re-established), the
 * next pending job's `run_at`, or the jittered poll (`pollInterval`), whichever comes first.
 * While a backlog lasts, the claims are made with the writes of the worker's ends: one transaction
 * and one commit end a batch of attempts and claim the slots they free (`Claimer.finishAndClaim`,
 * called by the Completer's batch), for the slots they free and the jobs that may wait, and the
 * claim costs no commit of its own.
 *
 * A handler's typed failure or defect is recorded as the attempt's error; the job is retried at
 * the time its retry `Schedule` gives, or dead-lettered when the schedule is done or the failure
 * is permanent. A payload that does not decode dead-letters the job with the decode error.
 * All times come from Effect's `Clock`.
 *
 * This module is the worker's public face; its parts are in `internal/worker/`: `liveness.ts` (its
 * session lock, row and heartbeat), `slots.ts` (the jobs it holds against `concurrency`),
 * `loop.ts` (probes, claims, wake-ups, the claims made with the writes of its ends),
 * `attempt.ts` (the attempt executor) and `outcomes.ts` (how an attempt ended, as the end written),
 * `passing.ts` (what it claims ahead under limits whose slots pass), `rescuer.ts` (lost workers'
 * jobs), `shutdown.ts` and `options.ts` (the options checked). `make` checks the options and the pool,
 * puts the parts together, and hands each attempt's end to the Completer.
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Runtime from "effect/Runtime"
import type * as Scope from "effect/Scope"
import { Database, poolSizeOf } from "../internal/Database.js"
import * as Limits from "../internal/limits.js"
import type { NameLimits } from "../internal/driver/Driver.js"
import * as Pauses from "../internal/pauses.js"
import * as Stats from "../internal/stats.js"
import { fitRecord } from "../internal/sanitize.js"
import { InvalidWorkerOptions } from "../schema/Errors.js"
import { microsToDate, nowMicros } from "../internal/time.js"
import { wallSleep } from "../internal/wallClock.js"
import { ofJobName } from "./Metrics.js"
import type { Handler, Limits as JobLimits } from "../schema/Job.js"
import { type ClaimedJob, Claimer } from "./Claimer.js"
import { Completer, deadLetteredInPlace, type Outcome } from "./Completer.js"
import { Notifier } from "./Notifier.js"
import { QueueConfig } from "./QueueConfig.js"
import * as Attempts from "../internal/worker/attempt.js"
import * as Demands from "../internal/worker/demands.js"
import { defaultPrefetch, optionsProblem } from "../internal/worker/options.js"
import * as EndLogs from "../internal/worker/endLogs.js"
import { liveness } from "../internal/worker/liveness.js"
import * as Loop from "../internal/worker/loop.js"
import * as Outcomes from "../internal/worker/outcomes.js"
import * as Passing from "../internal/worker/passing.js"
import * as Rescuer from "../internal/worker/rescuer.js"
import * as Shutdown from "../internal/worker/shutdown.js"
import * as Slots from "../internal/worker/slots.js"

/**
 * The options of a worker: its handlers, how many jobs it runs at once, its id and how long it
 * waits for running jobs when it stops.
 *
 * @example
 * ```ts
 * const WorkerLive = Worker.layer({
 *   handlers: [Job.handler(SendEmail, ({ to }) => Effect.log(`emailing ${to}`))],
 *   concurrency: 20,
 *   id: `web-${process.pid}`,
 *   shutdownTimeout: "1 minute"
 * })
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface WorkerOptions<R> {
  /** One handler per job name (`Job.handler(job, run)`). */
  readonly handlers: ReadonlyArray<Handler<R>>
  /**
   * Jobs run at once by this worker: a positive integer (anything else fails `make` with
   * `InvalidWorkerOptions`). Default 10.
   */
  readonly concurrency?: number | undefined
  /**
   * The most jobs this worker claims ahead of those it runs, so that while a backlog lasts a slot
   * whose attempt ends starts the next job at once, and the end is written (with the next claim)
   * behind it. A whole number, 0 or more (anything else fails `make` with `InvalidWorkerOptions`);
   * 0: a job is claimed only for a free slot. Default: `max(20 × concurrency, 200)`.
   *
   * Fewer wait than this when fewer are needed: about the jobs that end while one end is written
   * (measured), so a worker of long jobs claims none ahead. Jobs wait only while the worker has a
   * backlog, never for a worker with a job that has a `mutexKey` (a waiting job would hold its key)
   * or a name under a per-key or rate limit; jobs of a name limited by `running` alone wait without a
   * slot, for one an ended attempt passes on (docs/flow-control.md),
   * and at most 1 s (or half `leaseTimeout`); then, and when they are cancelled, their name paused,
   * or the worker stops, they are released: back to pending, the attempt not counted. Waiting jobs
   * are held by the worker like running ones: if it crashes, they are rescued with them.
   * docs/workers.md ("Prefetch") says more.
   *
   * Source: Celery's `worker_prefetch_multiplier`, AMQP's consumer prefetch (`basic.qos`), pg-boss's `batchSize`.
   */
  readonly prefetch?: number | undefined
  /**
   * Recorded on the jobs this worker claims. Default: a random UUID. At most 55 characters (on
   * MySQL the worker's lock name, `sqw<scope>:<id>`, must fit `GET_LOCK`'s 64). Unique within one
   * queue (database and table prefix); workers of other queues may use the same id. A worker whose
   * id is held by another live worker fails to start. One whose lock connection was cut takes its
   * lock again; if the server still runs the cut session (a network failure the server has not
   * noticed), the worker ends that session first. If another live worker holds the lock by then,
   * it logs an error and stops claiming. An id that is not 1–55 characters without U+0000 and lone
   * surrogates fails `make` with `InvalidWorkerOptions` (reason `range` or `characters`), and one
   * another live worker holds with reason `inUse`.
   */
  readonly id?: string | undefined
  /**
   * When the worker's scope closes, how long running jobs may take to finish before they are
   * interrupted and released (back to pending, the attempt not counted). Default 30 seconds. A
   * duration that does not decode or is not finite fails `make` with `InvalidWorkerOptions`.
   */
  readonly shutdownTimeout?: Duration.DurationInput | undefined
  /**
   * `"default"`: the worker logs, through Effect's logger (so the app's logger gets them), a failed
   * attempt that will be retried at `Warning`, a dead letter at `Error`, the jobs of lost workers it
   * took back and an end that changed nothing (its job was cancelled or taken back while the attempt
   * ran) at `Warning` — one line each, annotated with the job's id, name and attempt
   * (docs/observability.md). `"quiet"`: none of these (Events, metrics and `Queue.get` still tell
   * them); the worker's other logs (outages, shutdown) stay. Effect's minimum log level applies
   * either way. Default `"default"`.
   */
  readonly logs?: "default" | "quiet" | undefined
}

/**
 * A running worker: its id, and how many jobs it holds.
 *
 * @example
 * ```ts
 * const worker = yield* Worker.make({ handlers: [SendEmailHandler] })
 * yield* Effect.log(`worker ${worker.id} runs ${yield* worker.running} job(s)`)
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface WorkerHandle {
  readonly id: string
  /** Jobs claimed and not yet finished (running, waiting to start, or their end not yet written). */
  readonly running: Effect.Effect<number>
  /** Jobs claimed ahead of the running ones, waiting to start (at most `prefetch`; see `WorkerOptions.prefetch`). */
  readonly waiting: Effect.Effect<number>
  /**
   * Whether the worker holds no job and no claim statement of it is in flight. `running` alone is
   * not enough to wait for the queue to empty: a claim committed in the database whose answer has not
   * arrived yet holds jobs `running` does not count yet. A drain of your own waits for `idle` and no
   * job due, checked in that order and `idle` checked again after (as `sqlane/promise`'s `drain` does).
   */
  readonly idle: Effect.Effect<boolean>
  /**
   * When the worker's last claims used up a rate limit's window or met a `RateLimited` hold (so due
   * jobs of that name or key wait): the earliest instant (Effect's `Clock`) at which one of those
   * admits jobs again; else undefined. A drain of your own under `TestClock` moves the clock to it
   * (as `drain` of `sqlane/testing` does with `withScheduled`).
   */
  readonly heldBackUntil: Effect.Effect<Date | undefined>
}

/** The workers running on each SQL client (its pool), to check that its pool can hold their locks. */
const workersOn = new WeakMap<object, number>()

/** How often the jobs waiting to start are checked for a pause, their bound and the worker's id (wall clock, ms). */
const waitingCheckMillis = 250

/**
 * Starts a worker in the current scope. When the scope closes it stops claiming, lets running
 * jobs finish for up to `shutdownTimeout` (keeping its liveness and heartbeats meanwhile), then
 * interrupts the rest and releases them to pending without counting the attempt.
 *
 * Fails with `InvalidWorkerOptions`, before it claims anything, when an option is refused
 * (`concurrency`, `id`, `shutdownTimeout`, `logs`, two handlers for one name), when another live
 * worker holds its `id` (reason `inUse`), or when the SQL client's pool is too small for the
 * workers on it (option `maxConnections`, reason `pool`: each worker's lock holds a connection).
 *
 * @example
 * ```ts
 * Effect.gen(function*() {
 *   const worker = yield* Worker.make({ handlers: [Job.handler(SendEmail, send)], concurrency: 20 })
 *   yield* Effect.log(`worker ${worker.id} started`)
 * }) // in a scope; the worker stops when it closes
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = <R>(
  options: WorkerOptions<R>
): Effect.Effect<
  WorkerHandle,
  InvalidWorkerOptions,
  Scope.Scope | R | Claimer | Completer | Notifier | QueueConfig | Database | SqlClient.SqlClient
> =>
  // A worker started inside a transaction of the caller's (`sql.withTransaction`) runs none of its
  // statements, and none of its handlers, on that transaction's connection: it outlives the
  // transaction, and its claims set options for their own transaction (`synchronous_commit`,
  // `lock_timeout` on PostgreSQL) and are tried again after a lost race.
  Effect.mapInputContext(makeWorker(options), (context) => Context.omit(SqlClient.TransactionConnection)(context) as typeof context)

const makeWorker = <R>(
  options: WorkerOptions<R>
): Effect.Effect<
  WorkerHandle,
  InvalidWorkerOptions,
  Scope.Scope | R | Claimer | Completer | Notifier | QueueConfig | Database | SqlClient.SqlClient
> =>
  Effect.gen(function*() {
    const invalid = optionsProblem(options)
    if (invalid !== undefined) return yield* invalid
    const config = yield* QueueConfig
    /** Effect's Clock (TestClock in tests), read outside a fiber in the hot path. */
    const clock = yield* Effect.clock
    const completer = yield* Completer
    const notifier = yield* Notifier
    // The per-minute stats of the process (internal/stats.ts), which `QueueLive` provides; a worker
    // given services without them counts none.
    const stats = Option.getOrElse(yield* Effect.serviceOption(Stats.Stats), () => Stats.off)
    const concurrency = options.concurrency ?? 10
    const workerId = options.id ?? crypto.randomUUID()
    const handlers = new Map<string, Handler<R>>(options.handlers.map((h) => [h.job.name, h]))
    const endLogs = EndLogs.make(handlers, options.logs === "quiet")
    /** Runs the worker's log lines with its context: the app's logger, level and annotations. */
    const runLog = Runtime.runFork(yield* Effect.runtime<never>())
    const names = Array.from(handlers.keys())
    /** Names whose jobs may carry mutex keys. */
    const mutexNames = names.filter((n) => handlers.get(n)!.job.mutexKey !== undefined)
    /**
     * Names claimed by the keyed claim: those whose jobs may carry mutex keys, and those under a
     * concurrency limit now (their definition's, or one set at run time: see `limitsView` below).
     */
    const keyed = new Set(mutexNames)
    for (const n of names) if (handlers.get(n)!.job.limits !== undefined) keyed.add(n)
    const { driver } = yield* Database
    const { maxStatementBytes, multiStatements } = driver.capabilities
    if (!multiStatements) {
      return yield* Effect.dieMessage(
        "sqlane: a worker on MySQL/MariaDB needs connections that take several statements in one query " +
          "(the client flag MULTI_STATEMENTS, which @effect/sql-mysql2's MysqlClient sets): its claims and ends " +
          "send their transaction in one round trip. Enqueueing works without it."
      )
    }
    // Each worker's lock holds one connection for the worker's life: with none left over, the
    // first claim would wait forever for one.
    const client = yield* SqlClient.SqlClient
    const poolSize = poolSizeOf(client)
    const workers = (workersOn.get(client) ?? 0) + 1
    if (poolSize !== undefined && poolSize < workers + 1) {
      return yield* new InvalidWorkerOptions({
        option: "maxConnections",
        reason: "pool",
        message: `${workers === 1 ? "a worker needs" : `${workers} workers on one pool need`} a pool of at least ` +
          `${workers + 1} connections (each worker's lock holds one for its whole life; claims, ends and ` +
          `handlers use the others); maxConnections is ${poolSize}`
      })
    }
    workersOn.set(client, workers)
    yield* Effect.addFinalizer(() => Effect.sync(() => workersOn.set(client, (workersOn.get(client) ?? 1) - 1)))
    const shutdownTimeout = Duration.decode(options.shutdownTimeout ?? "30 seconds")

    // Liveness: a session lock held on a dedicated connection for the worker's life, plus a
    // heartbeat row. Taken before the first claim; released (and the row deleted) last.
    const startedAtUs = yield* nowMicros
    // Every heartbeat also sets the `sqlane_jobs_due` gauge of the names this worker handles.
    /** The worker's view of its names' concurrency limits (made below). */
    let limitsView: Limits.LimitsView | undefined
    const gaugeDue = Effect.gen(function*() {
      if (names.length === 0) return
      const nowUs = yield* nowMicros
      const counts = yield* driver.jobCountDue(names, nowUs, 10_000)
      for (const { due, name } of counts) ofJobName(name).due.unsafeUpdate(due, [])
      if (limitsView !== undefined) yield* Limits.gauge(driver, limitsView.current(), counts, nowUs)
    }).pipe(Effect.catchAllCause((cause) => Effect.logDebug("sqlane: counting due jobs failed", cause)))
    /** Another live worker took this worker's id (see `liveness`): claim and rescue no more. */
    let idTaken = false
    /** The worker's scope is closing: it claims no more, and jobs a claim in flight brings back are released. */
    let stopping = false
    const lock = yield* liveness(workerId, names, Limits.limitsOf(Array.from(handlers.values(), (h) => h.job)), gaugeDue, Effect.suspend(() => {
      idTaken = true
      return wakeSelf
    }), () => stopping)
    /** The claim loop (made below, once what it needs is). */
    let loop: Loop.ClaimLoop | undefined

    const prefetch = options.prefetch ?? defaultPrefetch(concurrency)
    /** Whether the slots of `running`-limited names pass from attempt to attempt (`Passing.passes`). */
    const passing = (limits: ReadonlyMap<string, NameLimits>) => Passing.passes(limits, mutexNames.length > 0)
    const prefetchFor = (limits: ReadonlyMap<string, NameLimits>) => passing(limits) ? prefetch : 0
    /** The limits of the worker's names now (its definitions', then what `limitsView` follows), and whether slots pass. */
    let limitsNow: ReadonlyMap<string, NameLimits> = Limits.limitsOf(Array.from(handlers.values(), (h) => h.job))
    let passingNow = passing(limitsNow)
    const slots: Slots.Slots = yield* Slots.make({
      concurrency,
      prefetch: prefetchFor(limitsNow),
      leaseMillis: Duration.toMillis(config.leaseTimeout)
    }, {
      start: (row) => {
        const nowMs = clock.unsafeCurrentTimeMillis()
        // Never throws: a start that fails fails its own attempt.
        attempts.start(row)
        const pickupMs = Math.max(0, nowMs - Math.max(row.runAtUs, row.createdAtUs) / 1000)
        ofJobName(row.name).pickupLatency.unsafeUpdate(pickupMs, [])
        stats.started(row.name, pickupMs, nowMs)
      },
      release: (row) => release(row),
      passes: (name, slot) => {
        const l = limitsNow.get(name)
        return passingNow && l !== undefined && Limits.passesSlots(l) && (slot === undefined || slot < l.running!)
      },
      limited: (name) => limitsNow.get(name)?.running !== undefined,
      limitOf: (name) => limitsNow.get(name)?.running ?? 1,
      stop: (row) => attempts.stop(row)
    })
    const { inflight } = slots
    /** Wakes the claim loop (made below): an attempt was rescheduled, re-probe to learn its new run_at. */
    const wakeSelf = Effect.suspend(() => loop?.wake ?? Effect.void)
    const outcomes = Outcomes.make(
      handlers,
      Duration.isZero(config.retention.completed),
      // A hold that cannot be written is logged; the job is still back to pending after its delay.
      (name, key, untilUs) =>
        driver.rateHold(name, key, untilUs).pipe(
          Effect.catchAll((error) => Effect.logWarning("sqlane: could not hold back a rate-limited name or key", error))
        ),
      (name) => limitsNow.get(name)
    )
    const { released } = outcomes
    /** Releases a claimed job that did not start: back to pending, the attempt not counted. */
    const release = (row: ClaimedJob) => submit(row, released(row))
    const attempts = yield* Attempts.make<R>({ handlers, inflight, outcomes, submit: (row, end) => submit(row, end) })

    // Paused job names are left out of every probe and claim; a resume wakes the loop.
    const paused = yield* Pauses.watch(names, wakeSelf)
    // Names under a concurrency limit are claimed by the keyed claim, with slots; a limit set or
    // removed at run time moves a name in or out (a worker with one claims none ahead).
    limitsView = yield* Limits.watch(
      new Map(names.map((n) => [n, handlers.get(n)!.job.limits as JobLimits<never> | undefined])),
      (limits) => {
        limitsNow = limits
        passingNow = passing(limits)
        keyed.clear()
        for (const n of mutexNames) keyed.add(n)
        for (const n of limits.keys()) keyed.add(n)
        slots.setPrefetch(prefetchFor(limits))
        slots.limitsChanged()
        loop?.limitsChanged()
        Effect.runFork(wakeSelf)
      },
      // A notice may be of holds lifted (`Admin.liftHolds`), which the limits do not show: the loop
      // forgets the rate holds it read, and its next claim reads them again.
      () => {
        loop?.limitsChanged()
        Effect.runFork(wakeSelf)
      }
    )
    // Demands for slots between workers whose limited names' slots pass (`internal/worker/demands.ts`).
    const claimedShort = yield* Demands.make({
      workerId,
      slots,
      paused,
      limits: () => limitsNow,
      claimsAhead: () => passingNow && prefetch > 0,
      claiming: () => !stopping && !idTaken
    })
    const claims = yield* Loop.make({
      workerId,
      names,
      keyed,
      limits: limitsView.current,
      ahead: (withEnds) => passingNow ? Passing.ahead(limitsNow, slots, concurrency, prefetch, withEnds) : undefined,
      slots,
      paused,
      release,
      stopping: () => stopping,
      idTaken: () => idTaken,
      claimedShort
    })
    loop = claims

    /** Counts a written attempt's end in the job name's metrics and the process's per-minute stats. */
    const count = (name: string, outcome: Outcome) => {
      const metrics = ofJobName(name)
      if (outcome.state !== "released") stats.ended(name, outcome.state, clock.unsafeCurrentTimeMillis())
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
      const fitted = fitRecord(end, maxStatementBytes)
      // Its slot of a concurrency limit may pass to a job of its name waiting without one, which
      // starts in it now; the write of the end passes it in the database.
      const passing = fitted.state === "released" ? undefined : slots.passTo(row)
      const handTo = typeof passing === "object" ? passing : undefined
      const outcome = handTo === undefined ? fitted : { ...fitted, handTo }
      const submitted = claims.submitting()
      completer.submit(outcome, (changed, unwritten, retaken, handed) => {
        claims.written(submitted)
        // The slot did not pass (the attempt was cancelled or rescued meanwhile): the attempt it
        // passed to runs without one, and is stopped.
        if (handTo !== undefined && handed !== true) slots.notPassed(row)
        // A stale attempt's end (the job was cancelled or rescued while it ran) changed nothing.
        if (changed !== false) count(row.name, outcome)
        // One line per end (internal/worker/endLogs.ts); the Completer logged those it could not
        // write and those it dead-lettered in their place.
        if (!unwritten && !deadLetteredInPlace(outcome)) {
          const line = endLogs.ended(row, outcome, changed !== false)
          if (line !== undefined) runLog(line)
        }
        slots.ended(row, unwritten)
        claims.settled()
        // Back to pending (a retry, or a job released unstarted): this worker's loop probes for it.
        if (outcome.state === "pending" || outcome.state === "released") Effect.runFork(wakeSelf)
        // Its mutex key or limit slot is free again: wake the workers of jobs that may wait for it.
        // (A name with a concurrency key only holds neither; a limit slot the write's claim took
        // back, or the next write's claim will, or that passed to a job claimed ahead, is not free
        // for others; one left to them is.)
        const limited = limitsView?.current().get(row.name)
        if (mutexNames.includes(row.name)) Effect.runFork(notifier.released(mutexNames))
        else if (
          passing === "left" ||
          // A slot meant to pass that did not (the job it went to was gone) is free now.
          (handTo !== undefined && handed !== true && changed !== false) ||
          (limited !== undefined && Limits.holdsWhileWaiting(limited) && handTo === undefined && retaken !== true && !claims.retakes())
        ) {
          Effect.runFork(notifier.released([...mutexNames, row.name]))
        }
      }, claims.claimant)
      // Its slot starts the next waiting job now, while the end is written.
      slots.handed(row)
    }

    /** The claim loop's fiber (forked last). */
    let loopFiber: Fiber.RuntimeFiber<unknown, unknown> | undefined
    yield* Shutdown.onClose({
      workerId,
      slots,
      shutdownTimeout,
      stop: () => {
        stopping = true
        slots.releaseWaiting()
      },
      loopFiber: () => loopFiber
    })

    /** Cancelled jobs: a waiting one is released (its write changes nothing if the job is cancelled), a running one interrupted. */
    const cancel = (ids: ReadonlyArray<string>) => {
      if (slots.waiting() > 0) {
        const cancelled = new Set(ids)
        slots.releaseWaiting((row) => cancelled.has(row.id))
      }
      attempts.cancel(ids)
    }
    yield* notifier.onCancel(cancel)

    // Waiting jobs leave when they waited too long, their name was paused, or the worker's id was taken.
    yield* Effect.suspend(() => {
      if (slots.waiting() === 0) return Effect.void
      if (idTaken) slots.releaseWaiting()
      else {
        slots.releaseOverdue()
        slots.releaseWaiting((row) => paused.claimable([row.name]).length === 0)
      }
      return Effect.void
    }).pipe(
      Effect.zipRight(wallSleep(waitingCheckMillis)),
      Effect.forever,
      Effect.forkScoped
    )

    // The rescuer (internal/worker/rescuer.ts): lost workers' jobs of these names, and cancellations of jobs
    // running here that no NOTIFY announced.
    yield* Rescuer.start({
      workerId,
      names,
      concurrency,
      startedAtUs,
      idTaken: () => idTaken,
      running: slots.attempts,
      holds: slots.holds,
      claimsStarted: slots.claimsStarted,
      claimsEnded: slots.claimsEnded,
      claimsFailed: slots.claimsFailed,
      steadySinceMs: lock.steadySinceMs,
      lostEnd: (row) => outcomes.failure(row, handlers.get(row.name)!, "lost", undefined, "worker lost"),
      releasedEnd: released,
      counted: count,
      endLogs,
      cancel,
      wake: wakeSelf
    })

    // Stopped by the graceful shutdown above, which waits for it.
    loopFiber = yield* Effect.forkDaemon(Effect.interruptible(claims.run))
    return {
      id: workerId,
      running: Effect.sync(slots.running),
      waiting: Effect.sync(slots.waiting),
      idle: Effect.sync(slots.quiet),
      heldBackUntil: Effect.map(nowMicros, (nowUs) => {
        const untilUs = claims.heldBackUntilUs(nowUs)
        return untilUs === undefined ? undefined : microsToDate(untilUs)
      })
    } satisfies WorkerHandle
  })

/**
 * A worker as a layer: it runs while the layer is alive. Its build fails with
 * `InvalidWorkerOptions` as {@link make} does.
 *
 * @example
 * ```ts
 * const WorkerLive = Worker.layer({ concurrency: 10, handlers: [SendEmailHandler] })
 * const MainLive = WorkerLive.pipe(Layer.provideMerge(QueueLive()), Layer.provideMerge(ClientLive))
 * Layer.launch(MainLive).pipe(NodeRuntime.runMain)
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = <R>(
  options: WorkerOptions<R>
): Layer.Layer<never, InvalidWorkerOptions, R | Claimer | Completer | Notifier | QueueConfig | Database | SqlClient.SqlClient> =>
  Layer.scopedDiscard(make(options))
