/**
 * `drain` of `sqlane/testing`: runs every due job of the handlers' names now, on a worker of its
 * own, and returns what ran; with `withScheduled`, steps `TestClock` to the next pending `run_at`
 * until nothing is left.
 *
 * @internal
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Queue from "effect/Queue"
import * as TestClock from "effect/TestClock"
import { DrainIncomplete, type InvalidWorkerOptions } from "../../schema/Errors.js"
import type { Handler } from "../../schema/Job.js"
import { Claimer } from "../../services/Claimer.js"
import type { Completer } from "../../services/Completer.js"
import { Events, type WorkerEvent } from "../../services/Events.js"
import { Notifier } from "../../services/Notifier.js"
import { Queue as JobQueue } from "../../services/Queue.js"
import type { QueueConfig } from "../../services/QueueConfig.js"
import * as Worker from "../../services/Worker.js"
import { Database } from "../Database.js"
import { durationMillis } from "../options.js"
import { microsToDate, nowMicros } from "../time.js"
import { wallSleep } from "../wallClock.js"

/**
 * One attempt that `drain` ran, in the order the attempts ended.
 *
 * - `completed`: the handler succeeded;
 * - `failed`: the attempt failed and the job is pending again, due at `retryAt` (`error` says why);
 * - `dead`: the attempt failed and the job is dead-lettered (`error` says why);
 * - `cancelled`: the job was cancelled while the attempt ran (listed after the others; `at` is
 *   when it was claimed).
 *
 * @example
 * ```ts
 * const ran = yield* drain({ handlers: [charge], withScheduled: true })
 * // [{ id: "1", name: "charge", attempt: 1, outcome: "failed", error: "Declined: …", retryAt: 1970-01-01T00:00:10.000Z, … },
 * //  { id: "1", name: "charge", attempt: 2, outcome: "completed", error: undefined, retryAt: undefined, … }]
 * const dead = ran.filter((r) => r.outcome === "dead")
 * ```
 *
 * @since 0.2.0
 * @category models
 */
export interface Ran {
  readonly id: string
  readonly name: string
  /** The attempt's number, from 1. */
  readonly attempt: number
  readonly outcome: "completed" | "failed" | "dead" | "cancelled"
  /** Why the attempt failed (`failed`, `dead`). */
  readonly error: string | undefined
  /** When the job runs again (`failed`). */
  readonly retryAt: Date | undefined
  /** When the attempt ended (Effect's `Clock`: `TestClock` in a test); `cancelled`: when it was claimed. */
  readonly at: Date
}

/**
 * What {@link drain} runs, and how far it goes.
 *
 * @example
 * ```ts
 * const options: DrainOptions<never> = { handlers: [send], withScheduled: true, until: "1 day", maxSteps: 20 }
 * ```
 *
 * @since 0.2.0
 * @category models
 */
export interface DrainOptions<R> {
  /** The handlers to run jobs with, one per job name: only jobs of these names are drained. */
  readonly handlers: ReadonlyArray<Handler<R>>
  /** Jobs run at once. Default 1: the jobs run one by one, in claim order (priority, `run_at`, id). */
  readonly concurrency?: number | undefined
  /**
   * Also run jobs not yet due: when nothing is due, `TestClock` is set to the earliest `run_at` of
   * the pending jobs of these names — or, when a rate limit's window (or a `RateLimited` hold)
   * holds due jobs back, to the instant it admits one, if earlier — and the drain goes on, until no
   * such job is left (retries included: a job that fails until it is dead ends dead). Needs
   * `TestClock` (`it.effect`). Default false: only the jobs due now run (as their rate limits
   * admit them now), and retries that are not yet due wait.
   *
   * Source: Oban's `Oban.Testing.drain_queue/2` (`with_scheduled: true`).
   */
  readonly withScheduled?: boolean | undefined
  /**
   * With `withScheduled`: jobs due more than this long after the drain started are left pending
   * (`"1 day"`). Default: no limit.
   */
  readonly until?: Duration.DurationInput | undefined
  /**
   * With `withScheduled`: the most steps of `TestClock`; with jobs still pending after them, the
   * drain fails with `DrainIncomplete` (`maxSteps`). Default 100.
   */
  readonly maxSteps?: number | undefined
  /**
   * Real time the drain may take (handlers, database round trips), whatever the `Clock`; then it
   * fails with `DrainIncomplete` (`timeout`), naming the jobs left. Default 30 seconds.
   */
  readonly timeout?: Duration.DurationInput | undefined
}

/** How often the drain looks at the database while jobs run (real time, ms). */
const checkMillis = 10
/** How long due jobs may wait unclaimed before the drain wakes its worker (real time, ms). */
const wakeAfterMillis = 100

