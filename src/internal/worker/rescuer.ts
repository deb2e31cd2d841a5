/**
 * A worker's rescuer: the running jobs of its job names whose worker was lost (its session lock is
 * free, or its heartbeat is older than `leaseTimeout`) go back to pending, or dead once out of
 * attempts ("worker lost"). A pass every `rescueInterval`, and a quick pass between two when a lock
 * found free has been free for `lockGraceMillis` (worker/liveness.ts has the rules). It also catches
 * cancellations of jobs running here that no NOTIFY announced (MySQL/MariaDB), and any other attempt
 * running here that its job no longer runs.
 *
 * A pass finds the lost workers from their rows and locks, and reads only their jobs. Two passes in a
 * row every `leaseTimeout` (the sweep, see `sweepPasses`), and those of the `doubtMillis` after a claim
 * of this worker failed (two at least), read every running job of its names: for its own lost claims
 * and for jobs whose worker has no row.
 *
 * @internal
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { Database } from "../Database.js"
import type { OrphanedRow } from "../driver/Driver.js"
import { endKey } from "../driver/shared.js"
import { forkScopedBounded } from "../outage.js"
import { nowMicros } from "../time.js"
import { wallSleep } from "../wallClock.js"
import { Completer, type Outcome } from "../../services/Completer.js"
import { QueueConfig } from "../../services/QueueConfig.js"
import type { EndLogs } from "./endLogs.js"
import { lockGraceMarkedMillis, lockGraceMillis, lockGracePasses } from "./liveness.js"

/** After a claim of the worker failed, how long (ms) its passes read every running job (two at least). */
export const doubtMillis = 5000

/**
 * How many passes apart two passes in a row read every running job of the worker's names (the sweep;
 * the first two passes after the start are one): `leaseTimeout ÷ rescueInterval`, at least 2 (60, or
 * 30 s, by default). So a job whose worker has no row (deleted by hand) is rescued once it was
 * claimed a lease ago, as if its worker's heartbeat had stopped at the claim (on MySQL/MariaDB also
 * when its worker's lock is free) — a live worker whose row was pruned while it was stopped (a
 * process paused for minutes) writes it again at its next heartbeat, so its jobs are never taken
 * for lost; and a job running under this worker's id that it does not know of is rescued within
 * about `leaseTimeout`, when no failed claim of its own announced it.
 */
export const sweepPasses = (leaseTimeout: Duration.Duration, rescueInterval: Duration.Duration): number =>
  Math.max(2, Math.round(Duration.toMillis(leaseTimeout) / Math.max(1, Duration.toMillis(rescueInterval))))

/** What the rescuer needs of its worker. */
export interface RescuerHost {
  readonly workerId: string
  readonly names: ReadonlyArray<string>
  readonly concurrency: number
  /** When the worker started (µs): its own jobs claimed before then are an earlier life's. */
  readonly startedAtUs: number
  /** Another live worker took this worker's id: only cancellations are looked for. */
  readonly idTaken: () => boolean
  /** The attempts running here, by job id. */
  readonly running: () => ReadonlyMap<string, { readonly attempt: number }>
  /** Whether this instance holds the job: running here, or claimed and its end not yet written. */
  readonly holds: (id: string) => boolean
  /** How many claim statements this instance has started. */
  readonly claimsStarted: () => number
  /** Waits until `n` claim statements of this instance have ended. */
  readonly claimsEnded: (n: number) => Effect.Effect<void>
  /** How many claim statements of this instance failed (their jobs may be claimed, the answer lost). */
  readonly claimsFailed: () => number
  /** Since when (wall clock, ms) the worker's own lock has been held without a break, if it is. */
  readonly steadySinceMs: () => number | undefined
  /** The end of a lost worker's job: its attempt failed as "worker lost". */
  readonly lostEnd: (row: OrphanedRow) => Effect.Effect<Outcome>
  /** The end of a lost claim of this instance (its handler never ran): released, the attempt not counted. */
  readonly releasedEnd: (row: OrphanedRow) => Outcome
  /** Counts a written end in the job name's metrics. */
  readonly counted: (name: string, outcome: Outcome) => void
  /** The worker's log lines of ends and rescues. */
  readonly endLogs: EndLogs
  /** Interrupts the attempts of these jobs running here. */
  readonly cancel: (ids: ReadonlyArray<string>) => void
  /** Wakes the worker's claim loop. */
  readonly wake: Effect.Effect<void>
}

/**
 * Starts the rescuer of a worker for the life of the scope (it stops within 100 ms at close).
 */
