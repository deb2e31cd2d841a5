/**
 * The rate windows outside the claims: `rateNameList` (what `sqlane status` reads) and
 * `ratePrune` (the Pruner's delete of old window rows, one range of keys per batch). The rows are
 * written by the driver's own claims (`jobClaimRated`) and holds (`rateHold`).
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import type { Driver, NameLimits } from "../../src/internal/driver/Driver.js"
import type { Target } from "../support/targets.js"
import { groups, insert, row, s, sortBy, t0, withDriver } from "./fixtures.js"

/** 5 starts per 10 s for the name, 1 per 10 s per key. */
const perKey: NameLimits = {
  running: undefined,
  runningPerKey: undefined,
  rate: { starts: 5, perMs: 10_000 },
  ratePerKey: { starts: 1, perMs: 10_000 }
}

/** Claims (and counts) one job of each of `keys` of `name` at `nowUs`: a window row per key, and the name's. */
const claimKeys = (driver: Driver, name: string, keys: ReadonlyArray<string>, nowUs: number) =>
  Effect.gen(function*() {
    yield* insert(driver, ...keys.map((k) => row(name, { limitKey: k, runAtUs: t0 })))
    const claim = yield* driver.jobClaimRated(groups(name), 100, nowUs, "w1", new Map([[name, perKey]]))
    return claim.claimed.length
  })

/** The window rows of `prefix`, as [name, key, window_us] sorted. */
const rowsOf = (sql: any, prefix: string) =>
  Effect.map(
    sql`SELECT name, rate_key, window_us FROM ${sql(prefix + "rates")}` as Effect.Effect<
      ReadonlyArray<{ name: string; rate_key: string; window_us: string | number }>
    >,
    (rows) => sortBy(rows.map((r) => [r.name, r.rate_key, Number(r.window_us)] as const), (r) => `${r[0]}/${r[1]}`)
  )

export const ratesOps = (target: Target) => {
  const name = (title: string) => `[${target.id}] ${title}`

  describe("rateNameList", () => {
    it.live(name("the names' own rows: window, starts counted, hold; names without a row left out"), () =>
      withDriver(target, ({ driver }) =>
        Effect.gen(function*() {
          assert.deepStrictEqual(yield* driver.rateNameList([]), [])
          assert.strictEqual(yield* claimKeys(driver, "a", ["k1", "k2", "k3"], t0 + s(3)), 3)
          yield* driver.rateHold("b", null, t0 + s(60))
          // A key's hold is not the name's.
          yield* driver.rateHold("c", "k1", t0 + s(60))
          const rows = yield* driver.rateNameList(["a", "b", "c", "none"])
          assert.deepStrictEqual(sortBy(rows, (r) => r.name), [
            { name: "a", windowUs: t0, starts: 3, blockedUntilUs: null },
            { name: "b", windowUs: 0, starts: 0, blockedUntilUs: t0 + s(60) }
          ])
        })))
  })

  describe("rateHoldsLift", () => {
    it.live(name("lifts the holds of a name and of its keys still in force, and counts those only"), () =>
      withDriver(target, ({ driver }) =>
        Effect.gen(function*() {
          yield* driver.rateHold("a", null, t0 + s(60))
          yield* driver.rateHold("a", "k1", t0 + s(30))
          yield* driver.rateHold("a", "k2", t0 - s(1))
          yield* driver.rateHold("b", null, t0 + s(60))
          // k2's hold has passed: it holds nothing, and lifting it is no news.
          assert.strictEqual(yield* driver.rateHoldsLift("a", t0), 2)
          assert.strictEqual(yield* driver.rateHoldsLift("a", t0), 0)
          assert.strictEqual(yield* driver.rateHoldsLift("nobody", t0), 0)
          // Another name's hold is left.
          assert.strictEqual(yield* driver.rateHoldsLift("b", t0 + s(59)), 1)
        })))
  })

  describe("ratePrune", () => {
    it.live(name("deletes the rows of a name whose window began before the cutoff and whose hold ended, a batch at a time in key order"), () =>
      withDriver(target, ({ driver, prefix, sql }) =>
        Effect.gen(function*() {
          // Keys k1..k5 counted in the window at t0; k6, k7 in the window at t0 + 100 s.
          assert.strictEqual(yield* claimKeys(driver, "a", ["k1", "k2", "k3", "k4", "k5"], t0), 5)
          assert.strictEqual(yield* claimKeys(driver, "a", ["k6", "k7"], t0 + s(100)), 2)
          // k2 held until t0 + 200 s; another name's old row.
          yield* driver.rateHold("a", "k2", t0 + s(200))
          assert.strictEqual(yield* claimKeys(driver, "b", ["k1"], t0), 1)
          const cutoff = t0 + s(50)
          // Batches of 3 keys: the name's own row ('') first. Its window is t0 + 100 s: kept.
          const first = yield* driver.ratePrune("a", cutoff, undefined, 3)
          assert.deepStrictEqual(first, { scanned: 3, deleted: 1, lastKey: "k2" })
          const second = yield* driver.ratePrune("a", cutoff, first.lastKey, 3)
          assert.deepStrictEqual(second, { scanned: 3, deleted: 3, lastKey: "k5" })
          const third = yield* driver.ratePrune("a", cutoff, second.lastKey, 3)
          assert.deepStrictEqual(third, { scanned: 2, deleted: 0, lastKey: "k7" })
          assert.deepStrictEqual(yield* driver.ratePrune("a", cutoff, third.lastKey, 3), {
            scanned: 0,
            deleted: 0,
            lastKey: undefined
          })
          assert.deepStrictEqual(yield* rowsOf(sql, prefix), [
            ["a", "", t0 + s(100)],
            ["a", "k2", t0],
            ["a", "k6", t0 + s(100)],
            ["a", "k7", t0 + s(100)],
            ["b", "", t0],
            ["b", "k1", t0]
          ])
          // Past the hold's end and the windows at t0 + 100 s, every row of a goes.
          assert.strictEqual((yield* driver.ratePrune("a", t0 + s(201), undefined, 100)).deleted, 4)
          assert.deepStrictEqual(yield* rowsOf(sql, prefix), [["b", "", t0], ["b", "k1", t0]])
        })))

    it.live(name("a claim after the delete starts a fresh window row: counting goes on"), () =>
      withDriver(target, ({ driver }) =>
        Effect.gen(function*() {
          assert.strictEqual(yield* claimKeys(driver, "a", ["k1"], t0), 1)
          assert.strictEqual((yield* driver.ratePrune("a", t0 + s(20), undefined, 100)).deleted, 2)
          assert.strictEqual(yield* claimKeys(driver, "a", ["k1", "k1"], t0 + s(30)), 1)
          assert.deepStrictEqual(yield* driver.rateNameList(["a"]), [
            { name: "a", windowUs: t0 + s(30), starts: 1, blockedUntilUs: null }
          ])
        })))
  })
}
