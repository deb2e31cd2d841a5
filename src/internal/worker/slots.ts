/**
 * A worker's slots: the jobs it holds against its `concurrency` — claimed, and their end not yet
 * written — the attempts running here, the claim statements in flight, and the waits on them (a slot
 * freed, every slot free).
 *
 * A slot is taken when a claim brings a job back (`take`, before the job starts) and freed once the
 * job's end is written (`ended`). Whoever decides how many jobs to claim asks `free()`.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import type * as Fiber from "effect/Fiber"
import * as Queue from "effect/Queue"
import type { ClaimedRow } from "../driver/Driver.js"

/** An attempt running here: its handler's fiber, and why it is being interrupted. */
export interface Inflight {
  readonly fiber: Fiber.RuntimeFiber<unknown, unknown>
  readonly attempt: number
  reason: "cancel" | "shutdown" | undefined
  /** Ends the attempt whose fiber Effect's run loop threw out of (see `internal/guardedScheduler.ts`). */
  readonly stopped: (thrown: unknown) => void
}

export interface Slots {
  readonly concurrency: number
  /** Jobs held: claimed, and their end not yet written. */
  readonly running: () => number
  /** Slots free: `concurrency - running()`. */
  readonly free: () => number
  /** Attempts running here, by job id. */
  readonly inflight: Map<string, Inflight>
  /**
   * Claimed by this instance and not yet ended, by job id: the attempt (covers the moment between
   * claim and start, and between an attempt's end and its write). A retry can be claimed before the
   * write of the attempt before it has called back, so an end removes only its own attempt.
   */
  readonly claiming: ReadonlyMap<string, number>
  /** Whether this instance holds the job: running here, or claimed and its end not yet written. */
  readonly holds: (id: string) => boolean
  /** Takes a slot for each job a claim brought back. */
  readonly take: (rows: ReadonlyArray<ClaimedRow>) => void
  /**
   * Frees the slot of a job whose end was written. `unwritten`: the database refused the end and the
   * dead letter in its place; the job stays `running` under this worker and stays held, so that this
   * worker's rescuer does not take it for a lost claim.
   */
  readonly ended: (row: ClaimedRow, unwritten: boolean | undefined) => void
  /** Waits until a slot is freed (one wait covers every slot freed since the last). */
  readonly slotFreed: Effect.Effect<void>
  /**
   * A claim statement starts: jobs it brings back are not held yet. `withEnds`: it is made with the
   * write of this worker's ends, which may free every slot before its jobs are taken: until they
   * are, the slots are not idle.
   */
  readonly claimStarted: (withEnds: boolean) => void
  /** A claim statement ended, its jobs taken. */
  readonly claimEnded: (withEnds: boolean) => void
  /** How many claim statements have started. */
  readonly claimsStarted: () => number
  /** Waits until `n` claim statements have ended. */
  readonly claimsEnded: (n: number) => Effect.Effect<void>
  /** Waits until no job is held and no claim made with ends is in flight. */
  readonly awaitIdle: Effect.Effect<void>
}

export const make = (concurrency: number): Effect.Effect<Slots> =>
  Effect.gen(function*() {
    const inflight = new Map<string, Inflight>()
    const claiming = new Map<string, number>()
    let running = 0
    /** Claim statements started and ended. */
    let started = 0
    let endedClaims = 0
    /** Claims made with the writes of ends whose jobs are not taken yet. */
    let withEndsInFlight = 0
    const claimEndedQueue = yield* Queue.sliding<void>(1)
    const slotFreedQueue = yield* Queue.sliding<void>(1)
    let idleWaiters: Array<() => void> = []
    const idle = () => running === 0 && withEndsInFlight === 0
    const idleCheck = () => {
      if (idleWaiters.length > 0 && idle()) {
        const waiters = idleWaiters
        idleWaiters = []
        for (const w of waiters) w()
      }
    }
    return {
      concurrency,
      running: () => running,
      free: () => concurrency - running,
      inflight,
      claiming,
      holds: (id) => inflight.has(id) || claiming.has(id),
      take: (rows) => {
        running += rows.length
        for (const row of rows) claiming.set(row.id, row.attempts)
      },
      ended: (row, unwritten) => {
        if (!unwritten && claiming.get(row.id) === row.attempts) claiming.delete(row.id)
        running--
        Queue.unsafeOffer(slotFreedQueue, undefined)
        idleCheck()
      },
      slotFreed: Queue.take(slotFreedQueue),
      claimStarted: (withEnds) => {
        started++
        if (withEnds) withEndsInFlight++
      },
      claimEnded: (withEnds) => {
        endedClaims++
        if (withEnds) withEndsInFlight--
        Queue.unsafeOffer(claimEndedQueue, undefined)
        idleCheck()
      },
      claimsStarted: () => started,
      claimsEnded: (n) =>
        Effect.gen(function*() {
          while (endedClaims < n) yield* Queue.take(claimEndedQueue)
        }),
      awaitIdle: Effect.async<void>((resume) => {
        if (idle()) return resume(Effect.void)
        const waiter = () => resume(Effect.void)
        idleWaiters.push(waiter)
        return Effect.sync(() => {
          idleWaiters = idleWaiters.filter((w) => w !== waiter)
        })
      })
    } satisfies Slots
  })
