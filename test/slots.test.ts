/**
 * A worker's slots without a database: what the jobs that waited too long to start say of the
 * worker's attempt times (`Slots.releaseOverdue`), and the order in which waiting jobs start.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import type { ClaimedRow } from "../src/internal/driver/Driver.js"
import * as Slots from "../src/internal/worker/slots.js"
import { realSleep } from "./support/helpers.js"

const row = (id: string, name: string, fairKey?: string, priority = 0): ClaimedRow => ({
  id,
  name,
  payload: "{}",
  attempts: 1,
  attemptBase: 0,
  priority,
  runAtUs: 0,
  createdAtUs: 0,
  errors: null,
  traceContext: null,
  keepsKey: false,
  nameSlot: null,
  ...(fairKey === undefined ? {} : { fairKey })
})

/** Slots at concurrency 2 whose jobs wait at most 50 ms (half a lease of 100 ms); "limited" has a limit of 2 whose slots pass. */
const slotsOf = (released: Array<string>, started: Array<ClaimedRow> = [], concurrency = 2) =>
  Slots.make({ concurrency, prefetch: 10, leaseMillis: 100 }, {
    start: (r) => void started.push(r),
    release: (r) => void released.push(r.id),
    passes: (name) => name === "limited",
    limited: (name) => name === "limited",
    limitOf: () => 2,
    stop: () => {}
  })

describe("slots", () => {
  it.live("a job that waited past its bound for a free slot says the attempts are long: the worker claims none ahead", () =>
    Effect.gen(function*() {
      const released: Array<string> = []
      const slots = yield* slotsOf(released)
      const rows = [row("1", "free"), row("2", "free"), row("3", "free")]
      slots.take(rows)
      slots.admit(rows)
      assert.strictEqual(slots.active(), 2)
      assert.strictEqual(slots.waiting(), 1)
      // Wall-clock waits: the slots time waiting jobs on the wall clock (they decide no job's timing).
      yield* realSleep(80)
      slots.releaseOverdue()
      assert.deepStrictEqual(released, ["3"])
      assert.isAtLeast(slots.attemptMs()!, 2 * 50)
    }))

  it.live("a job that waited past its bound for a slot of a limit this worker holds none of waited for other workers: no evidence of long attempts", () =>
    Effect.gen(function*() {
      const released: Array<string> = []
      const slots = yield* slotsOf(released)
      const waiting = row("1", "limited")
      slots.take([waiting])
      slots.admit([waiting])
      assert.strictEqual(slots.active(), 0)
      assert.strictEqual(slots.waiting(), 1)
      yield* realSleep(80)
      slots.releaseOverdue()
      assert.deepStrictEqual(released, ["1"])
      assert.strictEqual(slots.attemptMs(), undefined)
    }))

  it.effect("jobs of a name with fair shares start in turns by key: a key claimed behind another key's waiting jobs does not wait for all of them", () =>
    Effect.gen(function*() {
      const started: Array<ClaimedRow> = []
      const slots = yield* slotsOf([], started, 1)
      const claim = (rows: ReadonlyArray<ClaimedRow>) => {
        slots.take(rows)
        slots.admit(rows)
      }
      claim(["1", "2", "3", "4", "5"].map((id) => row(`b${id}`, "tenanted", "big")))
      claim(["1", "2"].map((id) => row(`s${id}`, "tenanted", "small")))
      // Jobs without fair shares take their turns as one more key.
      claim([row("p1", "plain"), row("p2", "plain")])
      while (started.length < 9) {
        const running = started[started.length - 1]
        assert.strictEqual(slots.passTo(running), undefined)
        slots.handed(running)
      }
      assert.deepStrictEqual(started.map((r) => r.id), ["b1", "b2", "s1", "p1", "b3", "s2", "p2", "b4", "b5"])
    }))

  it.effect("jobs without fair shares start in claim order, and released jobs leave their turns", () =>
    Effect.gen(function*() {
      const started: Array<ClaimedRow> = []
      const released: Array<string> = []
      const slots = yield* slotsOf(released, started, 1)
      const rows = [row("1", "plain"), row("2", "plain"), row("3", "tenanted", "a"), row("4", "plain"), row("5", "tenanted", "a")]
      slots.take(rows)
      slots.admit(rows)
      slots.releaseWaiting((r) => r.id === "3")
      assert.deepStrictEqual(released, ["3"])
      assert.strictEqual(slots.waiting(), 3)
      while (started.length < 4) {
        const running = started[started.length - 1]
        slots.passTo(running)
        slots.handed(running)
      }
      // The plain jobs in claim order; key "a" (its first job released) had its turn after "1".
      assert.deepStrictEqual(started.map((r) => r.id), ["1", "5", "2", "4"])
    }))

  it.effect("waiting jobs start by priority first: turns by key are taken among the jobs of one priority", () =>
    Effect.gen(function*() {
      const started: Array<ClaimedRow> = []
      const slots = yield* slotsOf([], started, 1)
      // One claim, in claim order: priority 0 first.
      const rows = [
        row("u1", "tenanted", "u"),
        row("u2", "tenanted", "u"),
        row("u3", "tenanted", "u"),
        row("x1", "plain"),
        row("x2", "plain"),
        row("n1", "tenanted", "n", 5),
        row("n2", "tenanted", "n", 5),
        row("y1", "plain", undefined, 5)
      ]
      slots.take(rows)
      slots.admit(rows)
      // A later claim's job of priority 0 starts before the waiting jobs of priority 5.
      const late = row("x3", "plain")
      slots.take([late])
      slots.admit([late])
      while (started.length < 9) {
        const running = started[started.length - 1]
        slots.passTo(running)
        slots.handed(running)
      }
      assert.deepStrictEqual(started.map((r) => r.id), ["u1", "x1", "u2", "x2", "u3", "x3", "n1", "y1", "n2"])
    }))

  it.live("handlers that end at once start at most 250 waiting jobs per turn of the event loop: the rest in the next turns", () =>
    Effect.gen(function*() {
      const started: Array<ClaimedRow> = []
      let slots: Slots.Slots | undefined
      // Each attempt ends within its start, as an empty handler does.
      slots = yield* Slots.make({ concurrency: 2, prefetch: 1000, leaseMillis: 60_000 }, {
        start: (r) => {
          started.push(r)
          slots!.handed(r)
        },
        release: () => {},
        passes: () => false,
        limited: () => false,
        limitOf: () => 1,
        stop: () => {}
      })
      const rows = Array.from({ length: 600 }, (_, i) => row(String(i), "instant"))
      slots.take(rows)
      slots.admit(rows)
      const nextTurn = Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))
      assert.strictEqual(started.length, 250)
      assert.strictEqual(slots.waiting(), 350)
      yield* nextTurn
      assert.strictEqual(started.length, 500)
      yield* nextTurn
      assert.strictEqual(started.length, 600)
      assert.strictEqual(slots.waiting(), 0)
      // In claim order.
      assert.deepStrictEqual(started.map((r) => r.id), rows.map((r) => r.id))
    }))
})
