/**
 * How the Completer writes one end alone, once the database refused the batch that held it. By why
 * it failed (`errorKind`): the database unavailable (a connection failure, a deadlock) — retried
 * until it is written; its values refused (a data error) — dead-lettered at once, saying why; any
 * other refusal (a trigger raising, a missing privilege) — retried a few times on a fiber of its
 * own, so that no other end waits for it, then dead-lettered. An end whose dead letter is refused
 * too is left unwritten: the job stays `running` until a rescuer takes it back once its worker is
 * gone, and a warning says so.
 *
 * @internal
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Cause from "effect/Cause"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as FiberSet from "effect/FiberSet"
import * as Schedule from "effect/Schedule"
import type { EndWritten } from "../claimsOnEnds.js"
import type { Driver, Finish, StaleEnds } from "../driver/Driver.js"
import { errorKind } from "../driver/errors.js"
import { endKey } from "../driver/shared.js"
import type { Reachability } from "../outage.js"
import { unrecorded } from "../sanitize.js"
import { wallSleep } from "../wallClock.js"

type Outcome = Finish

/**
 * While the database is unavailable, how long an end waits between writes: 50 ms doubling, at most
 * 5 s apart, for as long as it takes.
 */
const unavailableRetries = Schedule.exponential("50 millis").pipe(Schedule.union(Schedule.spaced("5 seconds")))

/** While closing, the pause between two tries of a write the database did not take (wall clock). */
const closingPauseMillis = 50

/**
 * An end the database refuses (neither unavailable nor refusing its values) is written 5 times in
 * all: again 100 ms, 200 ms, 400 ms and 800 ms after each refusal (at most 2 s apart), on Effect's
 * `Clock`.
 */
const refusalRetries = Schedule.exponential("100 millis").pipe(
  Schedule.union(Schedule.spaced("2 seconds")),
  Schedule.intersect(Schedule.recurs(4))
)

/** What the database said when it refused a write: its message, without the driver's wrapping. */
const saidWhy = (error: SqlError): string => {
  const cause = error.cause
  return cause instanceof Error && cause.message !== "" ? cause.message : String(cause ?? error.message)
}

/**
 * An end written alone: `end` is the end or the dead letter written in its place, `stale` whether
 * it changed nothing; or `"unwritten"`: neither it nor its dead letter could be written, the row
 * is left to a rescuer.
 */
export type Single = { readonly end: Outcome; readonly stale: boolean } | "unwritten"

/** Writes ends alone, by why the database refused them. */
export interface EndWriter {
  /** `effect`, retried while the database is unavailable, for as long as it takes. */
  readonly whileUnavailable: <A>(effect: Effect.Effect<A, SqlError>) => Effect.Effect<A, SqlError>
  /**
   * Of `stale`, the ends their rows do not hold. A write retried after its connection failed may
   * have committed unseen; its ends are stale then, written by it.
   */
  readonly notHeld: (ends: ReadonlyArray<Outcome>, stale: StaleEnds) => Effect.Effect<StaleEnds>
  /**
   * One end written alone; `"retrying"`: it is retried on a fiber of its own (in `retrying`), and
   * `done` is called when that ends.
   */
  readonly writeOne: (outcome: Outcome, done: EndWritten) => Effect.Effect<Single | "retrying">
}

export interface EndWriterOptions {
  readonly driver: Driver
  readonly reachability: Reachability
  /** Done when the Completer closes: refused ends are dead-lettered at once from then on, retries end. */
  readonly closing: Deferred.Deferred<void>
  readonly isClosed: () => boolean
  /** Where refused ends are retried, each on a fiber of its own. */
  readonly retrying: FiberSet.FiberSet<void>
  /** Told of each end a dead letter was written in place of (it was logged). */
  readonly onLetteredInPlace: (outcome: Outcome) => void
}

