/**
 * Sleeps on the wall clock whatever `Clock` the caller runs under. For housekeeping cadences that
 * decide nothing about jobs (re-reading paused names, pruning passes): under `TestClock` they are
 * not replayed by `TestClock.adjust`, each replay being a real database round trip. Decisions about
 * jobs (run_at, retries, retention cutoffs) keep using Effect's `Clock`.
 *
 * @internal
 */
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"

const live = Clock.make()

export const wallSleep = (duration: Duration.DurationInput): Effect.Effect<void> =>
  Effect.withClock(Effect.sleep(duration), live)