const ranOf = (event: WorkerEvent): Ran | undefined => {
  switch (event._tag) {
    case "Completed":
      return { ...base(event), outcome: "completed", error: undefined, retryAt: undefined }
    case "Failed":
      return { ...base(event), outcome: "failed", error: event.error, retryAt: event.retryAt }
    case "Dead":
      return { ...base(event), outcome: "dead", error: event.error, retryAt: undefined }
    case "Claimed":
      return undefined
  }
}
const base = (e: { readonly id: string; readonly name: string; readonly attempt: number; readonly at: Date }) => ({
  id: e.id,
  name: e.name,
  attempt: e.attempt,
  at: e.at
})

/**
 * Runs every due job of the `handlers`' names now, on a worker that lives for the drain (so every
 * guarantee of a worker holds: claims, timeouts, retries by the job's `Schedule`, dead letters,
 * cancellation), and returns the attempts that ran, in the order they ended. It returns once no job
 * of those names is due or running, or those due are held back by a rate limit (their window is
 * used up, or a handler's `RateLimited` holds their name or key). With `withScheduled`, it then sets
 * `TestClock` to the earliest `run_at` of their pending jobs (read from the database), or to the
 * instant a rate window or hold admits the jobs it holds back if that is earlier, and goes on, until
 * none is left, none is due before `until`, or `maxSteps` is reached (then it fails with
 * `DrainIncomplete`). An attempt that ends with `RateLimited` is not listed (it does not count as an
 * attempt): the job is listed when it runs again.
 *
 * Start no other worker for these names in the test: the drain would wait for its jobs too, and
 * report only the attempts run in this process. A handler that sleeps on `TestClock` does not end
 * while the drain waits for it (the drain moves `TestClock` only once nothing is running): the
 * drain fails with `DrainIncomplete` after `timeout`, and the attempts still running are interrupted
 * and their jobs released (pending again, the attempt not counted). Jobs of paused names are not run. The
 * attempts are read from `Events` (a buffer of 4,096 between two looks, 10 ms apart).
 *
 * Fails with `DrainIncomplete`, `InvalidWorkerOptions` (a `concurrency` that is not a positive
 * integer, two handlers for one name), or a `SqlError` of its reads. Requires `QueueLive`'s services (and
 * the handlers' context).
 *
 * Source: Oban's `Oban.Testing.drain_queue/2` (`with_scheduled`, `with_recursion`), River's
 * `rivertest.Worker` (a job run through the real executor).
 *
 * @example
 * ```ts
 * const id = yield* queue.enqueue(SendEmail, { to: "ada@example.com" }, { delay: "1 hour" })
 * const ran = yield* drain({ handlers: [Job.handler(SendEmail, send)], withScheduled: true })
 * // [{ id, name: "send-email", attempt: 1, outcome: "completed", at: 1970-01-01T01:00:00.000Z, … }]
 * ```
 *
 * @since 0.2.0
 * @category testing
 */
export const drain = <R>(
  options: DrainOptions<R>
): Effect.Effect<
  ReadonlyArray<Ran>,
  DrainIncomplete | InvalidWorkerOptions | SqlError,
  R | Events | JobQueue | Claimer | Completer | Notifier | QueueConfig | Database | SqlClient.SqlClient
