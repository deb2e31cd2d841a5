/**
 * Writes the ends of attempts — completions, retries, dead letters — in batches: one statement
 * writes every attempt that ended while the previous write was in flight, so higher concurrency
 * gives bigger batches and fewer commits per job.
 *
 * Every write is guarded by the job's id and attempt number and by `state = 'running'`: a worker
 * that lost its claim changes nothing, and is told so (`changed` false), so that it reports no
 * event and counts no metric for that end.
 *
 * A write may carry a worker's next claim (`Rider`): the same transaction ends the batch's
 * attempts and claims the slots they free, in one commit. On PostgreSQL it is one statement
 * (session 9: run c50 +31 %, run c10 +60 %, real work +22 % in one bench run); on MySQL/MariaDB the
 * ends are written with the claim's locking reads (session 10). docs/performance.md has the numbers.
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
import { type ClaimedRow, endKey, type Finish, type Group, type StaleEnds } from "../internal/statements.js"

/**
 * The end of one attempt.
 *
 * @since 0.1.0
 * @category models
 */
export type Outcome = Finish

/**
 * A claim to write in the same statement as a batch of ends.
 *
 * @since 0.2.0
 * @category models
 */
export interface RiderClaim {
  readonly groups: ReadonlyArray<Group>
  readonly limit: number
  /** µs since the epoch. */
  readonly nowUs: number
  readonly workerId: string
}

/**
 * A worker whose next claim rides on the write of its ends: the ends free slots and the claim
 * fills them in the same commit, so the worker never has more jobs claimed than slots, and the
 * claim costs no commit of its own (on PostgreSQL, no round trip either). Called on the completer's fiber, synchronously.
 *
 * @since 0.2.0
 * @category models
 */
export interface Rider {
  /**
   * A batch holding `ended` ends of this worker is about to be written: the claim to write with
   * it, or undefined. When it returns a claim, `claimed` is called exactly once.
   */
  readonly claimWith: (ended: number) => RiderClaim | undefined
  /** The jobs the claim took (none if it was not written), before the batch's ends call back. */
  readonly claimed: (rows: ReadonlyArray<ClaimedRow>) => void
  /** A batch holding ends of this worker was written without its claim. */
  readonly passed: () => void
}

/**
 * @since 0.1.0
 * @category models
 */
