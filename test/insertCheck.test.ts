/**
 * The MySQL/MariaDB insert check's own timing logic (`Notifier.layer` on a driver without `listenNotify`): when it reads, when it
 * wakes, and that no failure ends it. The newest job id comes from a stand-in for the one statement the
 * check runs; what that statement returns on a real MariaDB, and the wake-up across processes, are
 * tested in the core suite (test/suite/core.ts, "the insert check …").
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { Database } from "../src/internal/Database.js"
import { makeReachability } from "../src/internal/outage.js"
import type { Driver } from "../src/internal/driver/Driver.js"
import * as Notifier from "../src/services/Notifier.js"
import * as QueueConfig from "../src/services/QueueConfig.js"
import { realSleep } from "./support/helpers.js"

let prefixes = 0
/** A Notifier of a driver without `listenNotify`, whose check reads `newest()` (every 20 ms). */
const notifierWith = (newest: () => Effect.Effect<string | null>) =>
  Notifier.layer.pipe(
    Layer.provide(QueueConfig.layer({ prefix: `ic${prefixes++}_`, insertCheckInterval: "20 millis" })),
    Layer.provide(Layer.succeed(Database, {
      driver: { capabilities: { listenNotify: false }, jobNewestId: newest } as unknown as Driver,
      version: "test",
      identity: `insert-check-test-${process.pid}`,
      reachability: makeReachability(Effect.void)
    }))
  )

describe("insert check (MySQL/MariaDB notifier)", () => {
  it.live("reads only while a worker is subscribed", () => {
    let reads = 0
    return Effect.gen(function*() {
      const notifier = yield* Notifier.Notifier
      yield* realSleep(200)
      assert.strictEqual(reads, 0, "no reading before any worker subscribed")
      yield* Effect.scoped(Effect.zipRight(notifier.subscribe(["a"]), realSleep(200)))
      assert.isAtLeast(reads, 3, "it read while the worker was subscribed")
      const atLeave = reads
      yield* realSleep(300)
      assert.isAtMost(reads - atLeave, 1, "no reading once the last worker left")
    }).pipe(Effect.provide(notifierWith(() => Effect.sync(() => (reads++, "1")))))
  })

  it.live("its first reading wakes the workers (a job may have committed since their first probe)", () => {
    let committed = false
    return Effect.gen(function*() {
      const wakeups = yield* (yield* Notifier.Notifier).subscribe(["a"])
      // The worker's first probe saw id 5; another process commits 6 before the check's first reading.
      committed = true
      assert.isTrue(Option.isSome(yield* Effect.timeoutOption(wakeups.take, "1 second")))
    }).pipe(Effect.scoped, Effect.provide(notifierWith(() => Effect.sync(() => (committed ? "6" : "5")))))
  })

  it.live("a change of the newest id wakes the workers; no change, no wake-up", () => {
    let newest = "1"
    return Effect.gen(function*() {
      const wakeups = yield* (yield* Notifier.Notifier).subscribe(["a"])
      yield* wakeups.take // the first reading
      assert.isTrue(Option.isNone(yield* Effect.timeoutOption(wakeups.take, "200 millis")))
      newest = "2"
      const wake = yield* Effect.timeoutOption(wakeups.take, "1 second")
      assert.isTrue(Option.isSome(wake) && wake.value.probe)
    }).pipe(Effect.scoped, Effect.provide(notifierWith(() => Effect.sync(() => newest))))
  })

  it.live("a failed or dying reading does not end the check", () => {
    let reads = 0
    return Effect.gen(function*() {
      const wakeups = yield* (yield* Notifier.Notifier).subscribe(["a"])
      yield* wakeups.take // the first reading
      // Reading 2 dies and 3 fails; reading 4 on returns a new id, which must still wake the worker.
      assert.isTrue(Option.isSome(yield* Effect.timeoutOption(wakeups.take, "2 seconds")))
      assert.isAtLeast(reads, 4)
    }).pipe(
      Effect.scoped,
      Effect.provide(notifierWith(() =>
        Effect.suspend(() => {
          reads++
          if (reads === 2) return Effect.die("a driver bug")
          if (reads === 3) return Effect.fail("unreachable") as unknown as Effect.Effect<string>
          return Effect.succeed(reads === 1 ? "1" : "2")
        })
      ))
    )
  })
})
