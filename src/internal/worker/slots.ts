/**
 * A worker's slots: the attempts it runs against its `concurrency`, the jobs it claimed ahead of
 * them (waiting to start), the jobs it holds — claimed, and their end not yet written — the claim
 * statements in flight, and the waits on them (room for a claim, every job let go).
 *
 * A claim brings jobs back (`take`, then `admit`): each starts at once while fewer than
 * `concurrency` attempts run, the rest wait here in claim order. When an attempt ends — its end
 * handed to the Completer, not yet written — the next waiting job starts at once, so while a backlog
 * lasts no slot waits for the database: the end is written, and the next claim made with it,
 * behind the jobs already running.
 *
 * With `prefetch` 0 nothing waits, and a job keeps its slot until its end is written: the worker
 * never has more than `concurrency` jobs claimed. Otherwise how many jobs wait is bounded twice: by
 * `prefetch`, the worker's option, and by what a slot needs so as never to wait — the jobs that end
 * while one end is written, about `2 × concurrency × write time ÷ attempt time` (both measured here,
 * on the wall clock), so that a worker of long jobs claims nothing ahead of them. Jobs are claimed ahead only while a backlog lasts
 * (the loop's last claim filled every slot it asked for), never for a worker with mutex keys (a
 * waiting job would hold its key), and a job waits at most `maxWaitMillis` (or half the lease) before
 * it is released: back to pending, the attempt not counted. A cancel or the worker's shutdown releases
 * the waiting jobs it concerns at once; a pause or the worker's id taken within the worker's next
 * check of its waiting jobs (`Worker.ts`, every 250 ms).
 *
 * Names under a concurrency limit by `running` alone are claimed ahead too, without a slot of the
 * limit: such a job waits (in a queue of its name) until an attempt of its name that holds a slot
 * ends and passes the slot to it (`passTo`, `nameSlots.ts`), and never starts without one; jobs
 * that took a slot in their claim start first. A worker with any other limit claims none ahead.
 *
 * Source: Celery's `worker_prefetch_multiplier` and AMQP's consumer prefetch (`basic.qos`), with
 * the number kept to what the write of an end costs.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import type * as Fiber from "effect/Fiber"
import * as Queue from "effect/Queue"
import type { ClaimedRow } from "../driver/Driver.js"
import * as NameSlots from "./nameSlots.js"
import * as Turns from "./turns.js"

/** An attempt running here: its handler's fiber, and why it is being interrupted. */
export interface Inflight {
  readonly fiber: Fiber.RuntimeFiber<unknown, unknown>
  readonly attempt: number
  reason: "cancel" | "shutdown" | "slot" | undefined
  /** Ends the attempt whose fiber Effect's run loop threw out of (see `internal/guardedScheduler.ts`). */
  readonly stopped: (thrown: unknown) => void
}

/** The longest a claimed job waits to start before it is released (wall clock, ms). */
export const maxWaitMillis = 1000

/**
 * How long a demand for slots (`Slots.demanded`) is acted on at least (wall clock, ms; for two
 * attempts' time where attempts are longer, at most 5 s).
 */
export const demandMillis = 200

/** What the slots do with a job that leaves them. */
export interface SlotsHost {
  /** Starts the attempt of a claimed job. */
  readonly start: (row: ClaimedRow) => void
  /** Releases a claimed job that did not start (back to pending, the attempt not counted). */
  readonly release: (row: ClaimedRow) => void
  /**
   * Whether jobs of `name` are claimed ahead without a slot and started in the slots that ended
   * attempts pass on (its limit is `running` alone: see `nameSlots.ts`); with `slot`, whether slot
   * number `slot` may pass now (it is below the limit).
   */
  readonly passes: (name: string, slot?: number) => boolean
  /** Whether `name` is under a concurrency limit by `running` now: a job of it without a slot never starts. */
  readonly limited: (name: string) => boolean
  /** The concurrency limit of a name whose slots pass (`passes`). */
  readonly limitOf: (name: string) => number
  /** Stops an attempt whose slot was lost (interrupted, then released: the attempt not counted). */
  readonly stop: (row: ClaimedRow) => void
}

