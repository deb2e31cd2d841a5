/**
 * A pause is a barrier, on every database: once the pause has committed, no claim that starts
 * afterwards takes a job of the name, and no job enqueued afterwards is claimed until the resume —
 * whatever the workers' own view of the paused names says. The pauses here are written by another
 * client (another pool, another QueueLive), as `sqlane pause` in another process writes them, and
 * without telling this process's workers: their view stays stale (`rescueInterval` of an hour), so
 * only the claim statements can keep the jobs pending.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { Job, Queue, QueueLive, Worker } from "../../src/index.js"
import { Database } from "../../src/internal/Database.js"
import type { Finish } from "../../src/internal/driver/Driver.js"
import { nowMicros } from "../../src/internal/time.js"
import { realSleep, waitUntil, withQueue } from "../support/helpers.js"
import { clientLayer, type Target } from "../support/targets.js"

const Held = Job.make("held", { payload: Schema.Struct({ i: Schema.Number }) })
const HeldKeyed = Job.make("held-keyed", { payload: Schema.Struct({ k: Schema.String }), mutexKey: (p) => p.k })
const Free = Job.make("free", { payload: Schema.Struct({ i: Schema.Number }) })

/**
 * Another client and QueueLive on `prefix` (a pool of its own): its statements pause and resume
 * without this process's workers hearing of it, and its queue enqueues (hints reach the workers, so
 * they try to claim at once).
 */
const elsewhere = (target: Target, prefix: string) =>
  Effect.map(
    Layer.build(QueueLive({ prefix, migrate: false }).pipe(Layer.provideMerge(clientLayer(target, { maxConnections: 2 })))),
    (context) => {
      const { driver } = Context.get(context, Database)
      return {
        pause: (name: string) => Effect.flatMap(nowMicros, (us) => driver.pausedInsert(name, us)),
        resume: (name: string) => driver.pausedDelete(name),
        queue: Context.get(context, Queue.Queue)
      }
    }
  )

/** The end of a claimed attempt, completed now. */
const completed = (row: { readonly id: string; readonly attempts: number }, nowUs: number): Finish => ({
  id: row.id,
  attempt: row.attempts,
  state: "completed",
  runAtUs: null,
  finishedAtUs: nowUs,
  lastError: null,
  errors: null,
  result: null
})

