/**
 * `sqlane/testing`: what an app's own tests of its jobs need, on a real database. It uses Effect
 * only (no test runner): an expectation that does not hold fails the effect with a typed error
 * (`ExpectationFailed`, `WaitTimedOut`, `DrainIncomplete`), which `@effect/vitest`'s `it.effect`
 * (or any runner that runs the effect) reports with its message.
 *
 * - {@link TestQueueLive}: `QueueLive` with the settings that keep `TestClock` steps cheap;
 * - {@link drain}: runs every due job now, with the handlers given, and returns what ran; with
 *   `withScheduled`, steps `TestClock` through delays and retries until nothing is left;
 * - {@link expectEnqueued} / {@link expectNotEnqueued}: whether a job of a definition with a payload
 *   like the one given is in the jobs table;
 * - {@link waitFor}: waits, in real time, for a job to reach a state.
 *
 * docs/testing.md shows a whole test file.
 *
 * @since 0.2.0
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { QueueLive, type Services } from "./layers/QueueLive.js"
import type { SchemaNotMigrated, SetupError, UnsupportedDatabase } from "./schema/Errors.js"
import * as Migrations from "./services/Migrations.js"
import type { QueueOptions } from "./services/QueueConfig.js"

/** @since 0.2.0 */
export { drain, type DrainOptions, type Ran } from "./internal/testing/drain.js"
/** @since 0.2.0 */
export {
  type EnqueuedOptions,
  expectEnqueued,
  expectNotEnqueued,
  type MatchedJob,
  type PartialPayload
} from "./internal/testing/expect.js"
/** @since 0.2.0 */
export { waitFor, type WaitForOptions } from "./internal/testing/waitFor.js"

/**
 * The `QueueLive` options {@link TestQueueLive} sets, each overridable:
 *
 * - `pollInterval: "1 hour"`: a worker still wakes at the next known `run_at` and at every enqueue
 *   of this process; a `TestClock.adjust` does not replay a poll (a database round trip) every 5
 *   simulated seconds;
 * - `rescueInterval: "1 hour"`, `heartbeatInterval: "1 hour"`, `leaseTimeout: "3650 days"`: a
 *   jump of `TestClock` never makes a live worker look lost (its session lock still says it is);
 *   with these, on MySQL/MariaDB a running job's cancellation and a pause are seen by workers of
 *   other `QueueLive`s only at the next hour of `TestClock` (in this process at once);
 * - `prune: false`: finished jobs stay after a jump of days, for the test to read;
 * - `migrate: true`.
 *
 * @example
 * ```ts
 * // The same settings on a layer built by hand:
 * const Live = QueueLive({ ...testQueueOptions, prefix: "orders_test_" })
 * ```
 *
 * @since 0.2.0
 * @category constants
 */
export const testQueueOptions: QueueOptions = {
  pollInterval: "1 hour",
  rescueInterval: "1 hour",
  heartbeatInterval: "1 hour",
  leaseTimeout: "3650 days",
  prune: false,
  migrate: true
}

/**
 * Options of {@link TestQueueLive}: any `QueueOptions`, and `uniquePrefix`.
 *
 * @example
 * ```ts
 * const options: TestQueueOptions = { uniquePrefix: true, prefix: "orders_", hintDelay: 0 }
 * ```
 *
 * @since 0.2.0
 * @category models
 */
export interface TestQueueOptions extends QueueOptions {
  /**
   * Give each build of the layer a table prefix of its own: `prefix` (default `"sqlane_"`) with a
   * suffix (see {@link uniquePrefix}), so that tests and test files that run at once never see each
   * other's jobs; its tables are dropped when the layer closes (`Migrations.drop`). Default false.
   */
  readonly uniquePrefix?: boolean | undefined
}

let prefixes = 0

/**
 * A table prefix of its own: `base` with a suffix unique to this process and call (at most 40
 * characters in all, as a prefix must be).
 *
 * @example
 * ```ts
 * const prefix = uniquePrefix("orders_") // "orders_m4x1k2p_0_"
 * ```
 *
 * @since 0.2.0
 * @category constructors
 */
export const uniquePrefix = (base = "sqlane_"): string => {
  const suffix = `${Date.now().toString(36)}${process.pid.toString(36)}_${(prefixes++).toString(36)}_`
  return `${base.slice(0, Math.max(0, 40 - suffix.length))}${suffix}`
}

/**
 * `QueueLive` for tests: {@link testQueueOptions} (cheap `TestClock` steps, migrations run), then
 * `options`, with a prefix (and tables) of its own per build when `uniquePrefix` is set.
 * `@effect/vitest`'s `it.effect` and `layer()` run under `TestClock`, so every time
 * sqlane decides about jobs (delays, retries, the worker's wake-up at the next `run_at`) follows
 * `TestClock.adjust`; the housekeeping on the wall clock (the worker's lock checks, the MySQL/MariaDB
 * insert check) needs no adjusting.
 *
 * Fails as `QueueLive` does (`SetupError`, `UnsupportedDatabase`, `SchemaNotMigrated`, `SqlError`).
 *
 * @example
 * ```ts
 * import { PgClient } from "@effect/sql-pg"
 * import { layer } from "@effect/vitest"
 * import { Layer, Redacted } from "effect"
 * import { TestQueueLive } from "sqlane/testing"
 *
 * const TestLive = TestQueueLive({ uniquePrefix: true }).pipe(
 *   Layer.provideMerge(PgClient.layer({ url: Redacted.make("postgres://postgres@127.0.0.1:5432/test") })))
 *
 * layer(TestLive)("emails", (it) => { it.effect("…", () => …) })
 * ```
 *
 * @since 0.2.0
 * @category layers
 */
export const TestQueueLive = (
  options: TestQueueOptions = {}
): Layer.Layer<Services, SqlError | UnsupportedDatabase | SetupError | SchemaNotMigrated, SqlClient.SqlClient> => {
  const { uniquePrefix: unique, ...queueOptions } = options
  if (unique !== true) return QueueLive({ ...testQueueOptions, ...queueOptions })
  return Layer.unwrapScoped(Effect.gen(function*() {
    const prefix = uniquePrefix(options.prefix ?? "sqlane_")
    // Added first, so run last: once the queue's own finalizers (workers, listeners) have run.
    yield* Effect.addFinalizer(() =>
      Migrations.drop(prefix).pipe(
        Effect.catchAllCause((cause) => Effect.logWarning(`sqlane: dropping the test tables ${prefix}* failed`, cause))
      )
    )
    return QueueLive({ ...testQueueOptions, ...queueOptions, prefix })
  }))
}
