/**
 * The ticks of periodic jobs: `scheduleGet`, `scheduleFire`, `scheduleList`, `scheduleDescribe`.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { countJobs, realSleep } from "../support/helpers.js"
import type { Target } from "../support/targets.js"
import { insert, row, s, t0, withDriver } from "./fixtures.js"

export const schedulesOps = (target: Target) => {
  const name = (title: string) => `[${target.id}] ${title}`

  describe("scheduleList", () => {
    it.live(name("the periodic jobs by name with their latest tick, at most limit"), () =>
      withDriver(target, ({ driver }) =>
        Effect.gen(function*() {
          assert.deepStrictEqual(yield* driver.scheduleList(10), [])
          yield* driver.scheduleFire("b", t0, t0 + s(1), Effect.void)
          yield* driver.scheduleFire("a", t0 - s(60), t0 + s(2), Effect.void)
          const undescribed = { jobName: null, expression: null, timeZone: null, nextTickUs: null }
          assert.deepStrictEqual(yield* driver.scheduleList(10), [
            { name: "a", lastTickUs: t0 - s(60), updatedAtUs: t0 + s(2), ...undescribed },
            { name: "b", lastTickUs: t0, updatedAtUs: t0 + s(1), ...undescribed }
          ])
          assert.deepStrictEqual((yield* driver.scheduleList(1)).map((r) => r.name), ["a"])
        })))

    it.live(name("scheduleDescribe: a name's job, expression, zone and next tick, once a first tick made its row"), () =>
      withDriver(target, ({ driver }) =>
        Effect.gen(function*() {
          const d = { jobName: "report", expression: "0 3 * * *", timeZone: "Europe/Berlin", nextTickUs: t0 + s(60) }
          // No row before a first tick: a row means a tick was enqueued (schedulers read it so).
          yield* driver.scheduleDescribe("nightly", d)
          assert.deepStrictEqual(yield* driver.scheduleList(10), [])
          assert.isUndefined(yield* driver.scheduleGet("nightly"))
          yield* driver.scheduleFire("nightly", t0, t0 + s(1), Effect.void)
          yield* driver.scheduleDescribe("nightly", d)
          assert.deepStrictEqual(yield* driver.scheduleList(10), [{ name: "nightly", lastTickUs: t0, updatedAtUs: t0 + s(1), ...d }])
          // A tick fires as before; a later description replaces the earlier one, the tick kept.
          yield* driver.scheduleFire("nightly", t0 + s(60), t0 + s(61), Effect.void)
          assert.strictEqual(yield* driver.scheduleGet("nightly"), t0 + s(60))
          const next = { ...d, expression: "0 4 * * *", nextTickUs: t0 + s(120) }
          yield* driver.scheduleDescribe("nightly", next)
          assert.deepStrictEqual(yield* driver.scheduleList(10), [
            { name: "nightly", lastTickUs: t0 + s(60), updatedAtUs: t0 + s(61), ...next }
          ])
        })))
  })

  describe("scheduleGet", () => {
    it.live(name("undefined before the first tick, then the latest tick recorded"), () =>
      withDriver(target, ({ driver }) =>
        Effect.gen(function*() {
          assert.isUndefined(yield* driver.scheduleGet("nightly"))
          yield* driver.scheduleFire("nightly", t0 - s(60), t0, Effect.void)
          assert.strictEqual(yield* driver.scheduleGet("nightly"), t0 - s(60))
          yield* driver.scheduleFire("nightly", t0, t0, Effect.void)
          assert.strictEqual(yield* driver.scheduleGet("nightly"), t0)
          assert.isUndefined(yield* driver.scheduleGet("other"))
        })))
  })

  describe("scheduleFire", () => {
    it.live(name("enqueues a tick later than the latest, once; an earlier or equal tick enqueues nothing"), () =>
      withDriver(target, ({ driver, prefix }) =>
        Effect.gen(function*() {
          const enqueue = insert(driver, row("tick"))
          const first = yield* driver.scheduleFire("nightly", t0, t0, enqueue)
          assert.strictEqual(first?.length, 1)
          assert.isUndefined(yield* driver.scheduleFire("nightly", t0, t0 + s(1), enqueue))
          assert.isUndefined(yield* driver.scheduleFire("nightly", t0 - s(1), t0 + s(1), enqueue))
          assert.strictEqual(yield* countJobs(prefix), 1)
          assert.strictEqual((yield* driver.scheduleFire("nightly", t0 + s(60), t0 + s(60), enqueue))?.length, 1)
          // Each name has its own latest tick.
          assert.strictEqual((yield* driver.scheduleFire("hourly", t0, t0, enqueue))?.length, 1)
          assert.strictEqual(yield* countJobs(prefix), 3)
        })))

    it.live(name("an enqueue that fails records no tick and leaves no job"), () =>
      withDriver(target, ({ driver, prefix }) =>
        Effect.gen(function*() {
          const failing = insert(driver, row("tick")).pipe(Effect.zipRight(Effect.fail("refused" as const)))
          assert.strictEqual(yield* Effect.flip(driver.scheduleFire("nightly", t0, t0, failing)), "refused")
          assert.isUndefined(yield* driver.scheduleGet("nightly"))
          assert.strictEqual(yield* countJobs(prefix), 0)
        })))

    it.live(name("fires of one tick at once: one enqueues, the others wait for it and enqueue nothing"), () =>
      withDriver(target, ({ driver, prefix }) =>
        Effect.gen(function*() {
          // Each enqueue takes a while, so the fires overlap.
          const enqueue = realSleep(200).pipe(Effect.zipRight(insert(driver, row("tick"))))
          const results = yield* Effect.all(
            Array.from({ length: 3 }, () => driver.scheduleFire("nightly", t0, t0, enqueue)),
            { concurrency: "unbounded" }
          )
          assert.deepStrictEqual(results.map((r) => r === undefined ? "none" : "enqueued").sort(), ["enqueued", "none", "none"])
          assert.strictEqual(yield* countJobs(prefix), 1)
          assert.strictEqual(yield* driver.scheduleGet("nightly"), t0)
        })))
  })
}
