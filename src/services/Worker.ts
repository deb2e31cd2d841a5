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
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import type * as FiberId from "effect/FiberId"
import * as FiberRef from "effect/FiberRef"
import * as FiberRefs from "effect/FiberRefs"
import { identity } from "effect/Function"
import * as HashMap from "effect/HashMap"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Queue from "effect/Queue"
import * as Runtime from "effect/Runtime"
import * as RuntimeFlags from "effect/RuntimeFlags"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as SchemaAST from "effect/SchemaAST"
import type * as Scope from "effect/Scope"
import * as Tracer from "effect/Tracer"
import { type Claimant, type ClaimAnswer } from "../internal/claimsOnEnds.js"
import { Database, poolSizeOf } from "../internal/Database.js"
import { guardedScheduler } from "../internal/guardedScheduler.js"
import { bounded, idList } from "../internal/outage.js"
import { wallSleep } from "../internal/wallClock.js"
import * as Pauses from "../internal/pauses.js"
import {
  defectStack,
  describe,
  errorJson,
  fitRecord,
  guardCause,
  maxErrorJsonLength,
  type NotJson,
  originalOf,
  ownProperties,
  prettyCause,
  text as sanitizeText,
  toJson as resultJson
} from "../internal/sanitize.js"
import { retryDelay, stepper } from "../internal/schedule.js"
import { microsToDate, nowMicros } from "../internal/time.js"
import { builtInTracer, decodeTraceContext } from "../internal/tracing.js"
import { ofJobName } from "./Metrics.js"
import { type Handler, type JobContext, schemasOf } from "../schema/Job.js"
import { JobTimeout } from "../schema/Errors.js"
import { AttemptError, ErrorHistory } from "../schema/JobInfo.js"
import { type ClaimedJob, Claimer, type Group } from "./Claimer.js"
import { Completer, type Outcome } from "./Completer.js"
import { keyReleased, Notifier } from "./Notifier.js"
import { QueueConfig } from "./QueueConfig.js"
import { liveness } from "../internal/worker/liveness.js"
import * as Rescuer from "../internal/worker/rescuer.js"

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

/** Whether a typed failure is the worker's own timeout (false for a value whose prototype cannot be read). */
const isTimeout = (u: unknown): u is JobTimeout => {
  try {
    return u instanceof JobTimeout
  } catch {
    return false
  }
}

const tagOf = (u: unknown): string | undefined => {
  try {
    return typeof u === "object" && u !== null && "_tag" in u && typeof (u as any)._tag === "string"
      ? (u as any)._tag
      : undefined
  } catch {
    return undefined // a getter that throws
  }
}

const encodeErrors = Schema.encodeSync(ErrorHistory)
const decodeErrors = Schema.decodeUnknownOption(ErrorHistory)

/** The link to the enqueueing span stored with a job (`<trace id>:<span id>:<sampled>`), if any. */
const enqueuedBy = (traceContext: string | null): ReadonlyArray<Tracer.SpanLink> => {
  const ids = decodeTraceContext(traceContext)
  if (ids === undefined) return []
  return [{
    _tag: "SpanLink",
    span: Tracer.externalSpan(ids),
    attributes: { "sqlane.link": "enqueued_by" }
  }]
}

/** `extra` groups (first, so a claim that takes only the first few groups sees them) and then `groups`, each once. */
const mergeGroups = (groups: ReadonlyArray<Group>, extra: ReadonlyArray<Group>): ReadonlyArray<Group> => {
  const seen = new Set(extra.map((g) => `${g.priority}:${g.name}`))
  return [...extra, ...groups.filter((g) => !seen.has(`${g.priority}:${g.name}`))]
}

/**
 * `effect`, failed with `onTimeout()` when it has not ended after `millis` (Effect's `Clock`) and is
 * then interrupted. While it cannot be interrupted (say, its transaction's COMMIT is in flight, which
 * `withTransaction` runs uninterruptibly) the interruption waits, and if it ends meanwhile its end
 * stands: an attempt whose work committed is not recorded as timed out, to run again.
 * (`Effect.timeoutFail` reports the timeout even then, and the success is lost to the interruption.)
 */
