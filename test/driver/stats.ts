/**
 * The per-minute stats (`<prefix>stats`): `statsAdd` adds to the rows (creating them), in one
 * transaction however many statements it takes; `statsRead` reads the minutes from a time on, newest
 * first, up to a limit; `statsPrune` deletes the oldest minutes before a cutoff, a batch at a time.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import type { StatsMinuteRow } from "../../src/internal/driver/Driver.js"
import { pickupBoundsMs } from "../../src/internal/driver/shared.js"
import type { Target } from "../support/targets.js"
import { t0, withDriver } from "./fixtures.js"

/** `n` minutes in µs. */
const m = (n: number) => n * 60_000_000

/** A row of `name` at minute `t0 + minute`, with `pickup` counts set at the given buckets. */
const statsRow = (
  name: string,
  minute: number,
  completed: number,
  failed: number,
  pickup: Record<number, number> = {}
): StatsMinuteRow => ({
  name,
  minuteUs: t0 + m(minute),
  completed,
  failed,
  pickup: Array.from({ length: pickupBoundsMs.length + 1 }, (_, i) => pickup[i] ?? 0)
})

export const statsOps = (target: Target) => {
  const name = (title: string) => `[${target.id}] ${title}`

  describe("statsAdd / statsRead", () => {
    it.live(name("adds to each (minute, name), creating it; reads the minutes from a time on, newest first, up to a limit"), () =>
      withDriver(target, ({ driver }) =>
        Effect.gen(function*() {
          yield* driver.statsAdd([])
          assert.deepStrictEqual(yield* driver.statsRead(0, 100), [])
          yield* driver.statsAdd([statsRow("b", 0, 2, 1, { 0: 3 }), statsRow("a", 1, 5, 0, { 18: 1 })])
          // A second process adds to the same rows, and to a new one.
          yield* driver.statsAdd([statsRow("b", 0, 1, 0, { 0: 1, 4: 2 }), statsRow("a", 2, 0, 4)])
          assert.deepStrictEqual(yield* driver.statsRead(t0, 100), [
            statsRow("a", 2, 0, 4),
            statsRow("a", 1, 5, 0, { 18: 1 }),
            statsRow("b", 0, 3, 1, { 0: 4, 4: 2 })
          ])
          assert.deepStrictEqual(yield* driver.statsRead(t0 + m(1), 100), [
            statsRow("a", 2, 0, 4),
            statsRow("a", 1, 5, 0, { 18: 1 })
          ])
          // Past the limit, the oldest minutes are left out.
          assert.deepStrictEqual(yield* driver.statsRead(t0, 1), [statsRow("a", 2, 0, 4)])
        })))

    it.live(name("more rows than one statement writes: every row is added, in one transaction"), () =>
      withDriver(target, ({ driver, prefix, sql }) =>
        Effect.gen(function*() {
          const rows = Array.from({ length: 1200 }, (_, i) => statsRow(`n${String(i).padStart(4, "0")}`, 0, 1, 0))
          yield* driver.statsAdd(rows)
          yield* driver.statsAdd(rows)
          const read = yield* driver.statsRead(t0, 10_000)
          assert.strictEqual(read.length, 1200)
          assert.isTrue(read.every((r) => r.completed === 2))
          // A failing last statement (a name longer than MySQL's column takes, or a NUL that
          // PostgreSQL's text refuses) leaves the rows of the earlier ones unchanged.
          const bad = target.dialect === "pg" ? "bad\u0000name" : "x".repeat(300)
          const failed = yield* Effect.either(driver.statsAdd([...rows, statsRow(`zz${bad}`, 0, 1, 0)]))
          assert.strictEqual(failed._tag, "Left")
          const after = yield* sql<{ n: number }>`SELECT SUM(completed) AS n FROM ${sql(prefix + "stats")}`
          assert.strictEqual(Number(after[0].n), 2400)
        })))
  })

  describe("statsPrune", () => {
    it.live(name("deletes the rows of minutes before the cutoff, oldest first, at most `limit` per call"), () =>
      withDriver(target, ({ driver }) =>
        Effect.gen(function*() {
          yield* driver.statsAdd([
            statsRow("a", 0, 1, 0),
            statsRow("b", 0, 1, 0),
            statsRow("a", 1, 1, 0),
            statsRow("a", 2, 1, 0),
            statsRow("a", 3, 1, 0)
          ])
          assert.strictEqual(yield* driver.statsPrune(t0 + m(3), 2), 2)
          assert.deepStrictEqual((yield* driver.statsRead(0, 100)).map((r) => [r.name, r.minuteUs]), [
            ["a", t0 + m(3)],
            ["a", t0 + m(2)],
            ["a", t0 + m(1)]
          ])
          assert.strictEqual(yield* driver.statsPrune(t0 + m(3), 2), 2)
          assert.strictEqual(yield* driver.statsPrune(t0 + m(3), 2), 0)
          assert.deepStrictEqual((yield* driver.statsRead(0, 100)).map((r) => [r.name, r.minuteUs]), [["a", t0 + m(3)]])
        })))
  })
}
