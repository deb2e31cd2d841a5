/**
 * A worker's slots without a database: what the jobs that waited too long to start say of the
 * worker's attempt times (`Slots.releaseOverdue`).
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import type { ClaimedRow } from "../src/internal/driver/Driver.js"
import * as Slots from "../src/internal/worker/slots.js"
import { realSleep } from "./support/helpers.js"

const row = (id: string, name: string): ClaimedRow => ({
  id,
  name,
  payload: "{}",
  attempts: 1,
  attemptBase: 0,
  priority: 0,
  runAtUs: 0,
  createdAtUs: 0,
  errors: null,
  traceContext: null,
  keepsKey: false,
  nameSlot: null
})

/** Slots at concurrency 2 whose jobs wait at most 50 ms (half a lease of 100 ms); "limited" has a limit of 2 whose slots pass. */
const slotsOf = (released: Array<string>) =>
  Slots.make({ concurrency: 2, prefetch: 10, leaseMillis: 100 }, {
    start: () => {},
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
})
