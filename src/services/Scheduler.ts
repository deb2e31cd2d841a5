/**
 * Runs periodic jobs: for each `PeriodicJob`, sleeps (Effect's `Clock`) until its next tick and
 * enqueues that tick's job. Run one in every process that should keep the schedules going — any
 * number of schedulers may run the same periodic jobs: each tick is enqueued exactly once, by a
 * unique key (`PeriodicJob.tickKey`) held in every state.
 *
 * Ticks are taken one after the other from the previous one, so a scheduler that is late (a slow
 * database, a paused process) still enqueues every tick that passed while it ran. Ticks that passed
 * while no scheduler ran are skipped, or the latest of them enqueued once (`missed: "runOnce"`):
 * the latest tick enqueued is kept in `<prefix>schedules`.
 *
 * Across daylight-saving changes the ticks follow classic cron (cronie): when the clock goes back, a
 * cron with wildcard or step hours (`* * * * *`, `0 *∕2 * * *`) fires through both copies of the
 * repeated hour, one at fixed hours (`30 1 * * *`) once; when it jumps ahead, a time in the skipped
 * hour fires once, an hour later on the clock (see `nextTick` in `internal/cron.ts`).
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import { latestTick, nextTick } from "../internal/cron.js"
import { Database } from "../internal/Database.js"
import { forkScopedBounded } from "../internal/outage.js"
import { nowMicros } from "../internal/time.js"
import { InvalidPayload } from "../schema/Errors.js"
import type { JobState } from "../schema/JobInfo.js"
import { type PeriodicJob, tickKey } from "../schema/PeriodicJob.js"
import { Queue } from "./Queue.js"

/**
 * The options of a scheduler: the periodic jobs it runs.
 *
 * @example
 * ```ts
 * const SchedulerLive = Scheduler.layer({ schedules: [Nightly, Hourly] })
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface SchedulerOptions {
  /** The periodic jobs to run; their names must differ. */
  readonly schedules: ReadonlyArray<PeriodicJob>
}

/**
 * A running scheduler: the next tick of each of its periodic jobs.
 *
 * @example
 * ```ts
 * const scheduler = yield* Scheduler.make({ schedules: [Nightly] })
 * const next = scheduler.next("nightly-report") // a Date once the scheduler has taken its first step
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface SchedulerHandle {
  /** The next tick each periodic job waits for, by name (after the scheduler's first step). */
  readonly next: (name: string) => Date | undefined
}

const allStates: ReadonlyArray<JobState> = ["pending", "running", "completed", "dead", "cancelled"]

/** @internal */
export { latestTick } from "../internal/cron.js"

/** Database writes are retried until they succeed: a tick is late rather than lost. */
const untilDone = Schedule.exponential("100 millis").pipe(Schedule.union(Schedule.spaced("5 seconds")))