export interface SlotsOptions {
  readonly concurrency: number
  /** The most jobs claimed ahead of the running ones (0: none). */
  readonly prefetch: number
  /** The lease (ms): a waiting job is released after half of it at the latest. */
  readonly leaseMillis: number
}

export interface Slots {
  readonly concurrency: number
  /**
   * Sets the most jobs claimed ahead (`SlotsOptions.prefetch`); at 0 the jobs waiting now are
   * released (a worker whose names came under a concurrency limit keeps none waiting).
   */
  readonly setPrefetch: (prefetch: number) => void
  /** Jobs held: claimed, and their end not yet written (running, waiting to start, or being written). */
  readonly running: () => number
  /** Attempts started whose end is not yet handed to the Completer. */
  readonly active: () => number
  /** Jobs claimed and waiting to start. */
  readonly waiting: () => number
  /** How many jobs wait ahead of the running ones at most now (see the module's description). */
  readonly target: () => number
  /** `target` for a worker of `n` slots: the jobs that end in `n` slots while one end is written, at most `prefetch`. */
  readonly targetFor: (n: number) => number
  /** The moving average of this worker's attempt times (ms, wall clock), once one has ended. */
  readonly attemptMs: () => number | undefined
  /**
   * How many jobs a claim may take now: the slots neither running nor waiting, plus the jobs that
   * may wait (`target`) when `backlog`. With `prefetch` 0 a job holds its slot until its end is
   * written (so a worker never has more than `concurrency` jobs claimed); `ended` of them are being
   * written with the claim, which may take their slots.
   */
  readonly free: (backlog: boolean, ended?: number) => number
  /** Attempts running here, by job id. */
  readonly inflight: Map<string, Inflight>
  /**
   * Claimed by this instance and not yet ended, by job id: the attempt (covers the moment between
   * claim and start, and between an attempt's end and its write). A retry can be claimed before the
   * write of the attempt before it has called back, so an end removes only its own attempt.
   */
  readonly claiming: ReadonlyMap<string, number>
  /** Whether this instance holds the job: running here, waiting, or claimed and its end not yet written. */
  readonly holds: (id: string) => boolean
  /** The attempts running or waiting here, by job id (what the rescuer checks against the table). */
  readonly attempts: () => ReadonlyMap<string, { readonly attempt: number }>
  /** Holds each job a claim brought back. */
  readonly take: (rows: ReadonlyArray<ClaimedRow>) => void
  /** Starts the jobs a claim brought back while slots are free; the rest wait. */
  readonly admit: (rows: ReadonlyArray<ClaimedRow>) => void
  /**
   * An attempt ended and its end is about to be handed to the Completer: where its name slot passes
   * (a job of its name waiting without a slot, which `handed` starts in it), if anywhere; `"left"`:
   * it would pass, but is left to other workers (announce its release).
   */
  readonly passTo: (row: ClaimedRow) => NameSlots.HandTo | "left" | undefined
  /** An attempt's end was handed to the Completer: its slot starts the next waiting job. */
  readonly handed: (row: ClaimedRow) => void
  /** The write of `row`'s end did not pass its slot (`passTo`): the attempt running in it is stopped. */
  readonly notPassed: (row: ClaimedRow) => void
  /** How many jobs a claim may start now (with slots of limits they take in the claim): the slots neither running nor held by a job that may start. */
  readonly open: () => number
  /**
   * How many slots of limits this worker left to other workers since this was last asked: the
   * claim made with the write of the ends that left them takes back no more slots than the worker
   * holds less those (a claim made apart from a write cannot take them before that write).
   */
  readonly takeLeft: () => number
  /**
   * The limits changed: waiting jobs of a name now limited by `running` that have no slot wait for
   * one to pass to them, or, where slots do not pass, are released.
   */
  readonly limitsChanged: () => void
  /** How many slots of a name's concurrency limit this worker holds now (see `NameSlots.heldOf`). */
  readonly heldOf: (name: string, freeing: boolean) => number
  /**
   * Another worker wants slots of `name` and holds `held` of them (`Notifier.SlotDemand`): if this
   * worker keeps more than `held + 1` (counting those the writes of its ends take again), it keeps
   * at most the midpoint for {@link demandMillis} (or two attempts' time): the slots its ending
   * attempts free above it are left to the others (not passed on, not taken again by the claim made
   * with their ends), and its claims give it no new slot above it (`newSlotsOf`; where the worker
   * has one name whose slots pass — the caller's to check). Not with `prefetch` 0.
   */
  readonly demanded: (name: string, held: number) => void
  /** How many slots of `name` this worker holds or takes again with the writes of its ends (not those it left to others). */
  readonly keeps: (name: string) => number
  /** How many slots of `name` a claim may give this worker now, while a demand caps them (`demanded`); else undefined. */
  readonly newSlotsOf: (name: string) => number | undefined
  /**
   * Lets go of a job whose end was written. `unwritten`: the database refused the end and the
   * dead letter in its place; the job stays `running` under this worker and stays held, so that this
   * worker's rescuer does not take it for a lost claim.
   */
  readonly ended: (row: ClaimedRow, unwritten: boolean | undefined) => void
  /**
   * Releases the waiting jobs `which` selects (all without it): cancelled, paused, waiting too
   * long, or the worker stops.
   */
  readonly releaseWaiting: (which?: (row: ClaimedRow, waitedMs: number) => boolean) => void
  /**
   * Releases the jobs waiting for a slot to pass to them whose name has no slot held here (none
   * running, none being freed by an end not yet written): no end will pass one to them. Returns how
   * many. (Back to pending, a claim gives them a slot.)
   */
  readonly releaseStranded: () => number
  /**
   * Releases the waiting jobs that waited longer than their bound; the worker then claims none ahead
   * until its attempts end faster than that wait (not for a job that waited for a slot of a limit
   * of which this worker holds none: it waited for other workers).
   */
  readonly releaseOverdue: () => void
  /** Waits until a claim may take jobs again (a slot freed; one wait covers every one since the last). */
  readonly slotFreed: Effect.Effect<void>
  /**
   * A claim statement starts: jobs it brings back are not held yet. `withEnds`: it is made with the
   * write of this worker's ends, which may free every slot before its jobs are taken: until they
   * are, the slots are not idle.
   */
  readonly claimStarted: (withEnds: boolean) => void
  /** A claim statement ended, its jobs taken. */
  readonly claimEnded: (withEnds: boolean) => void
  /** A claim statement failed: its commit may have been applied and its answer lost. */
  readonly claimFailed: () => void
  /** How many claim statements have failed. */
  readonly claimsFailed: () => number
  /** How many claim statements have started. */
  readonly claimsStarted: () => number
  /** Whether no job is held and no claim statement is in flight (one whose jobs are not taken yet). */
  readonly quiet: () => boolean
  /** Waits until `n` claim statements have ended. */
  readonly claimsEnded: (n: number) => Effect.Effect<void>
  /** Waits until no job is held and no claim made with ends is in flight. */
  readonly awaitIdle: Effect.Effect<void>
}

