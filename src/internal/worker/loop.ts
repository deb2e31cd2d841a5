/**
 * A worker's claim loop: wait for a free slot; probe which names have due jobs; claim up to the free
 * slots; if the claim filled every slot, claim again as soon as slots free (without a probe);
 * otherwise sleep until a wake-up (in-process hint, PostgreSQL `NOTIFY`, or `LISTEN` re-established),
 * the next pending job's `run_at`, or the jittered poll (`pollInterval`), whichever comes first.
 *
 * While a backlog lasts, the claims are made with the writes of the worker's ends: the worker is the
 * Completer's `Claimant` (`internal/claimsOnEnds.ts`), and the loop starts the jobs those writes
 * claimed (`answers`). One transaction and one commit end a batch of attempts and claim for the
 * slots they free and the jobs that may wait (`Slots.free`), and the claim costs no commit of its own.
 *
 * How many jobs to claim is decided here, from the slots (`Slots.free`: with a backlog, also the
 * jobs that may wait ahead of the running ones); the slots start what a claim took, or keep it
 * waiting (`internal/worker/slots.ts`).
 *
 * @internal
 */
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Schedule from "effect/Schedule"
import type { Claimant, ClaimAnswer } from "../claimsOnEnds.js"
import { Database } from "../Database.js"
import type { Ahead, ClaimedRow, Group, NameLimits } from "../driver/Driver.js"
import { isRated } from "../driver/rateWindows.js"
import { holdsWhileWaiting } from "../limits.js"
import type * as Pauses from "../pauses.js"
import { stepper } from "../schedule.js"
import { nowMicros } from "../time.js"
import { wallSleep } from "../wallClock.js"
import { Claimer } from "../../services/Claimer.js"
import { ofJobName } from "../../services/Metrics.js"
import { keyReleased, Notifier } from "../../services/Notifier.js"
import { QueueConfig } from "../../services/QueueConfig.js"
import type { Slots } from "./slots.js"

/** `extra` groups (first, so a claim that takes only the first few groups sees them) and then `groups`, each once. */
const mergeGroups = (groups: ReadonlyArray<Group>, extra: ReadonlyArray<Group>): ReadonlyArray<Group> => {
  const seen = new Set(extra.map((g) => `${g.priority}:${g.name}`))
  return [...extra, ...groups.filter((g) => !seen.has(`${g.priority}:${g.name}`))]
}

/** A worker riding under a concurrency limit leaves one slot to other workers every this many rides. */
const yieldEvery = 8

/** In a worker's answers: a write of its ends carried no claim of it (or the ride ended). */
const passed = "passed" as const

/** What the claim loop needs of its worker. */
export interface LoopHost {
  readonly workerId: string
  readonly names: ReadonlyArray<string>
  /**
   * Names claimed by the keyed claim (their jobs may carry mutex keys, or they are under a
   * concurrency limit); it may change while the worker runs. While it is not empty the claims that
   * ride on ends are keyed claims, and none rides while a name of the worker is under a rate limit.
   */
  readonly keyed: ReadonlySet<string>
  /** The concurrency limits of the worker's limited names now. */
  readonly limits: () => ReadonlyMap<string, NameLimits>
  /**
   * While the worker's limited names pass slots (`internal/worker/nameSlots.ts`): what its claims
   * may take ahead without a slot (a claim then takes at most `slots + waiting` jobs); else undefined.
   * `withEnds`: for a claim made with the write of the worker's ends.
   */
  readonly ahead: (withEnds: boolean) => Ahead | undefined
  readonly slots: Slots
  /** Paused job names, left out of every probe and claim. */
  readonly paused: Pauses.PausedView
  /** Releases a claimed job the slots hold (back to pending, not run). */
  readonly release: (row: ClaimedRow) => void
  /** The worker's scope is closing: jobs a claim in flight brings back are released. */
  readonly stopping: () => boolean
  /** Another live worker took this worker's id: claim no more. */
  readonly idTaken: () => boolean
  /**
   * A claim of `groups` took fewer jobs than it asked for (limits or keys held by others may have cut
   * it short); it brought `rows`, and `probed`: it was made right after a probe found those groups due.
   */
  readonly claimedShort: (groups: ReadonlyArray<Group>, rows: ReadonlyArray<ClaimedRow>, probed: boolean) => void
}

