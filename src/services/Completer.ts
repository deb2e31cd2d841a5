/**
 * Writes the ends of attempts — completions, retries, dead letters — in batches: one statement
 * writes every attempt that ended while the previous write was in flight, so higher concurrency
 * gives bigger batches and fewer commits per job.
 *
 * Every write is guarded by the job's id and attempt number and by `state = 'running'`: a worker
 * that lost its claim changes nothing, and is told so (`changed` false), so that it reports no
 * event and counts no metric for that end.
 *
 * A batch the database refuses is written end by end. How an end that still fails is handled
 * depends on why (`errorKind`): the database unavailable (a connection failure, a deadlock) — it is
 * retried until it is written, and every end waits, since the database is gone for all of them;
 * its values refused (a data error) — the job is dead-lettered at once, saying why; any other
 * refusal (a trigger raising, a missing privilege) — it is retried a few times apart on its own
 * fiber, so that no other end waits for it, then dead-lettered. An end whose dead letter is refused
 * too is left unwritten: the job stays `running` until a rescuer takes it back as its worker's once
 * that worker is gone, and a warning says so (`internal/completer/endWriter.ts`).
 *
 * A write may carry a worker's next claim: the batch holding a worker's ends asks it for the claim
 * (`internal/claimsOnEnds.ts`), and the Claimer writes the ends and makes the claim in one commit
 * (`Claimer.finishAndClaim`), the slots the ends free filled by the claim. On PostgreSQL it is one
 * statement, so the claim costs neither a commit nor a round trip of its own; on MySQL/MariaDB the
 * ends are written with the claim's locking reads, in one transaction. What the claim took goes back to the worker as data; the worker starts
 * the jobs. docs/performance.md ("Run") says what bounds a drain.
 *
 * Every end written is told to the facts hub (`internal/facts.ts`) — changed its job, or stale —
 * which `Events` turns into events.
 *
 * Source: River's batch completer (`internal/jobcompleter`).
 *
 * @since 0.1.0
 */
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as FiberSet from "effect/FiberSet"
import * as Layer from "effect/Layer"
import * as Queue from "effect/Queue"
import type * as Scope from "effect/Scope"
import type { Claimant, ClaimRequest, EndWritten } from "../internal/claimsOnEnds.js"
import { makeEndWriter } from "../internal/completer/endWriter.js"
import { Database } from "../internal/Database.js"
import { Facts } from "../internal/facts.js"
import { bounded, forkScopedBounded, idList } from "../internal/outage.js"
import type { ClaimedRow, Finish, StaleEnds } from "../internal/driver/Driver.js"
import { endKey, handKey } from "../internal/driver/shared.js"
import { Claimer } from "./Claimer.js"

/**
 * The end of one attempt.
 *
 * @example
 * ```ts
 * const completer = yield* Completer.Completer
 * const changed = yield* completer.finish({
 *   id: job.id, attempt: job.attempt, state: "completed",
 *   runAtUs: null, finishedAtUs: Date.now() * 1000, lastError: null, errors: null, result: null
 * })
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export type Outcome = Finish

/**
 * What the `Completer` service does: writes the ends of attempts, many in one statement.
 *
 * @example
 * ```ts
 * const completer = yield* Completer.Completer
 * const changed = yield* completer.finish(outcome) // false: the attempt was stale and nothing changed
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface CompleterShape {
  /**
   * Queues the end of an attempt; succeeds once it is written, with whether it changed the job
   * (false: the attempt was stale — the job was cancelled, or rescued as a lost worker's, while it
   * ran — and the row was left alone; or the database refused the end and its dead letter, and the
   * row was left `running`). Callers read only `false` (a wrapper typed to return nothing means
   * written).
   */
  readonly finish: (outcome: Outcome) => Effect.Effect<boolean | void>
  /**
   * Queues the end of an attempt and calls `onWritten` (on a fiber of the completer, synchronously)
   * once it is written, with whether it changed the job (as `finish`), and whether it was left
   * unwritten (see `EndWritten`): the worker then goes on counting the job as its own until a
   * rescuer takes it back (its own rescuer must not take it back as a claim whose answer was lost).
   * For the worker's hot path: no fiber per outcome. `claimant`: the worker whose next claim may be
   * made with the write (`internal/claimsOnEnds.ts`).
   */
  readonly submit: (outcome: Outcome, onWritten: EndWritten, claimant?: Claimant) => void
}

