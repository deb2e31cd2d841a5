/**
 * `waitFor` of `sqlane/testing`: waits in real time for a job to reach a state.
 *
 * @internal
 */
import type { SqlError } from "@effect/sql/SqlError"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import { WaitTimedOut } from "../../schema/Errors.js"
import type { JobInfo, JobState } from "../../schema/JobInfo.js"
import { Queue } from "../../services/Queue.js"
import { durationMillis } from "../options.js"
import { wallSleep } from "../wallClock.js"

/**
 * How long {@link waitFor} waits, and how often it looks.
 *
 * @example
 * ```ts
 * yield* waitFor(id, "completed", { timeout: "30 seconds", interval: "100 millis" })
 * ```
 *
 * @since 0.2.0
 * @category models
 */
export interface WaitForOptions {
  /** Real time to wait before failing with `WaitTimedOut`. Default 10 seconds. */
  readonly timeout?: Duration.DurationInput | undefined
  /** Real time between two reads of the job. Default 20 ms. */
  readonly interval?: Duration.DurationInput | undefined
}

const millisOf = (name: string, input: Duration.DurationInput, min: number) => {
  const d = durationMillis(input)
  return "problem" in d
    ? Effect.dieMessage(`sqlane: waitFor's ${name} ${d.problem}`)
    : Effect.succeed(Math.max(min, d.millis))
}

/**
 * Reads job `id` (`Queue.get`) every `interval` until it is in `state` (or one of the states
 * given), and succeeds with it; fails with `WaitTimedOut` after `timeout`, saying the state it was
 * last seen in (`"not found"` while there is no such row). The waits are in real time, whatever
 * `Clock` the test runs under: under `TestClock`, `Effect.sleep` would wait until the test adjusts
 * the clock, while a worker's database round trips take real time. For a job whose worker runs in
 * the test (`Worker.layer`); to run jobs in the test's fiber, see `drain`.
 *
 * @example
 * ```ts
 * const id = yield* queue.enqueue(SendEmail, { to: "ada@example.com" })
 * const job = yield* waitFor(id, "completed")
 * yield* waitFor(failing, ["dead", "cancelled"], { timeout: "2 seconds" })
 * // fails with: job 7 did not reach dead or cancelled within 2000 ms; last seen: running
 * ```
 *
 * @since 0.2.0
 * @category testing
 */
export const waitFor = (
  id: string,
  state: JobState | ReadonlyArray<JobState>,
  options: WaitForOptions = {}
): Effect.Effect<JobInfo, WaitTimedOut | SqlError, Queue> =>
  Effect.gen(function*() {
    const queue = yield* Queue
    const states: ReadonlyArray<JobState> = typeof state === "string" ? [state] : state
    const timeout = yield* millisOf("timeout", options.timeout ?? "10 seconds", 0)
    const interval = yield* millisOf("interval", options.interval ?? "20 millis", 1)
    const deadline = Date.now() + timeout
    while (true) {
      const job = yield* Effect.catchTag(queue.get(id), "JobNotFound", () => Effect.succeed(undefined))
      if (job !== undefined && states.includes(job.state)) return job
      if (Date.now() >= deadline) {
        return yield* new WaitTimedOut({ id, states, lastSeen: job?.state ?? "not found", millis: timeout })
      }
      yield* wallSleep(Math.min(interval, Math.max(1, deadline - Date.now())))
    }
  })