export interface ClaimLoop {
  /** The loop, restarted after a failure; it runs until interrupted. */
  readonly run: Effect.Effect<never, unknown>
  /** Given with each end the worker submits, for its next claim (undefined: claims do not ride). */
  readonly claimant: Claimant | undefined
  /**
   * Called before an end is submitted; `written` with what it returned once the end is written: a
   * Completer (a wrapper of it) that did not pass the claimant on stops the ride, or the loop would
   * wait for a claim that never comes.
   */
  readonly submitting: () => number
  readonly written: (submitted: number) => void
  /**
   * Called once an end of this worker is written and let go: a ride cut short by limits whose
   * worker has no attempt left to end (only jobs waiting ahead, for slots that no end will pass)
   * ends, and the loop claims itself.
   */
  readonly settled: () => void
  /**
   * Whether the writes of this worker's ends carry its claims and those are cut short by limits:
   * the next one takes the slots its ends free (a release notice would wake other workers for
   * nothing).
   */
  readonly retakes: () => boolean
  /** Wakes the loop (an attempt was rescheduled, a name resumed): it probes again. */
  readonly wake: Effect.Effect<void>
  /**
   * The limits changed: what rate windows held back is forgotten (a raised or removed rate admits
   * jobs at once; the next rated claim learns the windows again).
   */
  readonly limitsChanged: () => void
  /**
   * The earliest instant (µs, Effect's `Clock`) after `nowUs` at which a rate window or a hold that
   * left due jobs out of this worker's last claims admits one again; undefined when none did.
   */
  readonly heldBackUntilUs: (nowUs: number) => number | undefined
}

