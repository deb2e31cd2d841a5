/**
 * Stepping an Effect `Schedule` by hand: a job's retry schedule is asked for the delay of its
 * n-th retry, and the worker's poll schedule for the next poll delay.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type * as Schedule from "effect/Schedule"
import * as ScheduleDecision from "effect/ScheduleDecision"
import * as Intervals from "effect/ScheduleIntervals"

/**
 * The delay (ms) before retry number `retry` (1 = the retry after the first failed attempt),
 * stepping the schedule from its start as if each earlier retry ran on time. `None` when the
 * schedule is done before that retry: the job is out of attempts.
 */
export const retryDelay = (
  schedule: Schedule.Schedule<unknown, unknown>,
  retry: number,
  input: unknown,
  nowMs: number
): Effect.Effect<Option.Option<number>> =>
  Effect.gen(function*() {
    let state = schedule.initial
    let now = nowMs
    let delay = 0
    for (let i = 0; i < retry; i++) {
      const [next, , decision] = yield* schedule.step(now, input, state)
      if (ScheduleDecision.isDone(decision)) return Option.none()
      state = next
      const start = Intervals.start(decision.intervals)
      delay = Math.max(0, start - now)
      now = Math.max(now, start)
    }
    return Option.some(delay)
  })

/** A stateful stepper: each call gives the schedule's next delay (ms), `None` once done. */
export const stepper = (schedule: Schedule.Schedule<unknown, unknown>) => {
  let state = schedule.initial
  return (nowMs: number): Effect.Effect<Option.Option<number>> =>
    Effect.map(schedule.step(nowMs, undefined, state), ([next, , decision]) => {
      if (ScheduleDecision.isDone(decision)) return Option.none()
      state = next
      return Option.some(Math.max(0, Intervals.start(decision.intervals) - nowMs))
    })
}