export interface CompleterShape {
  /**
   * Queues the end of an attempt; succeeds once it is written, with whether it changed the job
   * (false: the attempt was stale — the job was cancelled, or rescued as a lost worker's, while it
   * ran — and the row was left alone). Callers read only `false` (a wrapper typed to return
   * nothing means written).
   */
  readonly finish: (outcome: Outcome) => Effect.Effect<boolean | void>
  /**
   * Queues the end of an attempt and calls `onWritten` (on the completer's fiber, synchronously)
   * once it is written, with whether it changed the job (as `finish`; a wrapper that calls it
   * without an argument means true). For the worker's hot path: no fiber per outcome.
   */
  readonly unsafeFinish: (outcome: Outcome, onWritten: (changed?: boolean) => void, rider?: Rider) => void
  /** Whether a claim can ride on the write of ends (the statements have `jobFinishManyAndClaim`). */
  readonly riders?: boolean | undefined
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

type Entry = readonly [Outcome, (changed?: boolean) => void, Rider | undefined]

/** The most attempts one statement writes. */
const maxBatch = 1000

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = Effect.gen(function*() {
  const { statements } = yield* Database
  const pending = yield* Queue.unbounded<Entry>()

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
  const writeOne = (outcome: Outcome): Effect.Effect<StaleEnds> =>
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

  const written = (batch: ReadonlyArray<Entry>, stale: StaleEnds) =>
    Effect.sync(() => {
      if (stale.size === 0) for (const [, done] of batch) done(true)
      else for (const [outcome, done] of batch) done(!stale.has(endKey(outcome.id, outcome.attempt)))
    })

  /**
   * A failed batch, written end by end. The batch may have committed even so (the connection was
   * lost during its commit): then its ends are stale now, written by the batch. Those whose rows
   * hold what they wrote count as written.
   */
  const writeEach = (batch: ReadonlyArray<Entry>): Effect.Effect<StaleEnds> =>
    Effect.gen(function*() {
      const stale = new Set<string>()
      for (const [outcome] of batch) for (const key of yield* writeOne(outcome)) stale.add(key)
      if (stale.size === 0) return stale
      const ends = batch.map(([outcome]) => outcome).filter((o) => stale.has(endKey(o.id, o.attempt)))
      return yield* statements.jobEndsNotHeld(ends).pipe(Effect.orElseSucceed(() => stale))
    })

  const writeEnds = (batch: ReadonlyArray<Entry>): Effect.Effect<StaleEnds> =>
    statements.jobFinishMany(batch.map(([outcome]) => outcome)).pipe(Effect.catchAll(() => writeEach(batch)))

  const finishAndClaim = statements.jobFinishManyAndClaim

  /**
   * Writes a batch of ends and, when a worker with ends in it asks, that worker's claim in the same
   * statement (the worker with most ends in the batch; the others are told their ends passed
   * without a claim). A batch the database refuses is written end by end, without the claim.
   */
  const write = (batch: ReadonlyArray<Entry>, claims = true) =>
    Effect.suspend(() => {
      let counts: Map<Rider, number> | undefined
      for (const [, , rider] of batch) {
        if (rider === undefined) continue
        counts ??= new Map()
        counts.set(rider, (counts.get(rider) ?? 0) + 1)
      }
      if (counts === undefined) return Effect.flatMap(writeEnds(batch), (stale) => written(batch, stale))
      const riders = Array.from(counts).sort((a, b) => b[1] - a[1])
      let chosen: readonly [Rider, RiderClaim] | undefined
      for (const [rider, ended] of riders) {
        const claim = claims && finishAndClaim !== undefined && chosen === undefined
          ? rider.claimWith(ended)
          : undefined
        if (claim !== undefined) chosen = [rider, claim]
      }
      const passed = Effect.sync(() => {
        for (const [rider] of riders) if (rider !== chosen?.[0]) rider.passed()
      })
      if (chosen === undefined) {
        return writeEnds(batch).pipe(Effect.tap(() => passed), Effect.flatMap((stale) => written(batch, stale)))
      }
      const [rider, claim] = chosen
      const none: { claimed: ReadonlyArray<ClaimedRow>; stale: StaleEnds } = { claimed: [], stale: new Set() }
      return finishAndClaim!(batch.map(([outcome]) => outcome), claim.groups, claim.limit, claim.nowUs, claim.workerId)
        .pipe(
          Effect.catchAll((error) =>
            Effect.logDebug("sqlane: ending jobs with a claim failed; ending them alone", error).pipe(
              Effect.zipRight(writeEnds(batch)),
              Effect.map((stale) => ({ claimed: [], stale }))
            )
          ),
          // A defect must not end the completer: the ends count as written, nothing as claimed.
          Effect.catchAllDefect((defect) =>
            Effect.as(Effect.logError("sqlane: ending jobs with a claim failed", defect), none)
          ),
          Effect.flatMap(({ claimed, stale }) =>
            // The worker starts the jobs here, on this fiber: a defect must not end the completer.
            Effect.sync(() => rider.claimed(claimed)).pipe(
              Effect.catchAllDefect((defect) => Effect.logError("sqlane: starting claimed jobs failed", defect)),
              Effect.zipRight(passed),
              Effect.zipRight(written(batch, stale))
            )
          )
        )
    })

  /**
   * `write`, in as many writes as it takes for each to hold one end per attempt: a write tells its
   * stale ends by attempt (`endKey`), so two ends of one attempt — two workers of this process
   * rescued the same job of a lost worker — must not share one. The second is written after the
   * first, and found stale.
   */
  const writeDistinct = (batch: ReadonlyArray<Entry>, claims = true): Effect.Effect<void> => {
    const seen = new Set<string>()
    const now: Array<Entry> = []
    const later: Array<Entry> = []
    for (const entry of batch) {
      const key = endKey(entry[0].id, entry[0].attempt)
      if (seen.has(key)) later.push(entry)
      else {
        seen.add(key)
        now.push(entry)
      }
    }
    return later.length === 0 ? write(batch, claims) : Effect.zipRight(write(now, claims), writeDistinct(later, claims))
  }

  // Wait for the first outcome, then yield once so that attempts finishing in the same tick
  // (a claim's jobs often end together) join the batch: fewer, larger writes.
  yield* Queue.take(pending).pipe(
    Effect.zipLeft(Effect.yieldNow()),
    Effect.flatMap((first) =>
      Effect.map(Queue.takeUpTo(pending, maxBatch - 1), (rest) => [first, ...rest])
    ),
    Effect.flatMap((batch) => writeDistinct(batch)),
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
          : writeDistinct(Array.from(rest), false).pipe(
            Effect.interruptible,
            Effect.timeout("5 seconds"),
            Effect.catchAllCause((cause) => Effect.logWarning("sqlane: final completion write failed", cause))
          )
      )
    )
  )

  const unsafeFinish = (outcome: Outcome, onWritten: (changed?: boolean) => void, rider?: Rider) => {
    Queue.unsafeOffer(pending, [outcome, onWritten, rider] as const)
  }
  return {
    unsafeFinish,
    riders: finishAndClaim !== undefined,
    finish: (outcome) =>
      Effect.async<boolean>((resume) => unsafeFinish(outcome, (changed) => resume(Effect.succeed(changed !== false)), undefined))
  } satisfies CompleterShape
})

/**
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<Completer, never, Database> = Layer.scoped(Completer, make)