export const make = (host: LoopHost): Effect.Effect<ClaimLoop, never, Claimer | Notifier | QueueConfig | Database> =>
  Effect.gen(function*() {
    const config = yield* QueueConfig
    const claimer = yield* Claimer
    const notifier = yield* Notifier
    const { reachability } = yield* Database
    const { keyed, names, paused, slots, workerId } = host
    const concurrency = slots.concurrency
    /** Effect's Clock (TestClock in tests), read outside a fiber in the hot path. */
    const clock = yield* Effect.clock
    /** Wakes this worker's loop, once it has subscribed to wake-ups. */
    let wakeSelf: Effect.Effect<void> = Effect.void

    const batchMin = Math.ceil(concurrency / 2)
    const pollDelay = stepper(Schedule.spaced(config.pollInterval).pipe(Schedule.jittered))
    const pollMillis = Duration.toMillis(config.pollInterval)

    /** Hands the jobs a claim took to the slots, which start them or keep them waiting; returns how many. */
    const took = (rows: ReadonlyArray<ClaimedRow>) => {
      slots.take(rows)
      // A claim that was in flight when the worker began to stop: back to pending, not run.
      if (host.stopping()) {
        for (const row of rows) host.release(row)
        return rows.length
      }
      for (const row of rows) ofJobName(row.name).claimed.unsafeUpdate(1, [])
      slots.admit(rows)
      return rows.length
    }

    /**
     * The claim made with the write of this worker's ends (`internal/claimsOnEnds.ts`).
     * While a backlog lasts (`rideArmed`: set when a claim fills every slot it asked for), each
     * write of this worker's ends claims, in the same transaction and commit, every slot those ends
     * free; the loop then claims nothing itself and reads `answers`: the jobs a write claimed (it
     * starts them), or `passed` when a write of its ends carried no claim of it. A claim that comes
     * back short ends the ride (the groups are drained), and so does the loop when it has to probe.
     *
     * Under a concurrency limit (keyed names) a ride takes back the slots its ends free, so other
     * workers would never get one while this worker's backlog lasts: every `yieldEvery`-th ride cut
     * short by limits leaves one freed slot to them (its ends announce the release; the ride does
     * not take it back before its next write, one ride later).
     */
    // Not with a rate limit (its claims count starts in their windows), nor with fair shares alone
    // (those names are claimed ahead instead: measured faster than riding on MariaDB).
    const riding = () =>
      claimer.claimsOnEnds &&
      (keyed.size === 0 || Array.from(host.limits().values()).every((l) => !isRated(l) && holdsWhileWaiting(l)))
    /** The keyed claim for a ride, when the worker has keyed names. */
    const keyedRide = (ahead: Ahead | undefined) => (keyed.size === 0 ? undefined : { limits: host.limits(), ahead })
    /**
     * Whether a claim of `groups` that took `took` of `asked` jobs leaves a backlog to ride on: it
     * filled every slot it asked for, or it took some and the groups are keyed — a limit or a key
     * held by others cut it short, not the end of the jobs, and the writes of the ends of what it
     * took will free slots for the next (the ride then waits for those writes: `rideBound`).
     */
    const backlogAfter = (groups: ReadonlyArray<Group>, took: number, asked: number) =>
      took === asked || (took > 0 && groups.some((g) => keyed.has(g.name)))
    let rideArmed = false
    /** The last claim of the ride was cut short by limits or keys: wait for the writes of ends, do not claim beside them. */
    let rideBound = false
    /** Rides cut short by limits since this worker last left a slot to others; the ride in flight leaves one. */
    let boundRides = 0
    let yielding = false
    /** The last ride left a slot to others: the next takes back no more than its own ends free. */
    let yielded = false
    /** A claim made with a write is in flight, or its answer not yet taken: the loop must not claim beside it. */
    let rideInFlight = false
    let rideGroups: ReadonlyArray<Group> = []
    const answers = yield* Queue.unbounded<ClaimAnswer | typeof passed>()
    /** Calls of the claimant by the completer: a write of this worker's ends that made none did not pass it on. */
    let claimantCalls = 0
    /** Ends the ride: the loop claims again itself. */
    const pass = () => {
      if (!rideArmed) return undefined
      rideArmed = false
      Queue.unsafeOffer(answers, passed)
      return undefined
    }
    const claimant: Claimant | undefined = !claimer.claimsOnEnds ? undefined : {
      answers,
      claimWith: (ended, offered) => {
        claimantCalls++
        // The last answer is not taken yet (its jobs are not counted): claim with a later write.
        if (rideInFlight) return undefined
        if (!rideArmed || !offered || !riding() || host.stopping() || host.idTaken()) return pass()
        const nowUs = Number(clock.unsafeCurrentTimeNanos() / 1000n)
        const groups = notHeld(paused.claimableGroups(rideGroups), nowUs)
        const ahead = host.ahead(true)
        // Leave a slot only while later ends of this worker will carry the ride on. (Where slots
        // pass from attempt to attempt and jobs wait for them, the slots leave them instead:
        // `Slots.passTo`.)
        yielding = (ahead === undefined || slots.waiting() === 0) && rideBound && ++boundRides >= yieldEvery &&
          slots.running() > ended
        if (yielding) boundRides = 0
        const limit = yielding
          ? ended - 1
          : ahead !== undefined
          ? ahead.slots + ahead.waiting
          : yielded
          ? Math.min(ended, slots.free(true, ended))
          : slots.free(true, ended)
        yielded = yielding
        if (groups.length === 0 || limit < 0 || (limit === 0 && !yielding)) return pass()
        slots.claimStarted(true)
        rideInFlight = true
        return { groups, limit, nowUs, workerId, keyed: keyedRide(ahead) }
      }
    }
    /** Starts the jobs a write of this worker's ends claimed. */
    const answered = (answer: ClaimAnswer) => {
      rideInFlight = false
      if (answer.failed === true) slots.claimFailed()
      if (!yielding && !backlogAfter(rideGroups, answer.rows.length, answer.asked)) rideArmed = false
      rideBound = yielding || answer.rows.length < answer.asked
      yielding = false
      try {
        took(answer.rows)
        if (answer.rows.length < answer.asked) host.claimedShort(rideGroups, answer.rows, false)
      } finally {
        slots.claimEnded(true)
      }
    }

    /**
     * Rate limits: the names whose windows have no start left (or that a `RateLimited` holds), each
     * with the instant (µs) it may start again, left out of the claims until then; and the earliest
     * instant a concurrency key a claim left out may. The loop's sleep ends at the earliest of them.
     */
    const heldUntilUs = new Map<string, number>()
    let keyWakeUs: number | undefined
    /**
     * The instants (µs) at which windows and holds that held back jobs of the last claims admit
     * them again, as the claims said (not capped by the poll): per name, and for keys (`""`).
     */
    const admitsAtUs = new Map<string, number>()
    /** The groups whose names no rate limit holds at `nowUs`. */
    const notHeld = (groups: ReadonlyArray<Group>, nowUs: number) => {
      if (heldUntilUs.size === 0) return groups
      for (const [name, until] of heldUntilUs) if (until <= nowUs) heldUntilUs.delete(name)
      return groups.filter((g) => !heldUntilUs.has(g.name))
    }
    /** The earliest instant (µs) a rate limit admits a job it held back, if any. */
    const rateWakeUs = (nowUs: number) => {
      let wake = keyWakeUs !== undefined && keyWakeUs > nowUs ? keyWakeUs : undefined
      for (const until of heldUntilUs.values()) if (until > nowUs && (wake === undefined || until < wake)) wake = until
      return wake
    }

    /**
     * How many jobs a claim may take now: `Slots.free`; where slots pass, the jobs that may start
     * with a slot the claim gives and those that may wait for one (`Ahead`) — jobs waiting for a
     * slot to pass to them take no room from jobs a claim may start.
     */
    const claimableNow = (backlog: boolean) => {
      const ahead = host.ahead(false)
      return ahead === undefined ? slots.free(backlog) : ahead.slots + ahead.waiting
    }

    /** Claims up to `free` jobs of `groups` and starts them; returns how many it claimed. */
    const claimAndStart = (groups: ReadonlyArray<Group>, free: number, nowUs: number, ahead: Ahead | undefined, probed: boolean) =>
      // A claim is never cut short: jobs it claimed are started, so shutdown can account for them.
      Effect.uninterruptible(Effect.suspend(() => {
        slots.claimStarted(false)
        return Effect.ensuring(
          Effect.map(claimer.claimWithHolds(groups, free, nowUs, workerId, keyed, host.limits(), ahead), (claim) => {
            const rows = claim.claimed
            // Held at most one poll interval at a time: a hold lifted in another process
            // (`Admin.liftHolds`) is seen by the next claim even where no notice reaches this one.
            for (const [name, until] of claim.heldUntilUs) {
              heldUntilUs.set(name, Math.min(until, nowUs + pollMillis * 1000))
              admitsAtUs.set(name, until)
            }
            keyWakeUs = claim.keyWakeUs
            const keyAdmits = admitsAtUs.get("")
            if (claim.keyAdmitsUs !== undefined && (keyAdmits === undefined || keyAdmits <= nowUs || claim.keyAdmitsUs < keyAdmits)) {
              admitsAtUs.set("", claim.keyAdmitsUs)
            }
            if (riding() && backlogAfter(groups, rows.length, free)) {
              // A backlog: the writes of these jobs' ends claim the slots they free (armed before
              // the jobs start, so that even their first ends carry a claim).
              rideArmed = true
              rideBound = rows.length < free
              rideGroups = groups
            }
            const n = took(rows)
            if (n < free) host.claimedShort(groups, rows, probed)
            return n
          }).pipe(Effect.tapErrorCause(() => Effect.sync(() => slots.claimFailed()))),
          Effect.sync(() => slots.claimEnded(false))
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
        if (host.idTaken()) return yield* Effect.never
        if (rideArmed || rideInFlight) {
          // Riding (see `claimant`): the writes of this worker's ends claim for it.
          let signal: ClaimAnswer | typeof passed | undefined
          if (!rideInFlight && rideBound && slots.running() === slots.waiting()) {
            // Cut short by limits, and no end left to carry a claim (jobs waiting ahead end
            // nothing until they start): claim as below.
            rideArmed = false
            continue
          }
          if (!rideInFlight && !rideBound && claimableNow(true) > 0) {
            // Slots free beside the ride (the last claim asked for half the slots, or slots were
            // freed while it was in flight): the next write of this worker's ends claims them too.
            // If none comes within about 2 ms (long jobs), stop riding and claim them below, as
            // the half-slot rule does: no slot idle for long while jobs wait.
            signal = yield* Effect.raceFirst(Queue.take(answers), Effect.as(wallSleep(2), undefined))
            if (signal === undefined) {
              if (!rideInFlight) rideArmed = false
              continue
            }
          } else if (!rideInFlight && rideBound) {
            // Cut short by limits: the next write of this worker's ends claims the slots they free.
            // A wake-up meanwhile: jobs enqueued or a probe asked for (a limit changed, a name
            // resumed), or the poll, ends the ride at once, and the loop probes or claims itself, so
            // no job waits behind a long attempt for a slot that is free; a slot freed by another
            // worker ends it unless a write of this worker's ends comes soon (within twice its mean
            // attempt time and 2 ms, at most 50 ms). A write that already carries a claim is waited for.
            const nowMs = Math.floor((yield* nowMicros) / 1000)
            const untilMs = Math.min(nowMs + pollMillis, laterUs === undefined ? Infinity : Math.ceil(laterUs / 1000))
            const next = yield* Effect.raceFirst(
              Effect.map(Queue.take(answers), (answer) => ({ answer })),
              Effect.map(Effect.timeoutOption(wakeups.take, Math.max(0, untilMs - nowMs)), (wake) => ({ wake }))
            )
            if ("wake" in next) {
              const wake = Option.getOrUndefined(next.wake)
              if (wake === undefined || wake.probe) probeNext = true
              else if (wake.groups.length > 0) due = mergeGroups(due, wake.groups)
              const graceMs = Math.min(50, 2 + 2 * (slots.attemptMs() ?? 0))
              const releasedOnly = wake?.released === true && !wake.probe && wake.groups.length === 0
              const answer = releasedOnly
                ? yield* Effect.raceFirst(Queue.take(answers), Effect.as(wallSleep(graceMs), undefined))
                : undefined
              if (answer === undefined) {
                if (!rideInFlight) rideArmed = false
                continue
              }
              signal = answer
            } else {
              signal = next.answer
            }
          } else {
            signal = yield* Queue.take(answers)
          }
          if (signal === passed) continue // a write passed without the claim: claim as below
          answered(signal)
          backlog = rideArmed
          if (!backlog) {
            probeNext = true
            continue
          }
          yield* takeWakes(yield* nowMicros)
          if (probeNext) rideArmed = false
          else rideGroups = paused.claimableGroups(due)
          continue
        }
        if (claimableNow(backlog) <= 0) {
          yield* slots.slotFreed
          continue
        }
        if (backlog && claimableNow(true) < batchMin) {
          // Jobs are waiting: claim when half the slots are free (fewer, larger claims), but
          // leave no slot idle for more than about 2 ms (wall-clock: this is not job timing).
          const deadline = Date.now() + 2
          while (claimableNow(true) < batchMin && slots.running() > 0 && Date.now() < deadline) {
            yield* Effect.raceFirst(slots.slotFreed, wallSleep(Math.max(1, deadline - Date.now())))
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
        const ahead = host.ahead(false)
        const wanted: number = backlog ? Math.min(slots.free(true), batchMin + slots.target()) : slots.free(false)
        const free = ahead === undefined ? wanted : ahead.slots + ahead.waiting
        // The slots changed during the waits and the probe above (a slot taken back by a release, the
        // jobs that may wait fewer): nothing to claim now; the probe's groups are kept for the next pass.
        if (free <= 0) continue
        // Names paused since they were found due (or hinted) are left out.
        due = paused.claimableGroups(due)
        // Names a rate limit holds are left out until their window admits them.
        const claimable = notHeld(due, nowUs)
        const claimed: number = claimable.length === 0 ? 0 : yield* claimAndStart(claimable, free, nowUs, ahead, probed)
        // Every slot asked for filled: more jobs are likely due; claim again from the same groups
        // when slots free, without a probe.
        backlog = claimed === free
        // A claim cut short by limits with jobs left armed a ride (`claimAndStart`): the writes of
        // its ends claim next, as for a full claim.
        if (backlog || rideArmed) continue
        if (claimed > 0 || !probed) {
          // A short claim: these groups are drained (or were taken by other workers). Probe before
          // sleeping, to learn what else is due and when the next pending job is.
          probeNext = true
          continue
        }
        // Jobs waiting for a slot to pass to them with no slot of their name held here (the
        // backlog's last jobs, claimed ahead as the last slots freed) are released, and probed for.
        if (slots.releaseStranded() > 0) {
          probeNext = true
          continue
        }
        // Sleep until an absolute time, read against the clock again just before sleeping: the
        // clock may have moved during the probe (under TestClock, by a whole `adjust`).
        const nowMs = Math.floor(nowUs / 1000)
        const poll = Option.getOrElse(yield* pollDelay(nowMs), () => 5000)
        const rateUs = rateWakeUs(nowUs)
        const wakeAtMs = Math.min(
          nowMs + poll,
          nextUs === undefined ? Infinity : Math.ceil(nextUs / 1000),
          rateUs === undefined ? Infinity : Math.ceil(rateUs / 1000)
        )
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
        rideArmed = false
        return Effect.whileLoop({
          while: () => rideInFlight,
          body: () => Queue.take(answers),
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

    return {
      run: loop,
      claimant,
      submitting: () => claimantCalls,
      written: (submitted) => {
        if (rideArmed && !rideInFlight && claimantCalls === submitted) {
          rideArmed = false
          Queue.unsafeOffer(answers, passed)
        }
      },
      settled: () => {
        if (rideArmed && !rideInFlight && rideBound && slots.running() === slots.waiting()) {
          rideArmed = false
          Queue.unsafeOffer(answers, passed)
        }
      },
      retakes: () => rideArmed && rideBound && !yielding,
      wake: Effect.suspend(() => wakeSelf),
      limitsChanged: () => {
        heldUntilUs.clear()
        admitsAtUs.clear()
        keyWakeUs = undefined
      },
      heldBackUntilUs: (nowUs) => {
        let earliest: number | undefined
        for (const [name, until] of admitsAtUs) {
          if (until <= nowUs) admitsAtUs.delete(name)
          else if (earliest === undefined || until < earliest) earliest = until
        }
        return earliest
      }
    } satisfies ClaimLoop
  })