/** A job waiting to start, and when it began to wait (wall clock, ms). */
type Waiting = readonly [ClaimedRow, number]

/** Weight of the newest measure in the moving averages of attempt and write times. */
const weight = 0.1

/**
 * The most waiting jobs started in one turn of the event loop. Handlers that end at once would
 * otherwise run every waiting job before the ends of the first are written: the worker and the
 * write of its ends (with its next claim) would take turns instead of overlapping. Above what a
 * worker of concurrency 10 keeps (200 waiting and 10 running), which drained slower when cut at 100.
 * Measured: docs/performance.md, "Prefetch".
 */
const startsPerTurn = 250

export const make = (options: SlotsOptions, host: SlotsHost): Effect.Effect<Slots> =>
  Effect.gen(function*() {
    const { concurrency } = options
    let prefetch = options.prefetch
    const waitBoundMs = Math.min(maxWaitMillis, options.leaseMillis / 2)
    const inflight = new Map<string, Inflight>()
    const claiming = new Map<string, number>()
    let held = 0
    /** Started attempts, with when they started (wall clock, ms). */
    const active = new Map<ClaimedRow, number>()
    /**
     * Jobs waiting to start, in claim order, with when they began to wait (wall clock, ms): those
     * that hold a slot of a limit (started first), the others that may start (by priority, and
     * within a priority taking turns by key where their name has fair shares: `turns.ts`), and per
     * name those waiting for a slot to pass to them.
     */
    const slottedReady: Array<Waiting> = []
    const ready = Turns.make<Waiting>()
    const awaiting = new Map<string, Array<Waiting>>()
    let awaitingCount = 0
    const waitingCount = () => slottedReady.length + ready.size() + awaitingCount
    /** Ends handed to the Completer and not yet written, with when they were handed (wall clock, ms). */
    const writing = new Map<ClaimedRow, number>()
    /** The slots of limits this worker holds, passed from attempt to attempt. */
    const nameSlots = NameSlots.make()
    /** Jobs a slot passed to, started first by `startWaiting`. */
    const passed: Array<ClaimedRow> = []
    /** Per name, when a slot was last left to other workers (wall clock, ms); and how many since `takeLeft`. */
    const leftAt = new Map<string, number>()
    let leftOpen = 0
    /** Ends that left their slot to other workers and are not written yet, and their count per name. */
    const leftRows = new Map<ClaimedRow, string>()
    const leftPending = new Map<string, number>()
    const leave = (row: ClaimedRow, name: string, nowMs: number) => {
      leftAt.set(name, nowMs)
      leftOpen++
      leftRows.set(row, name)
      leftPending.set(name, (leftPending.get(name) ?? 0) + 1)
      nameSlots.free(row)
      return "left" as const
    }
    /** The slots of `name` this worker holds or takes again with the writes of its ends (not those it left). */
    const keeps = (name: string) => nameSlots.heldOf(name, true) - (leftPending.get(name) ?? 0)
    /**
     * Per name, the most slots this worker keeps while another worker wants some (`demanded`), and
     * until when (wall clock, ms).
     */
    const levels = new Map<string, readonly [level: number, untilMs: number]>()
    const levelOf = (name: string, nowMs: number) => {
      const level = levels.get(name)
      if (level === undefined) return undefined
      if (nowMs > level[1]) {
        levels.delete(name)
        return undefined
      }
      return level[0]
    }
    /** Moving averages (ms) of an attempt's time and of an end's write. */
    let attemptMs: number | undefined
    let writeMs: number | undefined
    /** Claim statements started and ended. */
    let started = 0
    let endedClaims = 0
    let failedClaims = 0
    /** Claims made with the writes of ends whose jobs are not taken yet. */
    let withEndsInFlight = 0
    const claimEndedQueue = yield* Queue.sliding<void>(1)
    const slotFreedQueue = yield* Queue.sliding<void>(1)
    let idleWaiters: Array<() => void> = []
    const idle = () => held === 0 && withEndsInFlight === 0
    const idleCheck = () => {
      if (idleWaiters.length > 0 && idle()) {
        const waiters = idleWaiters
        idleWaiters = []
        for (const w of waiters) w()
      }
    }
    const average = (previous: number | undefined, ms: number) =>
      previous === undefined ? ms : previous + weight * (ms - previous)
    const targetFor = (n: number) => {
      if (prefetch === 0 || attemptMs === undefined || writeMs === undefined) return 0
      return Math.min(prefetch, Math.round(2 * n * writeMs / Math.max(attemptMs, 0.01)))
    }
    const target = () => targetFor(concurrency)
    const slotted = (row: ClaimedRow) => row.nameSlot !== undefined && row.nameSlot !== null
    /** Whether a waiting job waits for a slot to pass to it (claimed ahead without one, or before its name was limited). */
    const awaitsSlot = (row: ClaimedRow) => !slotted(row) && host.limited(row.name)
    /**
     * Starts waiting jobs while slots are free — first those a slot passed to, then those that
     * hold a slot of a limit, then the others in claim order, never one that waits for a slot to
     * pass to it; safe to re-enter (a start may hand its end at once). At most `startsPerTurn` in
     * one turn of the event loop: the rest start in the next (`setImmediate`), after the fibers
     * woken meanwhile — the Completer's, which writes the ends handed so far and makes the next
     * claim with them while the rest run.
     */
    let starting = false
    let continued = false
    const startWaiting = () => {
      if (starting) return
      starting = true
      let startedThisTurn = 0
      try {
        const begin = (row: ClaimedRow) => {
          startedThisTurn++
          active.set(row, performance.now())
          host.start(row)
        }
        const turnOver = () => {
          if (startedThisTurn < startsPerTurn) return false
          if (!continued) {
            continued = true
            setImmediate(() => {
              continued = false
              startWaiting()
            })
          }
          return true
        }
        // A start may end its attempt at once, which may pass its slot on (`passed`) or free one:
        // round again until a round starts nothing.
        let began = true
        while (began) {
          began = false
          while (passed.length > 0) {
            began = true
            begin(passed.shift()!)
          }
          while (active.size < concurrency && slottedReady.length > 0) {
            if (turnOver()) return
            began = true
            begin(slottedReady.shift()![0])
          }
          while (active.size < concurrency && ready.size() > 0 && passed.length === 0 && slottedReady.length === 0) {
            if (turnOver()) return
            began = true
            begin(ready.shift()![0])
          }
        }
      } finally {
        starting = false
      }
    }
    /**
     * A worker that holds every slot of a limit of 4 or more leaves one to other workers every this
     * many ms (one that holds half of them, every twice as many; a limit under 4 counts as 4; at
     * most every 8 times as many), and the claim made with that end's write takes back no more than
     * the slots it holds less that one.
     */
    const leaveEveryMs = 25
    /** The queue of `ready` a job waits in: its key's where its name has fair shares. */
    const turnOf = (row: ClaimedRow) => (row.fairKey === undefined ? Turns.unturned : `${row.name}\u0000${row.fairKey}`)
    /**
     * Puts a claimed job in its queue: one of a limited name without a slot waits for a slot to pass
     * to it, or, where slots do not pass (the limits changed as it was claimed), is released.
     */
    const wait = (row: ClaimedRow, sinceMs: number) => {
      if (slotted(row)) return void slottedReady.push([row, sinceMs])
      if (!awaitsSlot(row)) return void ready.push(row.priority, turnOf(row), [row, sinceMs])
      if (!host.passes(row.name)) return host.release(row)
      let queue = awaiting.get(row.name)
      if (queue === undefined) awaiting.set(row.name, queue = [])
      queue.push([row, sinceMs])
      awaitingCount++
    }
    /**
     * A job whose slot was lost: released if it has not started (about to start in a passed slot,
     * or waiting with a slot), else stopped.
     */
    const stopHolder = (row: ClaimedRow) => {
      const p = passed.indexOf(row)
      if (p >= 0) {
        passed.splice(p, 1)
        return host.release(row)
      }
      const w = slottedReady.findIndex(([r]) => r === row)
      if (w >= 0) {
        slottedReady.splice(w, 1)
        return host.release(row)
      }
      host.stop(row)
    }
    /** Releases the waiting jobs `which` selects; returns the longest wait (ms) of those released, or -1. */
    const releaseWaiting = (which?: (row: ClaimedRow, waitedMs: number) => boolean) => {
      if (waitingCount() === 0) return -1
      const nowMs = performance.now()
      const released: Array<ClaimedRow> = []
      let longestMs = -1
      const from = (queue: Array<Waiting>) => {
        for (let i = queue.length - 1; i >= 0; i--) {
          const [row, sinceMs] = queue[i]
          if (which === undefined || which(row, nowMs - sinceMs)) {
            queue.splice(i, 1)
            released.push(row)
            longestMs = Math.max(longestMs, nowMs - sinceMs)
          }
        }
      }
      from(slottedReady)
      from(ready.remove(([row, sinceMs]) => which === undefined || which(row, nowMs - sinceMs)))
      for (const queue of awaiting.values()) {
        const before = queue.length
        from(queue)
        awaitingCount -= before - queue.length
      }
      for (let i = released.length - 1; i >= 0; i--) host.release(released[i])
      if (released.length > 0) Queue.unsafeOffer(slotFreedQueue, undefined)
      return longestMs
    }
    return {
      concurrency,
      setPrefetch: (n) => {
        prefetch = n
        if (n === 0) releaseWaiting()
      },
      running: () => held,
      active: () => active.size,
      waiting: waitingCount,
      target,
      targetFor,
      attemptMs: () => attemptMs,
      free: (backlog, ended = 0) =>
        prefetch === 0
          ? concurrency - held + ended
          : concurrency + (backlog ? target() : 0) - active.size - waitingCount(),
      inflight,
      claiming,
      holds: (id) => inflight.has(id) || claiming.has(id),
      attempts: () => {
        if (waitingCount() === 0) return inflight
        const all = new Map<string, { readonly attempt: number }>(inflight)
        // An earlier attempt of a job may still run here while its retry waits: both are checked.
        const add = (queue: ReadonlyArray<Waiting>) => {
          for (const [row] of queue) if (!all.has(row.id)) all.set(row.id, { attempt: row.attempts })
        }
        add(slottedReady)
        add(ready.items())
        for (const queue of awaiting.values()) add(queue)
        return all
      },
      take: (rows) => {
        held += rows.length
        for (const row of rows) {
          claiming.set(row.id, row.attempts)
          const lost = nameSlots.claimed(row)
          if (lost !== undefined) stopHolder(lost)
        }
      },
      admit: (rows) => {
        const nowMs = performance.now()
        for (const row of rows) wait(row, nowMs)
        startWaiting()
      },
      passTo: (row) => {
        const slot = nameSlots.of(row)
        if (slot === undefined) return undefined
        const queue = host.passes(slot.name, slot.slot) ? awaiting.get(slot.name) : undefined
        const waits = queue !== undefined && queue.length > 0
        // Now and then a slot that would pass is left to other workers instead (freed with the
        // end's write, announced), and the claim made with that write takes it not back, so that
        // workers waiting for the name get one. (With no job waiting here, the claim loop leaves
        // one now and then: `loop.ts`.)
        const nowMs = performance.now()
        // Another worker wants slots of this name and holds fewer: left to it, whether or not a job
        // waits here (a slot freed for nobody would be taken back by the claim made with this end).
        const level = levelOf(slot.name, nowMs)
        if (level !== undefined && keeps(slot.name) > level) return leave(row, slot.name, nowMs)
        if (!leftAt.has(slot.name)) leftAt.set(slot.name, nowMs)
        // The more of the limit's slots this worker holds, the more often it leaves one: slots
        // move towards the workers that hold fewer, until their shares even out.
        const limit = host.limitOf(slot.name)
        const everyMs = Math.min(8 * leaveEveryMs, (leaveEveryMs * Math.max(limit, 4)) / Math.max(1, nameSlots.heldOf(slot.name, false)))
        if (waits && nowMs - leftAt.get(slot.name)! >= everyMs) return leave(row, slot.name, nowMs)
        if (!waits) {
          nameSlots.free(row)
          return undefined
        }
        const [to] = queue!.shift()!
        awaitingCount--
        passed.push(to)
        return nameSlots.pass(row, to)
      },
      notPassed: (row) => {
        const running = nameSlots.lost(row)
        if (running !== undefined) stopHolder(running)
      },
      open: () => Math.max(0, concurrency - active.size - passed.length),
      takeLeft: () => {
        const n = leftOpen
        leftOpen = 0
        return n
      },
      limitsChanged: () => {
        const all = [...slottedReady, ...ready.items(), ...Array.from(awaiting.values()).flat()]
        slottedReady.length = 0
        ready.clear()
        awaiting.clear()
        awaitingCount = 0
        for (const [row, sinceMs] of all.sort((a, b) => a[1] - b[1])) wait(row, sinceMs)
        startWaiting()
      },
      heldOf: nameSlots.heldOf,
      demanded: (name, held) => {
        const nowMs = performance.now()
        // A level set by an earlier demand stands until it lapses: the slots it left may not be
        // taken yet, and a demand made meanwhile would have this worker leave them twice.
        // Without jobs claimed ahead (`prefetch` 0) the claims made with ends take every freed slot again.
        if (prefetch === 0 || levelOf(name, nowMs) !== undefined || !host.passes(name)) return
        const mine = keeps(name)
        // Long attempts free few slots in 200 ms: the level stands for two of them (at most 5 s).
        const forMs = Math.min(5000, Math.max(demandMillis, 2 * (attemptMs ?? 0)))
        if (mine > held + 1) levels.set(name, [Math.ceil((mine + held) / 2), nowMs + forMs])
      },
      keeps,
      newSlotsOf: (name) => {
        const level = levelOf(name, performance.now())
        return level === undefined ? undefined : Math.max(0, level - nameSlots.heldOf(name, false))
      },
      handed: (row) => {
        nameSlots.free(row)
        const startedMs = active.get(row)
        if (startedMs === undefined) return
        active.delete(row)
        const nowMs = performance.now()
        attemptMs = average(attemptMs, nowMs - startedMs)
        writing.set(row, nowMs)
        startWaiting()
        Queue.unsafeOffer(slotFreedQueue, undefined)
      },
      ended: (row, unwritten) => {
        const handedMs = writing.get(row)
        if (handedMs !== undefined) {
          writing.delete(row)
          writeMs = average(writeMs, performance.now() - handedMs)
        }
        if (!unwritten && claiming.get(row.id) === row.attempts) claiming.delete(row.id)
        nameSlots.settled(row)
        const left = leftRows.get(row)
        if (left !== undefined) {
          leftRows.delete(row)
          leftPending.set(left, leftPending.get(left)! - 1)
        }
        held--
        Queue.unsafeOffer(slotFreedQueue, undefined)
        idleCheck()
      },
      releaseWaiting: (which) => void releaseWaiting(which),
      releaseStranded: () => {
        if (awaitingCount === 0) return 0
        const before = awaitingCount
        const stranded = new Set<string>()
        for (const [name, queue] of awaiting) if (queue.length > 0 && nameSlots.heldOf(name, true) === 0) stranded.add(name)
        if (stranded.size > 0) releaseWaiting((row) => stranded.has(row.name) && awaitsSlot(row))
        return before - awaitingCount
      },
      releaseOverdue: () => {
        // A job that waited for a slot of a limit to pass to it where this worker holds none of its
        // slots waited for other workers, not for this worker's attempts: released, no evidence.
        releaseWaiting((row, waitedMs) => waitedMs > waitBoundMs && awaitsSlot(row) && nameSlots.heldOf(row.name, true) === 0)
        const waitedMs = releaseWaiting((_, waitedMs) => waitedMs > waitBoundMs)
        // No slot freed for `waitedMs`: the running attempts take longer than measured — at least
        // `concurrency × waitedMs` each on average. Claim no more ahead until attempts say otherwise.
        if (waitedMs >= 0) attemptMs = Math.max(attemptMs ?? 0, concurrency * waitedMs)
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
      claimFailed: () => {
        failedClaims++
      },
      claimsFailed: () => failedClaims,
      claimsStarted: () => started,
      quiet: () => held === 0 && started === endedClaims,
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
