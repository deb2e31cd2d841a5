/**
 * Writes the ends of attempts — completions, retries, dead letters — in batches: one statement
 * writes every attempt that ended while the previous write was in flight, so higher concurrency
 * gives bigger batches and fewer commits per job.
 *
 * Every write is guarded by the job's id and attempt number and by `state = 'running'`: a worker
 * that lost its claim changes nothing.
 *
 * Source: River's batch completer (`internal/jobcompleter`).
 *
 * @since 0.1.0
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Queue from "effect/Queue"
import * as Schedule from "effect/Schedule"
import { Database } from "../internal/Database.js"
import type { Finish } from "../internal/statements.js"

/**
 * The end of one attempt.
 *
 * @since 0.1.0
 * @category models
 */
export type Outcome = Finish

/**
 * @since 0.1.0
 * @category models
 */
export interface CompleterShape {
  /** Queues the end of an attempt; succeeds once it is written. */
  readonly finish: (outcome: Outcome) => Effect.Effect<void>
  /**
   * Queues the end of an attempt and calls `onWritten` (on the completer's fiber, synchronously)
   * once it is written. For the worker's hot path: no fiber per outcome.
   */
  readonly unsafeFinish: (outcome: Outcome, onWritten: () => void) => void
}

/**
 * @since 0.1.0
 * @category tags
 */
export class Completer extends Context.Tag("sqlane/Completer")<Completer, CompleterShape>() {}

/**
 * Whether the database refused the values (not the connection): PostgreSQL SQLSTATE classes 22
 * (data exception), 23, 42, 54 (program limit); MySQL/MariaDB packet too large, bad string value,
 * data too long, out of range.
 */
const isDataError = (error: SqlError): boolean => {
  const cause = error.cause as { code?: unknown; errno?: unknown; sqlState?: unknown } | undefined
  if (typeof cause?.errno === "number") {
    return [1153, 1264, 1366, 1406, 3140].includes(cause.errno) ||
      (typeof cause.sqlState === "string" && /^2[23]/.test(cause.sqlState))
  }
  return typeof cause?.code === "string" && /^(22|23|42|54)[0-9A-Z]{3}$/.test(cause.code)
}

/** The most attempts one statement writes. */
const maxBatch = 1000

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = Effect.gen(function*() {
  const { statements } = yield* Database
  const pending = yield* Queue.unbounded<readonly [Outcome, () => void]>()

  const retryForever = <A, E>(effect: Effect.Effect<A, E>) =>
    effect.pipe(
      Effect.tapErrorCause((cause) => Effect.logWarning("sqlane: completing jobs failed; retrying", cause)),
      Effect.retry(Schedule.exponential("50 millis").pipe(Schedule.union(Schedule.spaced("5 seconds")))),
      // the schedule never ends
      Effect.orDie
    )

  /**
   * One outcome the database refuses (a value it cannot store, say a result over MySQL's
   * `max_allowed_packet`) must not stall the others: a failed batch is written one outcome at a
   * time, and an outcome that still fails is recorded as a dead letter saying why. Only a write
   * that fails even then (the database is unreachable) is retried until it succeeds.
   */
  const writeOne = (outcome: Outcome): Effect.Effect<void> =>
    statements.jobFinishMany([outcome]).pipe(
      Effect.catchAll((error) =>
        !isDataError(error) ? Effect.fail(error) : statements.jobFinishMany([{
          ...outcome,
          state: "dead",
          runAtUs: null,
          finishedAtUs: outcome.finishedAtUs ?? outcome.runAtUs ?? 0,
          lastError: `sqlane could not record this attempt's end: ${String(error.cause ?? error.message)}`
            .replaceAll("\u0000", "\uFFFD")
            .slice(0, 2000),
          errors: null,
          result: null
        }])
      ),
      retryForever
    )

  const written = (batch: ReadonlyArray<readonly [Outcome, () => void]>) =>
    Effect.sync(() => {
      for (const [, done] of batch) done()
    })

  const write = (batch: ReadonlyArray<readonly [Outcome, () => void]>) =>
    statements.jobFinishMany(batch.map(([outcome]) => outcome)).pipe(
      Effect.catchAll(() => Effect.forEach(batch, ([outcome]) => writeOne(outcome), { discard: true })),
      Effect.zipRight(written(batch))
    )

  // Wait for the first outcome, then yield once so that attempts finishing in the same tick
  // (a claim's jobs often end together) join the batch: fewer, larger writes.
  yield* Queue.take(pending).pipe(
    Effect.zipLeft(Effect.yieldNow()),
    Effect.flatMap((first) =>
      Effect.map(Queue.takeUpTo(pending, maxBatch - 1), (rest) => [first, ...rest])
    ),
    Effect.flatMap(write),
    Effect.forever,
    Effect.annotateLogs({ package: "sqlane", module: "Completer" }),
    Effect.interruptible,
    Effect.forkScoped
  )
  // On shutdown, write what is left (workers have stopped by then), as the loop does: a batch the
  // database refuses is written outcome by outcome. At most 5 s: the database may be gone.
  yield* Effect.addFinalizer(() =>
    Queue.takeAll(pending).pipe(
      Effect.flatMap((rest) =>
        rest.length === 0
          ? Effect.void
          : write(Array.from(rest)).pipe(
            Effect.interruptible,
            Effect.timeout("5 seconds"),
            Effect.catchAllCause((cause) => Effect.logWarning("sqlane: final completion write failed", cause))
          )
      )
    )
  )

  const unsafeFinish = (outcome: Outcome, onWritten: () => void) => {
    Queue.unsafeOffer(pending, [outcome, onWritten] as const)
  }
  return {
    unsafeFinish,
    finish: (outcome) => Effect.async<void>((resume) => unsafeFinish(outcome, () => resume(Effect.void)))
  } satisfies CompleterShape
})

/**
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<Completer, never, Database> = Layer.scoped(Completer, make)