/** The ends the Completer dead-lettered in place of an end the database refused (it logged them). */
const letteredInPlace = new WeakSet<Outcome>()

/**
 * Whether the Completer wrote a dead letter in place of this end, which the database refused (and
 * logged it at `Error`): the worker logs no line of its own for it.
 *
 * @internal
 */
export const deadLetteredInPlace = (outcome: Outcome): boolean => letteredInPlace.has(outcome)

/**
 * The service that writes the ends of attempts in batches: every end that arrives during one
 * write goes into the next. Provided by `QueueLive`.
 *
 * @example
 * ```ts
 * // Provided by QueueLive; workers write their ends through it
 * const end = (outcome: Completer.Outcome) => Effect.flatMap(Completer.Completer, (c) => c.finish(outcome))
 * ```
 *
 * @since 0.1.0
 * @category tags
 */
export class Completer extends Context.Tag("sqlane/Completer")<Completer, CompleterShape>() {}

type Entry = readonly [Outcome, EndWritten, Claimant | undefined]

/** The most attempts one statement writes. */
const maxBatch = 1000

/**
 * Builds the `Completer` service and its writer fiber in the current scope (used by {@link layer}).
 *
 * @example
 * ```ts
 * // QueueLive provides Completer; this is how it builds it
 * const CompleterLive = Layer.scoped(Completer.Completer, Completer.make)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make: Effect.Effect<CompleterShape, never, Database | Claimer | Facts | Scope.Scope> = Effect.gen(function*() {
  const { reachability, driver } = yield* Database
  const claimer = yield* Claimer
  const facts = yield* Facts
  /** The ends queued and not yet taken by a write. */
  const pending: Array<Entry> = []
  /** The ends queued and not yet called back: at close, those that could not be written. */
  const outstanding = new Set<Entry>()
  /** Open while `pending` holds ends. */
  const queued = yield* Effect.makeLatch(false)
  /** Open while the loop writes no batch. */
  const idle = yield* Effect.makeLatch(true)

  /** Done when the completer closes: ends refused from then on are dead-lettered at once, retries end. */
  const closing = yield* Deferred.make<void>()
  let closed = false
  /** The refused ends being retried, each on a fiber of its own. */
  const retrying = yield* FiberSet.make<void>()

  const endWriter = makeEndWriter({
    driver,
    reachability,
    closing,
    isClosed: () => closed,
    retrying,
    onLetteredInPlace: (outcome) => letteredInPlace.add(outcome)
  })
  const { notHeld } = endWriter

  /** Entries of a batch written end by end that are not called back with the batch. */
  const aside = new Map<Entry, "unwritten" | "retrying">()

  /** `retaker`: the worker whose claim, carried by the write, took as many jobs as it had ends in it. */
  const written = (batch: ReadonlyArray<Entry>, stale: StaleEnds, retaker?: Claimant) =>
    Effect.sync(() => {
      if (stale.size === 0 && aside.size === 0) {
        for (const [, done, claimant] of batch) done(true, undefined, retaker !== undefined && claimant === retaker, true)
      } else {
        for (const entry of batch) {
          const put = aside.get(entry)
          const { attempt, id } = entry[0]
          if (put !== undefined) {
            aside.delete(entry)
            if (put === "unwritten") entry[1](false, true, false, false)
          } else {
            entry[1](
              !stale.has(endKey(id, attempt)),
              undefined,
              retaker !== undefined && entry[2] === retaker,
              !stale.has(handKey(id, attempt))
            )
          }
        }
      }
    })

  /**
   * A failed batch, written end by end. The batch may have committed even so (the connection was
   * lost during its commit): then its ends are stale now, written by the batch. Those whose rows
   * hold what they wrote count as written. Ends that are neither written nor stale are set `aside`.
   */
  const writeEach = (batch: ReadonlyArray<Entry>): Effect.Effect<StaleEnds> =>
    Effect.gen(function*() {
      const stale = new Set<string>()
      const ends: Array<Outcome> = []
      for (const entry of batch) {
        const single = yield* endWriter.writeOne(entry[0], entry[1])
        if (typeof single === "string") aside.set(entry, single)
        else if (single.stale) {
          stale.add(endKey(single.end.id, single.end.attempt))
          ends.push(single.end)
        }
      }
      const notWritten = yield* notHeld(ends, stale)
      // Whether a slot passed is not known here (a retried write may have committed unseen): the
      // worker takes it for not passed.
      const handing = batch.filter(([outcome]) => outcome.handTo !== undefined)
      if (handing.length === 0) return notWritten
      const all = new Set(notWritten)
      for (const [outcome] of handing) all.add(handKey(outcome.id, outcome.attempt))
      return all
    })

  const writeEnds = (batch: ReadonlyArray<Entry>): Effect.Effect<StaleEnds> =>
    driver.jobFinishMany(batch.map(([outcome]) => outcome)).pipe(Effect.catchAll(() => writeEach(batch)))

  /**
   * Writes a batch of ends and, when a worker with ends in it asks, that worker's claim in the same
   * commit (`Claimer.finishAndClaim`; the worker with most ends in the batch is offered it first,
   * the others are told the batch carries none of theirs). What the claim took is put in the
   * worker's answers before the batch's ends call back. A batch the database refuses is written end
   * by end, without the claim.
   */
  const write = (batch: ReadonlyArray<Entry>, claims = true) =>
    Effect.suspend(() => {
      let counts: Map<Claimant, number> | undefined
      for (const [, , claimant] of batch) {
        if (claimant === undefined) continue
        counts ??= new Map()
        counts.set(claimant, (counts.get(claimant) ?? 0) + 1)
      }
      if (counts === undefined) return Effect.flatMap(writeEnds(batch), (stale) => written(batch, stale))
      let chosen: readonly [Claimant, ClaimRequest] | undefined
      for (const [claimant, ended] of Array.from(counts).sort((a, b) => b[1] - a[1])) {
        const claim = claimant.claimWith(ended, claims && claimer.claimsOnEnds && chosen === undefined)
        if (claim !== undefined && chosen === undefined) chosen = [claimant, claim]
      }
      if (chosen === undefined) return Effect.flatMap(writeEnds(batch), (stale) => written(batch, stale))
      const [claimant, claim] = chosen
      // After a defect nothing is known of the write: no slot counts as passed.
      const none = (): { claimed: ReadonlyArray<ClaimedRow>; stale: StaleEnds; failed: boolean } => ({
        claimed: [],
        stale: new Set(batch.flatMap(([o]) => (o.handTo === undefined ? [] : [handKey(o.id, o.attempt)]))),
        failed: true
      })
      return claimer.finishAndClaim(batch.map(([outcome]) => outcome), claim.groups, claim.limit, claim.nowUs, claim.workerId, claim.keyed)
        .pipe(
          Effect.map(({ claimed, stale }) => ({ claimed, stale, failed: false })),
          Effect.catchAll((error) =>
            Effect.logDebug("sqlane: ending jobs with a claim failed; ending them alone", error).pipe(
              Effect.zipRight(writeEnds(batch)),
              Effect.map((stale) => ({ claimed: [], stale, failed: true }))
            )
          ),
          // A defect must not end the completer: the ends count as written, nothing as claimed.
          Effect.catchAllDefect((defect) =>
            Effect.map(Effect.logError("sqlane: ending jobs with a claim failed", defect), none)
          ),
          Effect.flatMap(({ claimed, failed, stale }) => {
            Queue.unsafeOffer(claimant.answers, { rows: claimed, asked: claim.limit, failed })
            return written(batch, stale, claimed.length >= (counts!.get(claimant) ?? 0) ? claimant : undefined)
          })
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
  // (a claim's jobs often end together) join the batch: fewer, larger writes. The batch is taken
  // and `idle` closed in one step, so that on shutdown the finalizer either takes an end or waits
  // for the write that took it. Once closing, the loop takes no more.
  yield* queued.await.pipe(
    Effect.zipRight(Effect.yieldNow()),
    Effect.flatMap(() => {
      if (closed) return Effect.never
      const batch = pending.splice(0, maxBatch)
      if (pending.length === 0) queued.unsafeClose()
      if (batch.length === 0) return Effect.void
      idle.unsafeClose()
      return Effect.ensuring(writeDistinct(batch), idle.open)
    }),
    Effect.forever,
    Effect.annotateLogs({ package: "sqlane", module: "Completer" }),
    (effect) => forkScopedBounded(effect, 100)
  )
  // On shutdown, let the loop's write end and write what is left (workers have stopped by then), as
  // the loop does: a batch the database refuses is written outcome by outcome, and an end it refuses
  // is dead-lettered at once; so are the refused ends being retried. At most 1 s of wall-clock
  // time, and not at all while the database is unreachable: the ends left unwritten leave their jobs
  // `running`, for the rescuers of other workers.
  yield* Effect.addFinalizer(() =>
    Effect.suspend(() => {
      closed = true
      return Deferred.succeed(closing, undefined)
    }).pipe(
      Effect.zipRight(Effect.suspend(() => {
        const write = idle.await.pipe(
          Effect.flatMap(() => {
            const rest = pending.splice(0)
            return rest.length === 0 ? Effect.void : writeDistinct(rest, false)
          }),
          Effect.zipRight(FiberSet.awaitEmpty(retrying))
        )
        // Skipped while the database is unreachable, once asked again (it may be back by now).
        return Effect.flatMap(reachability.recheck(300), (answers) =>
          !answers ? Effect.void : Effect.flatMap(bounded(write, 1000), (written) =>
            written._tag === "Some" ? Effect.void : reachability.failed(
              "completing jobs at close",
              "",
              Cause.fail(new Cause.TimeoutException("no answer within 1000 ms")),
              false
            )))
      })),
      Effect.flatMap(() => {
        if (outstanding.size === 0) return Effect.void
        const ids = Array.from(outstanding, ([outcome]) => outcome.id)
        return Effect.logWarning(
          `sqlane: ${ids.length} job end(s) could not be written at close${
            reachability.unreachable() ? " (the database is unreachable)" : ""
          }; those jobs stay running until other workers rescue them as a lost worker's: ${idList(ids)}`
        )
      }),
      Effect.catchAllCause((cause) => Effect.logWarning("sqlane: final completion write failed", cause)),
      Effect.annotateLogs({ package: "sqlane", module: "Completer" })
    )
  )

  const submit = (outcome: Outcome, onWritten: EndWritten, claimant?: Claimant) => {
    const entry: Entry = [outcome, (changed, unwritten, retaken, handed) => {
      outstanding.delete(entry)
      onWritten(changed, unwritten, retaken, handed)
      if (!facts.wanted()) return
      if (changed === false) facts.stale(outcome)
      else facts.ended(outcome)
    }, claimant]
    outstanding.add(entry)
    pending.push(entry)
    if (pending.length === 1) queued.unsafeOpen()
  }
  return {
    submit,
    finish: (outcome) =>
      Effect.async<boolean>((resume) => submit(outcome, (changed) => resume(Effect.succeed(changed !== false))))
  } satisfies CompleterShape
})

/**
 * The `Completer` service as a layer; `QueueLive` includes it.
 *
 * @example
 * ```ts
 * // Part of QueueLive; an app provides QueueLive instead
 * const AppLive = QueueLive().pipe(Layer.provideMerge(ClientLive))
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<Completer, never, Database | Claimer | Facts> = Layer.scoped(Completer, make)