const timeoutUnlessDone = <A, E, R>(effect: Effect.Effect<A, E, R>, millis: number, onTimeout: () => JobTimeout) =>
  Effect.raceWith(effect, Effect.sleep(millis), {
    onSelfDone: (exit, timer) => Effect.zipRight(Fiber.interrupt(timer), exit),
    onOtherDone: (_, self) =>
      Effect.gen(function*() {
        while (true) {
          const ended = yield* Fiber.poll(self)
          if (Option.isSome(ended)) return yield* ended.value
          // raceWith's fibers are runtime fibers
          const status = yield* Fiber.status(self as Fiber.RuntimeFiber<A, E>)
          if (status._tag === "Done" || RuntimeFlags.interruption(status.runtimeFlags)) break
          yield* wallSleep(1)
        }
        yield* Fiber.interrupt(self)
        return yield* Effect.fail(onTimeout())
      }).pipe(Effect.onInterrupt(() => Fiber.interrupt(self)))
  })

/** In a worker's answers: a write of its ends carried no claim of it (or the ride ended). */
const passed = "passed" as const

/** The workers running on each SQL client (its pool), to check that its pool can hold their locks. */
const workersOn = new WeakMap<object, number>()

interface Inflight {
  readonly fiber: Fiber.RuntimeFiber<unknown, unknown>
  readonly attempt: number
  reason: "cancel" | "shutdown" | undefined
  /** Ends the attempt whose fiber Effect's run loop threw out of (see `internal/guardedScheduler.ts`). */
  readonly stopped: (thrown: unknown) => void
}

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

    /** Runs job attempts as root fibers of their own, with the worker's context (`R`). */
    const runtime = yield* Effect.runtime<R>()
    const runFork = Runtime.runFork(runtime)
    /**
     * The scheduler of attempts' fibers: a fiber that Effect's run loop throws out of (a handler threw
     * a value whose inspection throws) ends its attempt and stalls no other fiber.
     */
    const attemptScheduler = guardedScheduler(
      FiberRefs.getOrDefault(runtime.fiberRefs, FiberRef.currentScheduler),
      (thrown, fiber) => {
        for (const entry of inflight.values()) if (entry.fiber === fiber) return entry.stopped(thrown)
        // A fiber the handler forked (it has the attempt's log annotations): the attempt cannot end
        // either — joining it, or interrupting it when the attempt ends, waits for ever — so it ends here.
        const id = fiber === undefined
          ? undefined
          : HashMap.get(fiber.getFiberRef(FiberRef.currentLogAnnotations), "sqlane.job.id").pipe(Option.getOrUndefined)
        const entry = typeof id === "string" ? inflight.get(id) : undefined
        if (entry !== undefined) return entry.stopped(thrown)
        runFork(Effect.logWarning(`sqlane: a fiber of a handler stopped: Effect's runtime threw ${describe(thrown)}`))
      }
    )
    /**
     * An attempt's fiber starts with its log annotations (`sqlane.job.id`, `sqlane.job.name`)
     * already set: `Effect.annotateLogs` around the handler would copy the fiber's refs twice
     * (set and restore), several µs per job.
     */
    const annotationsOfName = new Map(names.map((name) => [
      name,
      HashMap.set(FiberRefs.getOrDefault(runtime.fiberRefs, FiberRef.currentLogAnnotations), "sqlane.job.name", name)
    ]))
    const annotated = (refs: FiberRefs.FiberRefs, fiberId: FiberId.Runtime, row: ClaimedJob) =>
      FiberRefs.updateAs(
        FiberRefs.updateAs(refs, {
          fiberId,
          fiberRef: FiberRef.currentLogAnnotations,
          value: HashMap.set(annotationsOfName.get(row.name)!, "sqlane.job.id", row.id as unknown)
        }),
        { fiberId, fiberRef: FiberRef.currentScheduler, value: attemptScheduler }
      )
    /** Effect's Clock (TestClock in tests), read outside a fiber in the hot path. */
    const clock = yield* Effect.clock
    /**
     * A span per attempt only when a tracer is installed (e.g. `@effect/opentelemetry`): with
     * Effect's built-in tracer nobody reads the spans, and one costs as much CPU as the rest of
     * a job's bookkeeping.
     */
    const withJobSpan = (yield* Effect.tracer) !== builtInTracer
    /** Running attempts by job id: their handler fibers, and why they are being interrupted. */
    const inflight = new Map<string, Inflight>()
    /**
     * Claimed by this instance and not yet ended, by job id: the attempt (covers the moment between
     * claim and start, and between an attempt's end and its write). A retry can be claimed before
     * the write of the attempt before it has called back, so an end removes only its own attempt.
     */
    const claiming = new Map<string, number>()
    /**
     * Claim statements of this instance started and ended (one at a time, from the loop): a claim in
     * flight has jobs that are not in `claiming` yet.
     */
    let claimsStarted = 0
    let claimsEnded = 0
    const claimEnded = yield* Queue.sliding<void>(1)
    const slotFreed = yield* Queue.sliding<void>(1)
    /** Wakes this worker's loop: an attempt was rescheduled, re-probe to learn its new run_at. */
    let wakeSelf: Effect.Effect<void> = Effect.void
    let running = 0
    let idleWaiters: Array<() => void> = []
    /** No job claimed and not ended, and no claim made with the writes of ends in flight. */
    const idle = () => running === 0 && !riderInFlight
    const idleCheck = () => {
      if (idleWaiters.length > 0 && idle()) {
        const waiters = idleWaiters
        idleWaiters = []
        for (const w of waiters) w()
      }
    }
    /** Waits until every claimed job's end is written. */
    const awaitIdle = Effect.async<void>((resume) => {
      if (idle()) return resume(Effect.void)
      const waiter = () => resume(Effect.void)
      idleWaiters.push(waiter)
      return Effect.sync(() => {
        idleWaiters = idleWaiters.filter((w) => w !== waiter)
      })
    })

    /** The payload and success codecs of each job name, compiled once. */
    const codecs = new Map(
      Array.from(handlers, ([name, handler]) => {
        const schemas = schemasOf(handler.job)
        return [name, {
          decodePayload: Schema.decodeUnknownEither(schemas.payload),
          encodeSuccess: Schema.encodeEither(schemas.success),
          // `Schema.Void` (the default) stores nothing, whatever the handler returns (a handler that
          // ends with `Effect.sync(() => map.set(…))` returns a Map: not a result to store or refuse).
          storesResult: !SchemaAST.isVoidKeyword(schemas.success.ast)
        }] as const
      })
    )

    // Paused job names are left out of every probe and claim; a resume wakes the loop.
    const paused = yield* Pauses.watch(names, Effect.suspend(() => wakeSelf))

    const failure = (
      row: ClaimedJob,
      handler: Handler<R>,
      kind: AttemptError["kind"],
      cause: Cause.Cause<unknown> | undefined,
      message: string
    ) =>
      Effect.gen(function*() {
        const nowUs = yield* nowMicros
        const typed = cause ? Cause.failureOption(cause) : Option.none()
        const defect = cause ? Cause.dieOption(cause) : Option.none()
        // The handler's own value, also where a stand-in replaced one Effect cannot print (`guardCause`).
        const value = originalOf(Option.isSome(typed) ? typed.value : Option.isSome(defect) ? defect.value : undefined)
        // The typed failure as its schema encodes it, if that is JSON (a value whose inspection throws has none).
        let encoded = Option.none<unknown>()
        if (Option.isSome(typed)) {
          try {
            encoded = Option.flatMap(Schema.encodeUnknownOption(schemasOf(handler.job).failure)(value), (e) =>
              Option.map(
                Option.filter(Option.fromNullable(errorJson(e)), (json) => json.length <= maxErrorJsonLength),
                (json) => JSON.parse(json)
              ))
          } catch {
            // a failure schema that throws on it
          }
        }
        // The stored record: U+0000 and lone surrogates replaced, cut to a length (internal/sanitize.ts).
        message = sanitizeText(message)
        const record = new AttemptError({
          attempt: row.attempts,
          at: microsToDate(nowUs).toISOString(),
          kind,
          message,
          tag: tagOf(value),
          error: Option.getOrUndefined(encoded),
          // A defect's stack and own properties (`code`, `errno`…), bounded (internal/sanitize.ts).
          stack: Option.isSome(defect) ? defectStack(value) : undefined,
          properties: Option.isSome(defect) ? ownProperties(value) : undefined
        })
        const history = [
          ...Option.getOrElse(decodeErrors(row.errors ?? "[]"), () => [] as ReadonlyArray<AttemptError>),
          record
        ]
        let permanent = false
        try {
          permanent = Option.isSome(typed) && Boolean((handler.job.isPermanent as (failure: unknown) => boolean)(value))
        } catch {
          // an `isPermanent` that throws on the value: not taken as permanent
        }
        const delay = permanent || kind === "decode"
          ? Option.none<number>()
          : yield* retryDelay(handler.job.retry, row.attempts - row.attemptBase, value, Math.floor(nowUs / 1000))
        const outcome: Outcome = {
          id: row.id,
          name: row.name,
          attempt: row.attempts,
          state: Option.isSome(delay) ? "pending" : "dead",
          // A job whose worker was lost is retried at once (if it has attempts left): the crash
          // says nothing about when the job can succeed.
          runAtUs: Option.isSome(delay) ? nowUs + (kind === "lost" ? 0 : Math.round(delay.value * 1000)) : null,
          finishedAtUs: Option.isSome(delay) ? null : nowUs,
          endedAtUs: nowUs,
          lastError: message,
          errors: encodeErrors(history),
          result: null
        }
        return outcome
      })

    const released = (row: ClaimedJob): Outcome => ({
      id: row.id,
      name: row.name,
      attempt: row.attempts,
      state: "released",
      runAtUs: null,
      finishedAtUs: null,
      lastError: null,
      errors: null,
      result: null
    })

    // With `retention.completed` 0 a completed job's row is deleted by its end (unless it holds its
    // unique key while completed): its result is never stored, so it is not converted either.
    const deleteCompleted = Duration.isZero(config.retention.completed)
    /** A completion, or where and why its (encoded) result is not JSON (internal/sanitize.ts). */
    const completed = (row: ClaimedJob, nowUs: number, result: unknown): Outcome | NotJson => {
      const json = result === undefined || codecs.get(row.name)?.storesResult === false ||
          (deleteCompleted && !row.keepsKey)
        ? null
        : resultJson(result)
      if (json !== null && !("json" in json)) return json
      return {
        id: row.id,
        name: row.name,
        attempt: row.attempts,
        state: "completed",
        runAtUs: null,
        finishedAtUs: nowUs,
        lastError: null,
        errors: null,
        result: json === null ? null : json.json,
        keep: row.keepsKey
      }
    }

    /**
     * An attempt's end is always written, so its job never stays `running` under a live worker: a
     * defect while working the end out (a schema that throws or overflows the stack, a retry schedule
     * that throws) fails the attempt with that defect, and if even that dies, the job is dead-lettered.
     */
    const orLastResort = <E>(row: ClaimedJob, handler: Handler<R>, outcome: Effect.Effect<Outcome | undefined, E>) =>
      outcome.pipe(
        Effect.catchAllDefect((defect) =>
          failure(row, handler, "defect", undefined, `sqlane could not settle this attempt: ${describe(defect)}`)
        ),
        Effect.catchAllCause((cause) =>
          Effect.succeed<Outcome>({
            id: row.id,
            name: row.name,
            attempt: row.attempts,
            state: "dead",
            runAtUs: null,
            finishedAtUs: Number(clock.unsafeCurrentTimeNanos() / 1000n),
            lastError: sanitizeText(`sqlane could not settle this attempt: ${prettyCause(cause)}`),
            errors: null,
            result: null
          })
        ),
        Effect.flatMap((end) => Effect.sync(() => end !== undefined && submit(row, end)))
      )

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
        // An end the database refused (and its dead letter): the job stays running under this worker, and
        // stays in `claiming`, so that this worker's rescuer does not take it for a lost claim.
        if (!unwritten && claiming.get(row.id) === row.attempts) claiming.delete(row.id)
        running--
        Queue.unsafeOffer(slotFreed, undefined)
        if (outcome.state === "pending") Effect.runFork(wakeSelf)
        // Its mutex key is free again: wake the workers of jobs that may wait for it.
        if (keyed.has(row.name)) Effect.runFork(notifier.released(keyedNames))
        idleCheck()
      }, claimant)
    }

    /** How an attempt ended, for the cases that need effects (failures, async schemas). */
    const settle = (row: ClaimedJob, handler: Handler<R>, entry: Inflight, exit: Exit.Exit<unknown, unknown>) =>
      Effect.gen(function*() {
        const job = handler.job
        if (Exit.isFailure(exit) && Cause.isInterruptedOnly(exit.cause) && entry.reason !== undefined) {
          // Cancelled: the row is already `cancelled`, so this guarded write changes nothing unless the
          // cancel rolled back. Shutdown: back to pending, the attempt not counted.
          return released(row)
        }
        if (Exit.isSuccess(exit)) {
          const encoded = yield* Effect.either(Schema.encode(schemasOf(job).success)(exit.value))
          if (Either.isLeft(encoded)) {
            const message = `result does not match the success schema of "${job.name}": ${
              ParseResult.TreeFormatter.formatErrorSync(encoded.left)
            }`
            return yield* failure(row, handler, "defect", undefined, message)
          }
          const end = completed(row, yield* nowMicros, encoded.right)
          if ("state" in end) return end
          return yield* failure(
            row,
            handler,
            "defect",
            undefined,
            `result of "${job.name}" is not JSON-serializable at ${end.path}: ${end.reason}`
          )
        }
        const cause = exit.cause
        const typed = Cause.failureOption(cause)
        if (Option.isSome(typed) && isTimeout(typed.value)) {
          return yield* failure(row, handler, "timeout", cause, typed.value.message)
        }
        if (Option.isSome(typed)) return yield* failure(row, handler, "failure", cause, describe(typed.value))
        const defect = Cause.dieOption(cause)
        if (Option.isSome(defect)) return yield* failure(row, handler, "defect", cause, describe(defect.value))
        return yield* failure(row, handler, "interrupted", cause, "the attempt was interrupted")
      })

    /**
     * Runs the handler on a fiber of its own (so a cancellation or a shutdown can interrupt it)
     * and records how it ended. The common case — a success whose result encodes synchronously —
     * is settled in the fiber's observer without another fiber.
     */
    const launch = (row: ClaimedJob, handler: Handler<R>, payload: unknown) => {
      const job = handler.job
      const context: JobContext = {
        id: row.id,
        name: row.name,
        attempt: row.attempts,
        createdAt: microsToDate(row.createdAtUs),
        runAt: microsToDate(row.runAtUs)
      }
      const timeoutMillis = job.timeoutMillis
      const run = Effect.suspend(() => {
        try {
          return handler.run(payload, context)
        } catch (thrown) {
          // Thrown here rather than in the fiber: Effect's run loop cannot take a thrown value whose
          // inspection throws (it would escape the fiber, and the attempt never end).
          return Effect.failCause(Cause.die(thrown))
        }
      }).pipe(
        // A failure or defect Effect cannot print would keep the fiber from ending (see `guardCause`).
        Effect.catchAllCause((cause) => Effect.failCause(guardCause(cause))),
        (effect) =>
          timeoutMillis === undefined
            ? effect
            : timeoutUnlessDone(effect, Math.ceil(timeoutMillis), () => new JobTimeout({ millis: timeoutMillis })),
        // A stack trace per job costs more CPU than the rest of the job's bookkeeping.
        withJobSpan === false ? identity : Effect.withSpan(`sqlane.job ${job.name}`, {
          attributes: { "sqlane.job.id": row.id, "sqlane.job.name": row.name, "sqlane.job.attempt": row.attempts },
          // Each attempt is a trace of its own, linked to the span that enqueued the job.
          links: enqueuedBy(row.traceContext),
          kind: "consumer",
          captureStackTrace: false,
          root: true
        }),
        Effect.interruptible
      )
      const startedMs = clock.unsafeCurrentTimeMillis()
      /** The attempt ends with a defect (or is released, if it was being stopped) when its fiber cannot. */
      const stopped = (thrown: unknown, reason: Inflight["reason"]) => {
        ofJobName(row.name).runDuration.unsafeUpdate(clock.unsafeCurrentTimeMillis() - startedMs, [])
        runFork(orLastResort(
          row,
          handler,
          reason !== undefined
            ? Effect.succeed(released(row))
            : failure(row, handler, "defect", undefined, `the attempt's fiber stopped: Effect's runtime threw ${describe(thrown)}`)
        ))
      }
      let fiber: Fiber.RuntimeFiber<unknown, unknown>
      try {
        fiber = runFork(run, { updateRefs: (refs, fiberId) => annotated(refs, fiberId, row) })
      } catch (thrown) {
        // Thrown out of the fiber's first run, on this thread.
        return stopped(thrown, undefined)
      }
      /** The attempt's end is decided (by its fiber's exit, or by `stopped`): once only. */
      let over = false
      const entry: Inflight = {
        fiber,
        attempt: row.attempts,
        reason: undefined,
        stopped: (thrown) => {
          if (over) return
          over = true
          if (inflight.get(row.id) === entry) inflight.delete(row.id)
          stopped(thrown, entry.reason)
        }
      }
      const earlier = inflight.get(row.id)
      if (earlier !== undefined && earlier.reason === undefined) {
        // An earlier attempt of this job still runs here: another worker rescued it as lost (this
        // worker's lock or lease lapsed), and this worker then claimed the retry. Its writes are
        // fenced by the attempt; stop it, as a cancel would.
        earlier.reason = "cancel"
        Effect.runFork(Fiber.interrupt(earlier.fiber))
      }
      inflight.set(row.id, entry)
      fiber.addObserver((exit) => {
        if (over) return
        over = true
        // Only its own entry: a later attempt of the job may have replaced it.
        if (inflight.get(row.id) === entry) inflight.delete(row.id)
        ofJobName(row.name).runDuration.unsafeUpdate(clock.unsafeCurrentTimeMillis() - startedMs, [])
        if (Exit.isSuccess(exit)) {
          try {
            const encoded = codecs.get(row.name)!.encodeSuccess(exit.value)
            if (Either.isRight(encoded)) {
              const end = completed(row, Number(clock.unsafeCurrentTimeNanos() / 1000n), encoded.right)
              if ("state" in end) return submit(row, end)
            }
          } catch {
            // a success schema that throws: settled below
          }
        }
        runFork(orLastResort(row, handler, settle(row, handler, entry, exit)))
      })
    }

    /** Decodes the payload of a claimed job and launches its attempt, or dead-letters the job. */
    const start = (row: ClaimedJob) => {
      const handler = handlers.get(row.name)!
      let json: unknown
      let parsed = true
      try {
        json = JSON.parse(row.payload)
      } catch {
        parsed = false
      }
      let decoded: Either.Either<unknown, unknown> | undefined
      try {
        decoded = parsed ? codecs.get(row.name)!.decodePayload(json) : undefined
      } catch {
        decoded = undefined // a schema that throws: the slow path says why
      }
      if (decoded !== undefined && Either.isRight(decoded)) return launch(row, handler, decoded.right)
      // Slow path: a payload that is not JSON, does not match, or needs an asynchronous schema.
      runFork(orLastResort(row, handler, Effect.gen(function*() {
        const job = handler.job
        const payload = yield* Effect.try(() => JSON.parse(row.payload)).pipe(
          Effect.flatMap(Schema.decodeUnknown(schemasOf(job).payload)),
          // A schema that throws, or a recursive one on a payload nested too deeply (stack overflow).
          Effect.catchAllDefect((defect) => Effect.fail(defect)),
          Effect.either
        )
        if (Either.isRight(payload)) {
          launch(row, handler, payload.right)
          return undefined
        }
        const error = payload.left
        const message = ParseResult.isParseError(error)
          ? `payload does not match the schema of "${job.name}": ${ParseResult.TreeFormatter.formatErrorSync(error)}`
          : error instanceof Cause.UnknownException
          ? `payload is not valid JSON: ${describe(error.error)}`
          : `payload could not be decoded with the schema of "${job.name}": ${describe(error)}`
        return yield* failure(row, handler, "decode", undefined, message)
      })))
    }

    const batchMin = Math.ceil(concurrency / 2)
    const pollDelay = stepper(Schedule.spaced(config.pollInterval).pipe(Schedule.jittered))

    /** Starts the jobs a claim took; returns how many. */
    const took = (rows: ReadonlyArray<ClaimedJob>) => {
      running += rows.length
      const nowMs = clock.unsafeCurrentTimeMillis()
      for (const row of rows) {
        claiming.set(row.id, row.attempts)
        // A claim that was in flight when the worker began to stop: back to pending, not run.
        if (stopping) {
          submit(row, released(row))
          continue
        }
        const metrics = ofJobName(row.name)
        metrics.claimed.unsafeUpdate(1, [])
        metrics.pickupLatency.unsafeUpdate(Math.max(0, nowMs - Math.max(row.runAtUs, row.createdAtUs) / 1000), [])
        try {
          start(row)
        } catch (defect) {
          // A start that throws fails its own attempt, not the claim's other jobs.
          runFork(orLastResort(row, handlers.get(row.name)!, Effect.die(defect)))
        }
      }
      return rows.length
    }
    const claimEnds = () => {
      claimsEnded++
      Queue.unsafeOffer(claimEnded, undefined)
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
        const limit = concurrency - running + ended
        if (groups.length === 0 || limit <= 0) return pass()
        claimsStarted++
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
        claimEnds()
        idleCheck()
      }
    }

    /** Claims up to `free` jobs of `groups` and starts them; returns how many it claimed. */
    const claimAndStart = (groups: ReadonlyArray<Group>, free: number, nowUs: number) =>
      // A claim is never cut short: jobs it claimed are started, so shutdown can account for them.
      Effect.uninterruptible(Effect.suspend(() => {
        claimsStarted++
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
          Effect.sync(claimEnds)
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
          if (!riderInFlight && running < concurrency) {
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
        if (running >= concurrency) {
          yield* Queue.take(slotFreed)
          continue
        }
        if (backlog && concurrency - running < batchMin) {
          // Jobs are waiting: claim when half the slots are free (fewer, larger claims), but
          // leave no slot idle for more than about 2 ms (wall-clock: this is not job timing).
          const deadline = Date.now() + 2
          while (concurrency - running < batchMin && running > 0 && Date.now() < deadline) {
            yield* Effect.raceFirst(Queue.take(slotFreed), wallSleep(Math.max(1, deadline - Date.now())))
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
        const free: number = backlog ? Math.min(concurrency - running, batchMin) : concurrency - running
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
        const finished = yield* Effect.interruptible(Effect.raceFirst(awaitIdle, handlersDoneButUnwritable)).pipe(
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

    // Cancellations: interrupt the handler of a cancelled job that runs here.
    const cancel = (ids: ReadonlyArray<string>) => {
      for (const id of ids) {
        const entry = inflight.get(id)
        if (entry !== undefined && entry.reason === undefined) {
          entry.reason = "cancel"
          Effect.runFork(Fiber.interrupt(entry.fiber))
        }
      }
    }
    yield* notifier.onCancel(cancel)

    // The rescuer (internal/worker/rescuer.ts): lost workers' jobs of these names, and cancellations of jobs
    // running here that no NOTIFY announced.
    yield* Rescuer.start({
      workerId,
      names,
      concurrency,
      startedAtUs,
      idTaken: () => idTaken,
      running: () => inflight,
      holds: (id) => inflight.has(id) || claiming.has(id),
      claimsStarted: () => claimsStarted,
      claimsEnded: (n) =>
        Effect.gen(function*() {
          while (claimsEnded < n) yield* Queue.take(claimEnded)
        }),
      steadySinceMs: lock.steadySinceMs,
      lostEnd: (row) => failure(row, handlers.get(row.name)!, "lost", undefined, "worker lost"),
      releasedEnd: released,
      counted: count,
      cancel,
      wake: Effect.suspend(() => wakeSelf)
    })

    // Stopped by the graceful shutdown above, which waits for it.
    loopFiber = yield* Effect.forkDaemon(Effect.interruptible(loop))
    return { id: workerId, running: Effect.sync(() => running) } satisfies WorkerHandle
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
