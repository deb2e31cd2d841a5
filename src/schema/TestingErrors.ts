/**
 * The typed errors of `sqlane/testing` (`expectEnqueued`, `waitFor`, `drain`); `Errors` exports them
 * too.
 *
 * @since 0.2.0
 */
import * as Schema from "effect/Schema"

/**
 * An expectation of `sqlane/testing` does not hold (`expectEnqueued`, `expectNotEnqueued`). The
 * message says what was expected and lists the jobs found instead, e.g.
 * `expected a pending "send-email" job with payload matching {"to":"bob@example.com"}; found 1 "send-email" job: #12 pending …`.
 *
 * @example
 * ```ts
 * const error = yield* Effect.flip(expectEnqueued(SendEmail, { to: "bob@example.com" }))
 * if (error._tag === "ExpectationFailed") console.log(error.message)
 * ```
 *
 * @since 0.2.0
 * @category errors
 */
export class ExpectationFailed extends Schema.TaggedError<ExpectationFailed>("sqlane/ExpectationFailed")(
  "ExpectationFailed",
  {
    message: Schema.String
  }
) {}

/**
 * `waitFor` (of `sqlane/testing`) gave up: the job did not reach any of the states waited for
 * within `millis` (real time). `lastSeen` is the state it was last read in, or `"not found"`.
 *
 * @example
 * ```ts
 * yield* waitFor(id, "completed").pipe(
 *   Effect.catchTag("WaitTimedOut", (e) => Effect.logError(`stuck ${e.lastSeen}`))
 * )
 * ```
 *
 * @since 0.2.0
 * @category errors
 */
export class WaitTimedOut extends Schema.TaggedError<WaitTimedOut>("sqlane/WaitTimedOut")("WaitTimedOut", {
  id: Schema.String,
  /** The states waited for. */
  states: Schema.Array(Schema.String),
  /** The state the job was last seen in, or `"not found"`. */
  lastSeen: Schema.String,
  /** The time waited, in milliseconds (real time). */
  millis: Schema.Number
}) {
  get message() {
    return `job ${this.id} did not reach ${this.states.join(" or ")} within ${this.millis} ms; last seen: ${this.lastSeen}`
  }
}

/**
 * `drain` (of `sqlane/testing`) could not finish: jobs were still due or running after `timeout`
 * (real time; a handler that waits on `TestClock` never ends by itself), or, with `withScheduled`,
 * jobs were still pending after `maxSteps` steps of `TestClock` (a job rescheduled for ever, a
 * periodic job enqueuing new ticks). `message` says which, with the jobs left.
 *
 * @example
 * ```ts
 * const exit = yield* Effect.exit(drain({ handlers, withScheduled: true, maxSteps: 3 }))
 * // Exit.fail(DrainIncomplete { reason: "maxSteps", message: "drain: jobs still pending after 3 steps of TestClock, …" })
 * ```
 *
 * @since 0.2.0
 * @category errors
 */
export class DrainIncomplete extends Schema.TaggedError<DrainIncomplete>("sqlane/DrainIncomplete")(
  "DrainIncomplete",
  {
    reason: Schema.Literal("timeout", "maxSteps"),
    message: Schema.String
  }
) {}
