/**
 * Time from Effect's `Clock`, in the units sqlane stores: integer microseconds since the epoch.
 * Every time decision goes through here, so `TestClock` drives delays, backoff and polling.
 *
 * @internal
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"

export const nowMicros: Effect.Effect<number> = Effect.map(
  Clock.currentTimeNanos,
  (nanos) => Number(nanos / 1000n)
)

export const microsToDate = (us: number): Date => new Date(Math.floor(us / 1000))