export const start = (
  host: RescuerHost
): Effect.Effect<void, never, Database | QueueConfig | Completer | Scope.Scope> =>
  Effect.gen(function*() {
    const config = yield* QueueConfig
    const completer = yield* Completer
    const { reachability, driver } = yield* Database
    const { names, workerId } = host
    /**
     * Jobs (`id:attempt`) whose worker's lock the last passes found free: in how many passes in a row
     * (quick passes not counted), when the first of them was answered (wall clock, ms), the worker's
     * `relocks` then, and whether the quick rule may rescue it once its grace is over (another
     * worker's job, whose row did not say `relocking` at the last pass). Also, keyed `own:id:attempt`,
     * this worker's own jobs that it does not hold, in how many listings (any pass that lists them):
     * a pass that reads only the lost workers' jobs does not list them, and keeps their entries.
     */
    const lockFree = new Map<string, { passes: number; firstMs: number; relocks: number; quick: boolean; own: boolean }>()
    /** Passes (not quick ones) answered since the start, and how many apart the sweeps are. */
    let passes = 0
    const sweepEvery = sweepPasses(config.leaseTimeout, config.rescueInterval)
    /**
     * Claims of this worker that failed, as of the last pass; after a new one, passes read every job
     * until two have and `doubtMillis` has passed (a claim the server applies after the client saw it
     * fail — a statement waiting for a lock — commits later than the failure).
     */
    let failedSeen = 0
    let doubtPasses = 0
    let doubtUntilMs = 0
    /**
     * Interrupts the attempts running here that the table says their job no longer runs: cancelled
     * (no NOTIFY on MySQL/MariaDB), cancelled and already retried (the retry may run elsewhere),
     * rescued, or deleted. Their ends would change nothing; stopping them keeps a job from running
     * twice at once.
     */
    const cancelFromTable = Effect.suspend(() => {
      const inflight = host.running()
      return inflight.size === 0
        ? Effect.void
        : Effect.map(
          driver.jobStaleAttempts(Array.from(inflight, ([id, entry]) => ({ id, attempt: entry.attempt }))),
          (stale) => host.cancel(stale.filter((s) => host.running().get(s.id)?.attempt === s.attempt).map((s) => s.id))
        )
    })
    /**
     * A rescue pass; `quick`: one run between two passes `rescueInterval` apart, for the quick rule
     * (see `lockGraceMillis`). Returns when (wall clock, ms) a job whose worker's lock it found free
     * will have been free for `lockGraceMillis`, the earliest such time after this pass, if any.
     */
    const rescue = (quick: boolean) => Effect.gen(function*() {
      if (names.length === 0) return undefined
      // With its id taken, only the cancellations of jobs still running here are looked for.
      if (host.idTaken()) {
        yield* cancelFromTable
        return undefined
      }
      const nowUs = yield* nowMicros
      // Every running job, or those of the workers found lost (see `sweepPasses`).
      const failed = host.claimsFailed()
      if (failed !== failedSeen) {
        failedSeen = failed
        doubtPasses = 2
        doubtUntilMs = Date.now() + doubtMillis
      }
      const all = !quick && (doubtPasses > 0 || Date.now() < doubtUntilMs || passes % sweepEvery < 2)
      // Claims of this instance started before the listing may have committed jobs it lists that are
      // not held yet: wait for them to end. (A claim started after the listing began commits after
      // it, so none of its jobs are listed.)
      const claimsBefore = host.claimsStarted()
      /** Before the listing is sent and after it is answered: it read the locks between the two. */
      const sentMs = Date.now()
      const orphans = yield* driver.jobListOrphaned(
        names,
        nowUs - Duration.toMillis(config.leaseTimeout) * 1000,
        workerId,
        1000 + 2 * host.concurrency,
        all ? "all" : "lost"
      )
      const answeredMs = Date.now()
      if (!quick) passes++
      if (all && doubtPasses > 0) doubtPasses--
      yield* host.claimsEnded(claimsBefore)
      /** This worker's own lock held without a break since then (ms), if it is held (see `lockGraceMillis`). */
      const steadySinceMs = host.steadySinceMs()
      /** The jobs this pass took back (to pending, or released); those it dead-lettered are logged each. */
      const rescued: Array<OrphanedRow> = []
      const seen = new Set<string>()
      for (const row of orphans) {
        /** Claimed by this instance, answer lost: its handler never ran, so the attempt is not counted. */
        let lostClaim = false
        if (row.workerId === workerId) {
          // Running here, or its end not yet written. Otherwise it was left by an earlier life of this
          // worker id, or claimed by a claim of this instance whose COMMIT was applied but whose answer
          // was lost (a connection cut during the COMMIT): nobody runs it.
          if (host.holds(row.id)) continue
          if (row.claimedAtUs >= host.startedAtUs) {
            // The listing may predate the end of a job that has since ended here: rescue only a job
            // that two passes in a row found so.
            const key = `own:${endKey(row.id, row.attempts)}`
            seen.add(key)
            const earlier = lockFree.get(key)
            if (earlier === undefined) {
              lockFree.set(key, { passes: 1, firstMs: answeredMs, relocks: 0, quick: false, own: true })
              continue
            }
            if (++earlier.passes < 2) continue
            lostClaim = true
          }
        } else if (!row.expired) {
          // Only its lock is free: the worker may be alive and taking its lock again on a new
          // connection (its connection was cut, the server restarted). Rescue by the quick rule or
          // the pass rule (see `lockGraceMillis`).
          const key = endKey(row.id, row.attempts)
          seen.add(key)
          const earlier = lockFree.get(key)
          if (earlier === undefined || earlier.relocks !== row.relocks) {
            // First seen free, or free again after its worker took its lock again meanwhile.
            lockFree.set(key, { passes: 1, firstMs: answeredMs, relocks: row.relocks, quick: !row.relocking, own: false })
            continue
          }
          if (!quick) earlier.passes++
          earlier.quick = !row.relocking
          const quickRule = !row.relocking && sentMs - earlier.firstMs >= lockGraceMillis &&
            steadySinceMs !== undefined && steadySinceMs <= earlier.firstMs - lockGraceMillis
          const passRule = earlier.passes >= lockGracePasses && sentMs - earlier.firstMs >= lockGraceMarkedMillis
          if (!quickRule && !passRule) continue
        }
        const outcome = lostClaim ? host.releasedEnd(row) : yield* host.lostEnd(row)
        // Taken back or not, its entry goes: a release gives back the attempt, so the job's next
        // claim has the same key, and must start from no pass.
        lockFree.delete(lostClaim ? `own:${endKey(row.id, row.attempts)}` : endKey(row.id, row.attempts))
        // Another worker may have rescued it first, or it was cancelled: then nothing changed.
        if ((yield* completer.finish(outcome)) === false) continue
        host.counted(row.name, outcome)
        if (outcome.state === "dead") yield* host.endLogs.ended(row, outcome, true) ?? Effect.void
        else rescued.push(row)
      }
      let graceEndsMs: number | undefined
      for (const [key, entry] of lockFree) {
        if (!seen.has(key)) {
          // A pass that reads only lost workers' jobs says nothing of this worker's own.
          if (!entry.own || all) lockFree.delete(key)
          continue
        }
        // Past its grace when this pass was sent (the quick rule did not hold, or it was rescued): the
        // passes decide. A grace that ended while this pass was in flight gets a quick pass at once.
        const endsMs = entry.firstMs + lockGraceMillis
        if (entry.quick && endsMs > sentMs && (graceEndsMs === undefined || endsMs < graceEndsMs)) {
          graceEndsMs = endsMs
        }
      }
      if (rescued.length > 0) {
        yield* host.endLogs.rescued(rescued)
        yield* host.wake
      }
      yield* cancelFromTable
      yield* driver.workerPrune(nowUs - 10 * Duration.toMillis(config.leaseTimeout) * 1000)
      return graceEndsMs
    })
    const pass = (quick: boolean) =>
      rescue(quick).pipe(
        Effect.catchAllCause((cause) => Effect.as(reachability.failed("rescuer", "sqlane: rescue pass failed", cause), undefined))
      )
    const rescueIntervalMs = Duration.toMillis(config.rescueInterval)
    // A pass every `rescueInterval` (Effect's Clock); between two, a quick pass when a job's worker's
    // lock found free has been free for `lockGraceMillis`, on the wall clock as the other worker's lock
    // check is (see `lockGraceMillis`).
    yield* Effect.gen(function*() {
      const startMs = Date.now()
      let graceEndsMs = yield* pass(false)
      if (graceEndsMs === undefined || graceEndsMs >= startMs + rescueIntervalMs) {
        return yield* Effect.sleep(config.rescueInterval)
      }
      while (graceEndsMs !== undefined && graceEndsMs < startMs + rescueIntervalMs) {
        // A millisecond more: a timer may fire up to one early.
        yield* wallSleep(Math.max(0, graceEndsMs - Date.now()) + 1)
        graceEndsMs = yield* pass(true)
      }
      yield* wallSleep(Math.max(0, startMs + rescueIntervalMs - Date.now()))
    }).pipe(
      Effect.forever,
      Effect.annotateLogs({ package: "sqlane", module: "Worker", "sqlane.worker.id": workerId }),
      (effect) => forkScopedBounded(effect, 100)
    )
  })