export const makeEndWriter = (
  { closing, driver, isClosed, onLetteredInPlace, reachability, retrying }: EndWriterOptions
): EndWriter => {
  /**
   * `effect`, retried while the database is unavailable, for as long as it takes (at close, up to
   * the close's bound). Once closing, a pause is cut short: the close wants the ends written now,
   * and the database may be back.
   */
  const whileUnavailable = <A>(effect: Effect.Effect<A, SqlError>): Effect.Effect<A, SqlError> =>
    Effect.gen(function*() {
      const pauses = yield* Schedule.driver(unavailableRetries)
      while (true) {
        const tried = yield* Effect.either(effect)
        if (Either.isRight(tried)) return tried.right
        if (errorKind(tried.left) !== "unavailable") return yield* Effect.fail(tried.left)
        yield* reachability.failed("completer", "sqlane: completing jobs failed; retrying", Cause.fail(tried.left))
        yield* isClosed()
          ? wallSleep(closingPauseMillis)
          : Effect.raceFirst(Effect.ignore(pauses.next(undefined)), Deferred.await(closing))
      }
    })

  /**
   * Of `stale`, the ends their rows do not hold. A write retried after its connection failed may
   * have committed unseen; its ends are stale then, written by it.
   */
  const notHeld = (ends: ReadonlyArray<Outcome>, stale: StaleEnds): Effect.Effect<StaleEnds> =>
    stale.size === 0
      ? Effect.succeed(stale)
      : driver.jobEndsNotHeld(ends.filter((o) => stale.has(endKey(o.id, o.attempt)))).pipe(
        Effect.orElseSucceed(() => stale)
      )

  /**
   * The dead letter written in place of an end the database refused, saying why. If it is refused
   * too, the end is left unwritten, with a warning: the job stays `running`, and a rescuer takes it
   * back once its worker is gone (its lock free, or its lease passed).
   */
  const deadLetter = (outcome: Outcome, refusal: SqlError): Effect.Effect<Single> => {
    const dead = unrecorded(outcome, saidWhy(refusal))
    return whileUnavailable(driver.jobFinishMany([dead])).pipe(
      Effect.map((stale): Single => ({ end: dead, stale: stale.size > 0 })),
      Effect.tap(() =>
        Effect.suspend(() => {
          onLetteredInPlace(outcome)
          return Effect.logError(
            `sqlane: job ${outcome.id}${outcome.name === undefined ? "" : ` (${outcome.name})`} is dead after attempt ` +
              `${outcome.attempt}: the database ` +
              `refused this attempt's end: ${saidWhy(refusal)}`
          )
        })
      ),
      Effect.catchAll((error) =>
        Effect.as(
          Effect.logWarning(
            "sqlane: the database refused this attempt's end and the dead letter in its place; the job stays " +
              `running until a rescuer takes it back once its worker is gone: ${saidWhy(refusal)}; then: ${saidWhy(error)}`
          ),
          "unwritten" as const
        )
      ),
      Effect.annotateLogs({
        "sqlane.job.id": outcome.id,
        ...(outcome.name === undefined ? {} : { "sqlane.job.name": outcome.name }),
        "sqlane.job.attempt": outcome.attempt
      })
    )
  }

  /**
   * Retries an end the database refused (`first`), on a fiber of its own: up to `refusalRetries`,
   * then its dead letter. Once `closing` is done it waits no more: its dead letter is written at
   * once.
   */
  const retryRefused = (outcome: Outcome, done: EndWritten, first: SqlError): Effect.Effect<void> =>
    Effect.gen(function*() {
      const pauses = yield* Schedule.driver(refusalRetries)
      let refusal = first
      let result: Single | undefined
      while (result === undefined) {
        const again = yield* Effect.raceFirst(
          Effect.isSuccess(pauses.next(undefined)),
          Effect.as(Deferred.await(closing), false)
        )
        if (!again) break
        const tried = yield* Effect.either(whileUnavailable(driver.jobFinishMany([outcome])))
        if (Either.isRight(tried)) result = { end: outcome, stale: tried.right.size > 0 }
        else if (errorKind((refusal = tried.left)) !== "refused") break
      }
      result ??= yield* deadLetter(outcome, refusal)
      if (result === "unwritten") return done(false, true)
      const { end, stale } = result
      done(!stale || (yield* notHeld([end], new Set([endKey(end.id, end.attempt)]))).size === 0)
    }).pipe(
      // A defect must not leave the job's slot taken: the end counts as unwritten.
      Effect.catchAllDefect((defect) =>
        Effect.logError("sqlane: retrying a refused end failed", defect).pipe(
          Effect.zipRight(Effect.sync(() => done(false, true)))
        )
      )
    )

  /**
   * One end of a batch the database refused, written alone. The database unavailable: retried until
   * it is written. Its values refused: dead-lettered at once. Any other refusal: retried on a
   * fiber of its own (`retryRefused`), or while closing dead-lettered at once.
   */
  const writeOne = (outcome: Outcome, done: EndWritten): Effect.Effect<Single | "retrying"> =>
    whileUnavailable(driver.jobFinishMany([outcome])).pipe(
      Effect.map((stale): Single | "retrying" => ({ end: outcome, stale: stale.size > 0 })),
      Effect.catchAll((error): Effect.Effect<Single | "retrying"> =>
        errorKind(error) === "data" || isClosed()
          ? deadLetter(outcome, error)
          : Effect.as(FiberSet.run(retrying, retryRefused(outcome, done, error)), "retrying" as const)
      )
    )

  return { whileUnavailable, notHeld, writeOne }
}