/**
 * Starts the periodic jobs in the current scope; they stop when it closes. Dies when two periodic
 * jobs share a name.
 *
 * @example
 * ```ts
 * const program = Effect.scoped(Effect.gen(function*() {
 *   const scheduler = yield* Scheduler.make({ schedules: [Nightly] })
 *   yield* Effect.never // the periodic jobs run until the scope closes
 * }))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: SchedulerOptions): Effect.Effect<SchedulerHandle, never, Scope.Scope | Queue | Database> =>
  Effect.gen(function*() {
    const queue = yield* Queue
    const { reachability, driver } = yield* Database
    const seen = new Set<string>()
    for (const p of options.schedules) {
      if (seen.has(p.name)) return yield* Effect.dieMessage(`sqlane: two periodic jobs named "${p.name}"`)
      seen.add(p.name)
    }
    const nextTicks = new Map<string, Date>()

    const fire = (p: PeriodicJob, tick: Date) =>
      Effect.gen(function*() {
        const payload = yield* Effect.try({
          try: () => p.payload(tick),
          catch: (e) =>
            new InvalidPayload({
              job: p.job.name,
              reason: "threw",
              path: "$",
              message: `the payload function threw: ${e instanceof Error ? e.message : String(e)}`
            })
        })
        // The schedule's row orders the schedulers of one name; the tick's unique key guards the
        // job as well (a scheduler of an older version records its ticks but does not check them).
        const result = yield* driver.scheduleFire(
          p.name,
          tick.getTime() * 1000,
          yield* nowMicros,
          queue.insert(p.job, payload, {
            runAt: tick,
            priority: p.priority,
            unique: { key: tickKey(p.name, tick), states: allStates }
          })
        )
        yield* Effect.logDebug(
          result === undefined || result.duplicate ? "sqlane: tick already enqueued" : "sqlane: tick enqueued"
        ).pipe(Effect.annotateLogs({ "sqlane.job.id": result?.id ?? "", "sqlane.tick": tick.toISOString() }))
      }).pipe(
        // A payload that does not encode (or whose function throws), or an option refused (the
        // periodic job's priority), skips the tick: retrying cannot help.
        Effect.catchTags({
          InvalidPayload: (e) => Effect.logError(`sqlane: tick ${tick.toISOString()} skipped`, e),
          InvalidEnqueueOption: (e) => Effect.logError(`sqlane: tick ${tick.toISOString()} skipped`, e)
        }),
        Effect.tapErrorCause((cause) =>
          reachability.failed("periodic jobs", "sqlane: enqueueing a tick failed; retrying", cause)
        ),
        Effect.retry(untilDone)
      )

    const run = (p: PeriodicJob) =>
      Effect.gen(function*() {
        const startMs = yield* Clock.currentTimeMillis
        const lastUs = yield* driver.scheduleGet(p.name).pipe(Effect.retry(untilDone))
        if (p.missed === "runOnce" && lastUs !== undefined) {
          // The latest tick at or before now, if no scheduler enqueued it.
          const latest = latestTick(p.cron, startMs, lastUs)
          if (latest !== undefined && latest.getTime() * 1000 > lastUs) yield* fire(p, latest)
        }
        let cursor = new Date(startMs)
        while (true) {
          const tick = nextTick(p.cron, cursor)
          nextTicks.set(p.name, tick)
          // For the dashboard: what this name runs and its next tick (once a first tick was enqueued).
          // Not retried: the next tick describes it again.
          yield* driver.scheduleDescribe(
            p.name,
            { jobName: p.job.name, expression: p.expression, timeZone: p.timeZone, nextTickUs: tick.getTime() * 1000 }
          ).pipe(Effect.catchAllCause((cause) => Effect.logDebug("sqlane: the periodic job's description was not written", cause)))
          // Whole milliseconds: TestClock cannot represent a fractional instant.
          const wait = tick.getTime() - (yield* Clock.currentTimeMillis)
          if (wait > 0) yield* Effect.sleep(Math.ceil(wait))
          yield* fire(p, tick)
          cursor = tick
        }
      }).pipe(
        // `Cron` throws when it finds no tick (checked at declaration; defensive here).
        Effect.catchAllDefect((defect) => Effect.logError("sqlane: periodic job stopped", defect)),
        Effect.annotateLogs({ package: "sqlane", module: "Scheduler", "sqlane.periodic": p.name }),
        (effect) => forkScopedBounded(effect, 100)
      )

    yield* Effect.forEach(options.schedules, run, { discard: true })
    return { next: (name) => nextTicks.get(name) } satisfies SchedulerHandle
  })

/**
 * The periodic jobs as a layer: they run while the layer is alive. Provide it with `QueueLive`
 * (it enqueues through `Queue`); workers with handlers for the jobs run them.
 *
 * @example
 * ```ts
 * const Nightly = PeriodicJob.unsafeMake("nightly-report", { cron: "0 3 * * *", job: Report, payload: (tick) => ({ day: tick }) })
 * const MainLive = Layer.mergeAll(Scheduler.layer({ schedules: [Nightly] }), Worker.layer({ handlers: [ReportHandler] })).pipe(
 *   Layer.provideMerge(QueueLive()),
 *   Layer.provideMerge(ClientLive)
 * )
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: SchedulerOptions): Layer.Layer<never, never, Queue | Database> =>
  Layer.scopedDiscard(make(options))