> =>
  Effect.gen(function*() {
    const timeout = durationMillis(options.timeout ?? "30 seconds")
    if ("problem" in timeout) return yield* Effect.dieMessage(`sqlane: drain's timeout ${timeout.problem}`)
    const until = options.until === undefined ? undefined : durationMillis(options.until)
    if (until !== undefined && "problem" in until) return yield* Effect.dieMessage(`sqlane: drain's until ${until.problem}`)
    const maxSteps = options.maxSteps ?? 100
    if (options.withScheduled === true && !("adjust" in (yield* Effect.clock))) {
      return yield* Effect.dieMessage("sqlane: drain with withScheduled steps TestClock: run it under TestClock (it.effect)")
    }
    const { driver } = yield* Database
    const claimer = yield* Claimer
    const queue = yield* JobQueue
    const notifier = yield* Notifier
    const startUs = yield* nowMicros
    const horizonUs = until === undefined ? Infinity : startUs + until.millis * 1000
    const paused = new Set((yield* driver.pausedList()).map((p) => p.name))
    const names = Array.from(new Set(options.handlers.map((h) => h.job.name))).filter((n) => !paused.has(n))
    const wanted = new Set(names)

    const events = yield* (yield* Events).subscribe
    const ran: Array<Ran> = []
    /** Attempts claimed and not yet ended, by `<id>:<attempt>`. */
    const claimed = new Map<string, WorkerEvent & { readonly _tag: "Claimed" }>()
    /** Takes the events published so far; whether there were any. */
    const take = Effect.map(Queue.takeAll(events), (chunk) => {
      let any = false
      for (const event of chunk) {
        if (!wanted.has(event.name)) continue
        any = true
        const key = `${event.id}:${event.attempt}`
        if (event._tag === "Claimed") claimed.set(key, event)
        else {
          claimed.delete(key)
          ran.push(ranOf(event)!)
        }
      }
      return any
    })
    const worker = yield* Worker.make({
      handlers: options.handlers,
      concurrency: options.concurrency ?? 1,
      id: `sqlane-drain-${crypto.randomUUID()}`,
      // When the drain fails, a handler still running (waiting on TestClock, say) is interrupted at
      // once and its job released: a wait on TestClock would never end.
      shutdownTimeout: 0
    })
    const deadline = Date.now() + timeout.millis

    /** Jobs of these names due or running now (one statement: one snapshot). */
    const left = Effect.gen(function*() {
      const nowUs = yield* nowMicros
      const rows = yield* driver.jobStats(nowUs, nowUs)
      return rows.filter((r) => wanted.has(r.name) && (r.due > 0 || r.state === "running"))
    })
    /**
     * Waits until nothing of these names is due or running and no event came meanwhile: every claim
     * is an event, so a job cannot slip from due to running between two reads unseen. Returns
     * undefined then; or, when the jobs left due are held back by a rate limit's window or a hold
     * (the worker, woken, still claimed none), the instant (µs) the worker says one admits a job.
     */
    const settle = Effect.gen(function*() {
      let quietSinceMs = Date.now()
      /** The worker was woken since the last event. */
      let woken = false
      while (true) {
        const heard = () => {
          quietSinceMs = Date.now()
          woken = false
        }
        if (yield* take) heard()
        const rows = yield* left
        const running = yield* worker.running
        if (yield* take) heard()
        else if (rows.length === 0 && running === 0) return undefined
        // Jobs due and nothing claimed for a while: the worker may sleep past a TestClock step that
        // landed between its reading of the clock and its sleep. Wake it; if it was woken already,
        // a rate limit may hold the jobs back until a later window.
        if (running === 0 && rows.some((r) => r.due > 0) && Date.now() - quietSinceMs >= wakeAfterMillis) {
          // (Idle: no claim of the worker in flight, which may still take them.)
          const held = woken && (yield* worker.idle) ? yield* worker.heldBackUntil : undefined
          if (held !== undefined) return held.getTime() * 1000
          yield* notifier.announce(names)
          quietSinceMs = Date.now()
          woken = true
        }
        if (Date.now() > deadline) {
          const what = rows.map((r) => `${r.due > 0 ? `${r.due} due` : `${r.count} running`} "${r.name}"`).join(", ")
          return yield* new DrainIncomplete({
            reason: "timeout",
            message: `drain: jobs still ${what || "held by its worker"} after ${timeout.millis} ms (real time); ` +
              `a handler waiting on TestClock never ends while the drain waits for it`
          })
        }
        yield* wallSleep(checkMillis)
      }
    })

    let heldUs = yield* settle
    if (options.withScheduled === true) {
      let steps = 0
      while (true) {
        // The next pending job's run_at, or the window that admits the due jobs a rate limit holds back.
        const dueUs = (yield* claimer.probe(names, yield* nowMicros)).nextUs
        const next = dueUs === undefined ? heldUs : heldUs === undefined ? dueUs : Math.min(dueUs, heldUs)
        if (next === undefined || next > horizonUs) break
        if (steps >= maxSteps) {
          return yield* new DrainIncomplete({
            reason: "maxSteps",
            message: `drain: jobs still pending after ${maxSteps} steps of TestClock, the next due at ` +
              `${microsToDate(next).toISOString()} (raise maxSteps, or set until)`
          })
        }
        steps++
        const nowMs = (yield* nowMicros) / 1000
        yield* TestClock.adjust(Duration.millis(Math.max(0, Math.ceil(next / 1000 - nowMs))))
        heldUs = yield* settle
      }
    }
    // An attempt claimed and never ended: the job was cancelled while it ran (its end changed nothing).
    for (const event of claimed.values()) {
      const state = yield* Effect.orElseSucceed(Effect.map(queue.get(event.id), (job) => job.state), () => undefined)
      if (state === "cancelled") {
        ran.push({ ...base(event), outcome: "cancelled", error: undefined, retryAt: undefined })
      }
    }
    return ran
  }).pipe(Effect.scoped)
