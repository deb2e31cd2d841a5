/**
 * The README's quick start, run: the app part from examples/quickstart.ts, and its TestClock test.
 */
import { SqlClient } from "@effect/sql"
import { assert, it } from "@effect/vitest"
import { Effect, Layer, TestClock } from "effect"
import { Queue } from "sqlane"
import { waitFor } from "sqlane/testing"
import { inject } from "vitest"
import { AppLive, placeOrder, SendEmail, WorkerLive } from "../examples/quickstart.js"
import { dropTables } from "./support/helpers.js"
import { uniquePrefix } from "./support/targets.js"

const pg = inject("targets").find((t) => t.id === "postgres-15")

if (pg) {
  it.effect("[postgres-15] quick start: a delayed job runs when TestClock reaches it", () => {
    const prefix = uniquePrefix("qs")
    return Effect.gen(function*() {
      const sql = (yield* SqlClient.SqlClient).withoutTransforms()
      yield* sql`CREATE TABLE IF NOT EXISTS orders (id serial PRIMARY KEY, email text NOT NULL)`
      const orderJob = yield* placeOrder("ada@example.com")
      const queue = yield* Queue.Queue
      yield* waitFor(orderJob, "completed", { timeout: "5 seconds" })

      // The README's test: a delayed job waits for TestClock.
      const id = yield* queue.enqueue(SendEmail, { orderId: 1, to: "bob@example.com", placedAt: new Date(0) }, {
        delay: "1 hour"
      })
      yield* TestClock.adjust("59 minutes")
      assert.strictEqual((yield* queue.get(id)).state, "pending")
      yield* TestClock.adjust("1 minute")
      yield* waitFor(id, "completed", { timeout: "20 seconds" })
      yield* dropTables(prefix)
    }).pipe(Effect.provide(WorkerLive.pipe(Layer.provideMerge(AppLive(pg.url, { prefix, pollInterval: "1 hour", rescueInterval: "1 hour" })))))
  })
}
