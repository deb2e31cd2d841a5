/**
 * The attempt executor: a claimed job's payload decoded by its job's schema, its handler run on a
 * fiber of its own — a root fiber with the worker's context, on a scheduler that contains a fiber
 * Effect's run loop cannot go on with (`internal/guardedScheduler.ts`), interruptible by a cancel, a
 * timeout or shutdown — and how it ended settled into the end the Completer writes
 * (`outcomes.ts`). The common case, a success whose result encodes synchronously, is settled in
 * the fiber's observer without another fiber.
 *
 * @internal
 */
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import type * as FiberId from "effect/FiberId"
import * as FiberRef from "effect/FiberRef"
import * as FiberRefs from "effect/FiberRefs"
import { identity } from "effect/Function"
import * as HashMap from "effect/HashMap"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Runtime from "effect/Runtime"
import * as RuntimeFlags from "effect/RuntimeFlags"
import * as Schema from "effect/Schema"
import * as Tracer from "effect/Tracer"
import { JobTimeout } from "../../schema/Errors.js"
import { type Handler, type JobContext, schemasOf } from "../../schema/Job.js"
import type { Outcome } from "../../services/Completer.js"
import { ofJobName } from "../../services/Metrics.js"
import type { ClaimedRow } from "../driver/Driver.js"
import { guardedScheduler } from "../guardedScheduler.js"
import { describe, guardCause, prettyCause, text as sanitizeText } from "../sanitize.js"
import { microsToDate } from "../time.js"
import { builtInTracer, decodeTraceContext } from "../tracing.js"
import { wallSleep } from "../wallClock.js"
import type { Outcomes } from "./outcomes.js"
import type { Inflight } from "./slots.js"

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

/** What the executor needs of its worker. */
export interface AttemptsHost<R> {
  readonly handlers: ReadonlyMap<string, Handler<R>>
  /** The attempts running here, by job id (the worker's slots). */
  readonly inflight: Map<string, Inflight>
  readonly outcomes: Outcomes<R>
  /** Hands an attempt's end to be written. */
  readonly submit: (row: ClaimedRow, end: Outcome) => void
}

export interface Attempts {
  /**
   * Decodes the payload of a claimed job and launches its attempt, or dead-letters the job. A start
   * that throws fails its own attempt.
   */
  readonly start: (row: ClaimedRow) => void
  /** Interrupts the attempts of these jobs running here (cancelled jobs). */
  readonly cancel: (ids: ReadonlyArray<string>) => void
  /**
   * Stops an attempt that runs without the slot of a concurrency limit it was to hold (the slot did
   * not pass to it): interrupted, and released (back to pending, the attempt not counted).
   */
  readonly stop: (row: ClaimedRow) => void
}

/** The executor of a worker's attempts, run with the worker's context (`R`). */
export const make = <R>(host: AttemptsHost<R>): Effect.Effect<Attempts, never, R> =>
  Effect.gen(function*() {
    const { handlers, inflight, outcomes, submit } = host
    const { codecs, completed, failure, released, settle } = outcomes
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
    const annotationsOfName = new Map(Array.from(handlers.keys(), (name) => [
      name,
      HashMap.set(FiberRefs.getOrDefault(runtime.fiberRefs, FiberRef.currentLogAnnotations), "sqlane.job.name", name)
    ]))
    const annotated = (refs: FiberRefs.FiberRefs, fiberId: FiberId.Runtime, row: ClaimedRow) =>
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
    /**
     * An attempt's end is always written, so its job never stays `running` under a live worker: a
     * defect while working the end out (a schema that throws or overflows the stack, a retry schedule
     * that throws) fails the attempt with that defect, and if even that dies, the job is dead-lettered.
     */
    const orLastResort = <E>(row: ClaimedRow, handler: Handler<R>, outcome: Effect.Effect<Outcome | undefined, E>) =>
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

    /**
     * Runs the handler on a fiber of its own (so a cancellation or a shutdown can interrupt it)
     * and records how it ended. The common case — a success whose result encodes synchronously —
     * is settled in the fiber's observer without another fiber.
     */
    const launch = (row: ClaimedRow, handler: Handler<R>, payload: unknown) => {
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

    /** Attempts whose payload is being decoded (not launched yet), and those of them stopped (`stop`), by `id:attempt`. */
    const decoding = new Set<string>()
    const stoppedEarly = new Set<string>()

    /** Decodes the payload of a claimed job and launches its attempt, or dead-letters the job. */
    const decodeAndLaunch = (row: ClaimedRow) => {
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
      decoding.add(`${row.id}:${row.attempts}`)
      runFork(orLastResort(row, handler, Effect.gen(function*() {
        const job = handler.job
        const payload = yield* Effect.try(() => JSON.parse(row.payload)).pipe(
          Effect.flatMap(Schema.decodeUnknown(schemasOf(job).payload)),
          // A schema that throws, or a recursive one on a payload nested too deeply (stack overflow).
          Effect.catchAllDefect((defect) => Effect.fail(defect)),
          Effect.either
        )
        // Stopped while its payload was decoded (its slot of a limit did not pass to it): released.
        decoding.delete(`${row.id}:${row.attempts}`)
        const wasStopped = stoppedEarly.delete(`${row.id}:${row.attempts}`)
        if (Either.isRight(payload)) {
          if (wasStopped) return released(row)
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
    const stop = (row: ClaimedRow) => {
      const entry = inflight.get(row.id)
      if (entry !== undefined && entry.attempt === row.attempts) {
        if (entry.reason !== undefined) return
        entry.reason = "slot"
        Effect.runFork(Fiber.interrupt(entry.fiber))
      } else if (decoding.has(`${row.id}:${row.attempts}`)) {
        // Not launched yet (its payload is being decoded): released instead of launched.
        stoppedEarly.add(`${row.id}:${row.attempts}`)
      }
    }
    return {
      stop,
      start: (row) => {
        try {
          decodeAndLaunch(row)
        } catch (defect) {
          // A start that throws fails its own attempt, not the claim's other jobs.
          runFork(orLastResort(row, handlers.get(row.name)!, Effect.die(defect)))
        }
      },
      cancel
    } satisfies Attempts
  })