export const pause = (target: Target) => {
  const name = (title: string) => `[${target.id}] ${title}`

  /** Jobs of `jobName` claimed at or after `sinceUs` (the time the claim was started with). */
  const claimedSince = (prefix: string, jobName: string, sinceUs: number) =>
    Effect.gen(function*() {
      const sql = (yield* SqlClient.SqlClient).withoutTransforms()
      const jobs = sql(`${prefix}jobs`)
      const rows = yield* sql.onDialectOrElse({
        pg: () =>
          sql<{ n: number }>`SELECT COUNT(*) AS n FROM ${jobs} WHERE name = ${jobName}
            AND claimed_at >= TIMESTAMPTZ 'epoch' + ${sinceUs}::bigint * INTERVAL '1 microsecond'`,
        orElse: () =>
          sql<{ n: number }>`SELECT COUNT(*) AS n FROM ${jobs} WHERE name = ${jobName}
            AND claimed_at >= TIMESTAMPADD(MICROSECOND, ${sinceUs}, '1970-01-01 00:00:00')`
      })
      return Number(rows[0].n)
    })
  /** The states of jobs `ids`. */
  const statesOf = (prefix: string, ids: ReadonlyArray<string>) =>
    Effect.gen(function*() {
      const sql = (yield* SqlClient.SqlClient).withoutTransforms()
      const rows = yield* sql<{ state: string }>`SELECT state FROM ${sql(`${prefix}jobs`)} WHERE id IN ${sql.in(ids)}`
      return rows.map((r) => r.state)
    })

  /**
   * `rounds` times: pause `jobName` from the other client, enqueue a job of it from there at once,
   * and check for `windowMs` that no claim started after the pause took a job of the name and that
   * the new job is pending; then resume and run `afterResume`.
   */
  const rounds = (
    prefix: string,
    jobName: string,
    enqueue: (round: number) => Effect.Effect<string, unknown>,
    other: Effect.Effect.Success<ReturnType<typeof elsewhere>>,
    afterResume: (id: string, resumedAtUs: number) => Effect.Effect<void, unknown, SqlClient.SqlClient>
  ) =>
    Effect.gen(function*() {
      const windowMs = 60
      for (let round = 0; round < 50; round++) {
        assert.isTrue(yield* other.pause(jobName))
        const pausedAtUs = yield* nowMicros
        const id = yield* enqueue(round)
        yield* realSleep(windowMs)
        // Read while still paused: nothing of the name was claimed by a claim begun after the pause
        // returned (claimed_at is the time the worker started the claim with), and the job
        // enqueued after it is pending.
        assert.strictEqual(yield* claimedSince(prefix, jobName, pausedAtUs), 0, `round ${round}: claimed while paused`)
        assert.deepStrictEqual(yield* statesOf(prefix, [id]), ["pending"], `round ${round}: the job enqueued after the pause`)
        assert.isTrue(yield* other.resume(jobName))
        yield* afterResume(id, yield* nowMicros)
      }
    })

  describe(`pause [${target.id}]`, () => {
    it.live(name("the claims leave out a name paused by another connection, whatever the caller's view says"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const { driver } = yield* Database
          const queue = yield* Queue.Queue
          const other = yield* elsewhere(target, prefix)
          const held = yield* queue.enqueueMany(Held, [{ i: 1 }, { i: 2 }])
          const keyed = yield* queue.enqueueMany(HeldKeyed, [{ k: "a" }, { k: "b" }])
          const free = yield* queue.enqueueMany(Free, [{ i: 1 }, { i: 2 }, { i: 3 }])
          const nowUs = (yield* nowMicros) + 1_000_000
          const group = (n: string) => ({ name: n, priority: 0 })
          assert.isTrue(yield* other.pause(Held.name))
          assert.isTrue(yield* other.pause(HeldKeyed.name))

          // The claim of one group (PostgreSQL: its arm alone) and of several (UNION ALL of arms).
          assert.deepStrictEqual(yield* driver.jobClaim([group(Held.name)], 10, nowUs, "w"), [])
          const first = yield* driver.jobClaim([group(Held.name), group(Free.name)], 1, nowUs, "w")
          assert.deepStrictEqual(first.map((r) => r.id), [free[0]])
          // The keyed claim.
          assert.deepStrictEqual(yield* driver.jobClaimKeyed([group(HeldKeyed.name)], 10, nowUs, "w"), [])
          const second = yield* driver.jobClaimKeyed(
            [group(HeldKeyed.name), group(Held.name), group(Free.name)],
            1,
            nowUs,
            "w"
          )
          assert.deepStrictEqual(second.map((r) => r.id), [free[1]])
          // The claim riding on the write of ends: the end is written, nothing paused is claimed.
          assert.isDefined(driver.jobFinishManyAndClaim)
          const ride = yield* driver.jobFinishManyAndClaim!(
            [completed(first[0], nowUs)],
            [group(Held.name), group(HeldKeyed.name), group(Free.name)],
            5,
            nowUs,
            "w"
          )
          assert.deepStrictEqual(ride.claimed.map((r) => r.id), [free[2]])
          assert.strictEqual(ride.stale.size, 0)
          assert.strictEqual((yield* driver.jobGet(first[0].id))?.state, "completed")
          const idle = yield* driver.jobFinishManyAndClaim!(
            [completed(second[0], nowUs)],
            [group(Held.name), group(HeldKeyed.name)],
            5,
            nowUs,
            "w"
          )
          assert.deepStrictEqual([idle.claimed, idle.stale.size], [[], 0])
          assert.strictEqual((yield* driver.jobGet(second[0].id))?.state, "completed")
          assert.deepStrictEqual(yield* statesOf(prefix, [...held, ...keyed]), ["pending", "pending", "pending", "pending"])

          // Names compare as the database compares them: on MySQL/MariaDB (PAD SPACE) a pause of
          // "held " holds "held"; on PostgreSQL it is another name.
          assert.isTrue(yield* other.resume(Held.name))
          assert.isTrue(yield* other.pause(`${Held.name} `))
          const padded = yield* driver.jobClaim([group(Held.name)], 1, nowUs, "w")
          assert.deepStrictEqual(padded.map((r) => r.id), target.dialect === "mysql" ? [] : [held[0]])
          assert.isTrue(yield* other.resume(`${Held.name} `))

          // Resumed: the claims take them again.
          assert.isTrue(yield* other.resume(HeldKeyed.name))
          const after = yield* driver.jobClaim([group(Held.name)], 10, nowUs, "w")
          assert.deepStrictEqual(after.map((r) => r.id), target.dialect === "mysql" ? held : [held[1]])
          const afterKeyed = yield* driver.jobClaimKeyed([group(HeldKeyed.name)], 10, nowUs, "w")
          assert.deepStrictEqual(afterKeyed.map((r) => r.id), keyed)
        })))

    it.live(name("an idle worker: a pause from another connection, then an enqueue at once, 50 times; no job starts until the resume"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const other = yield* elsewhere(target, prefix)
          let runs = 0
          yield* Worker.make({ handlers: [Job.handler(Held, () => Effect.sync(() => void runs++))] })
          yield* rounds(prefix, Held.name, (i) => other.queue.enqueue(Held, { i }), other, (id) =>
            waitUntil(
              Effect.map(statesOf(prefix, [id]), (s) => s[0] === "completed"),
              10_000,
              `job ${id} to run after the resume`
            ))
          assert.strictEqual(runs, 50)
        }), { pollInterval: "50 millis", rescueInterval: "1 hour" }), 120_000)

    it.live(name("a keyed name: a pause from another connection, then an enqueue at once, 50 times; no job starts until the resume"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const other = yield* elsewhere(target, prefix)
          let runs = 0
          yield* Worker.make({ handlers: [Job.handler(HeldKeyed, () => Effect.sync(() => void runs++))] })
          yield* rounds(prefix, HeldKeyed.name, (i) => other.queue.enqueue(HeldKeyed, { k: `k${i % 3}` }), other, (id) =>
            waitUntil(
              Effect.map(statesOf(prefix, [id]), (s) => s[0] === "completed"),
              10_000,
              `job ${id} to run after the resume`
            ))
          assert.strictEqual(runs, 50)
        }), { pollInterval: "50 millis", rescueInterval: "1 hour" }), 120_000)

    it.live(name("a worker with a backlog (claims riding on its end writes): a pause from another connection, 50 times; nothing is claimed until the resume"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const queue = yield* Queue.Queue
          const other = yield* elsewhere(target, prefix)
          const backlog = 1500
          yield* queue.enqueueMany(Held, Array.from({ length: backlog }, (_, i) => ({ i })))
          let runs = 0
          yield* Worker.make({
            concurrency: 4,
            handlers: [Job.handler(Held, () => Effect.sync(() => void runs++).pipe(Effect.zipRight(Effect.sleep("10 millis"))))]
          })
          // Running the backlog: its first claim fills every slot, and the ends' writes claim from then on.
          yield* waitUntil(Effect.sync(() => runs >= 8), 10_000, "the backlog to run")
          yield* rounds(
            prefix,
            Held.name,
            (i) => other.queue.enqueue(Held, { i: backlog + i }),
            other,
            // Claiming again, and riding: more jobs claimed since the resume than the worker's slots.
            (_, resumedAtUs) =>
              waitUntil(
                Effect.map(claimedSince(prefix, Held.name, resumedAtUs), (n) => n > 4),
                10_000,
                "the worker to claim again"
              )
          )
          yield* waitUntil(Effect.sync(() => runs === backlog + 50), 60_000, "every job")
        }), { pollInterval: "50 millis", rescueInterval: "1 hour" }), 180_000)
  })
}
