/**
 * The in-process hub of wake-ups (`internal/notifier/hub.ts`): what one wake-up of a subscriber says
 * — groups due now, a probe, or a release of keys and limit slots — from the signals delivered to it.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Hub from "../src/internal/notifier/hub.js"
import * as Notifier from "../src/services/Notifier.js"

let hubs = 0
const subscribed = (names: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const hub = Hub.make(`hub-test-${process.pid}-${hubs++}`)
    const wakeups = yield* hub.subscribe(names, Effect.void, Effect.void)
    return { hub, wakeups }
  })

describe("notifier hub", () => {
  it.scoped("an end's release wakes with `released`, not a probe; an enqueue's name or group as before", () =>
    Effect.gen(function*() {
      const { hub, wakeups } = yield* subscribed(["a", Notifier.keyReleased])
      hub.hint(["a", Notifier.keyReleased])
      assert.deepStrictEqual(yield* wakeups.take, { groups: [], probe: false, released: true })
      // Another worker's keyed name released: the shared pseudo name wakes this subscriber too.
      hub.hint(["other", Notifier.keyReleased])
      assert.deepStrictEqual(yield* wakeups.take, { groups: [], probe: false, released: true })
      hub.hint(["a"])
      assert.deepStrictEqual(yield* wakeups.take, { groups: [], probe: true, released: false })
      hub.hint([["a", 3]])
      assert.deepStrictEqual(yield* wakeups.take, { groups: [{ name: "a", priority: 3 }], probe: false, released: false })
      // Coalesced until taken: a release and a group in one wake-up.
      hub.hint(["a", Notifier.keyReleased])
      hub.hint([["a", 0]])
      assert.deepStrictEqual(yield* wakeups.take, { groups: [{ name: "a", priority: 0 }], probe: false, released: true })
      // Names the subscriber does not handle wake nothing.
      hub.hint(["b"])
      assert.isUndefined(yield* wakeups.poll)
    }))
})
