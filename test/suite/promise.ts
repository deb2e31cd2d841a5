/**
 * sqlane/promise on every database, in real time (no TestClock): a queue from a URL, jobs enqueued
 * and run by an async handler, enqueues inside a transaction the test began on its own node-postgres
 * or mysql2 connection (committed: the job runs; rolled back: there is no job), a throwing handler's
 * retries and dead letter, the typed errors the Promises reject with, and a program that ends by
 * itself after `close()`.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as path from "node:path"
import Pg from "pg"
import {
  createQueue,
  InvalidPayload,
  Job,
  JobNotFound,
  type PromiseQueue,
  QueueClosed,
  SetupError,
  SqlError
} from "../../src/promise.js"
import { Queue } from "../../src/index.js"
import { dropTables, waitUntil } from "../support/helpers.js"
import { runScript } from "../support/processes.js"
import { clientLayer, type Target, uniquePrefix } from "../support/targets.js"

const Double = Job.make("promise-double", { payload: Schema.Struct({ n: Schema.Number }), success: Schema.Number })
class Refused extends Schema.TaggedError<Refused>()("Refused", { why: Schema.String }) {}
/** Fails every attempt: three attempts 10 ms apart, then dead. */
const Doomed = Job.make("promise-doomed", {
  payload: Schema.Struct({ n: Schema.Number }),
  failure: Refused,
  retry: Job.attempts(3, Schedule.spaced("10 millis"))
})

/** Drops the tables of `prefix` through a client of its own. */
const drop = (target: Target, prefix: string) =>
  Effect.runPromise(dropTables(prefix).pipe(Effect.provide(clientLayer(target, { maxConnections: 2 })), Effect.ignore))

/** Waits until job `id` is in `state` (polling in real time). */
const stateOf = (queue: PromiseQueue, id: string, state: string) =>
  Effect.runPromise(
    waitUntil(Effect.promise(() => queue.get(id).then((j) => j.state === state)), 20_000, `job ${id} ${state}`)
  )

/** A connection of the test's own driver in an open transaction, and its end. */
interface OwnTransaction {
  readonly connection: { readonly query: (...args: Array<any>) => unknown }
  readonly end: (how: "COMMIT" | "ROLLBACK") => Promise<void>
}

export const promise = (target: Target) => {
  const name = (title: string) => `[${target.id}] promise: ${title}`

  /** Runs `body` with a queue on a prefix of its own; closes it and drops its tables afterwards. */
  const withPromiseQueue = async (body: (queue: PromiseQueue) => Promise<void>) => {
    const prefix = uniquePrefix("pr")
    const queue = await createQueue({ url: target.url, prefix, maxConnections: 4 })
    try {
      await body(queue)
    } finally {
      await queue.close()
      await drop(target, prefix)
    }
  }

  /**
   * Begins a transaction on a connection of the test's own driver: node-postgres `Client`; mysql2's
   * promise API (a plain connection), or with `multipleStatements` its callback API.
   */
  const begin = async (multipleStatements = false): Promise<OwnTransaction> => {
    if (target.dialect === "pg") {
      const client = new Pg.Client({ connectionString: target.url })
      await client.connect()
      await client.query("BEGIN")
      return { connection: client, end: (how) => client.query(how).then(() => client.end()) }
    }
    if (!multipleStatements) {
      const mysql = await import("mysql2/promise")
      const conn = await mysql.createConnection({ uri: target.url })
      await conn.beginTransaction()
      return { connection: conn, end: (how) => (how === "COMMIT" ? conn.commit() : conn.rollback()).then(() => conn.end()) }
    }
    const mysql = await import("mysql2")
    const conn = mysql.createConnection({ uri: target.url, multipleStatements: true })
    const query = (text: string) => new Promise<void>((resolve, reject) => conn.query(text, (e) => (e ? reject(e) : resolve())))
    await query("START TRANSACTION")
    return { connection: conn, end: (how) => query(how).then(() => new Promise<void>((r) => conn.end(() => r()))) }
  }

  describe(`promise [${target.id}]`, () => {
    it(name("a queue from the URL runs jobs with an async handler and stores their results"), () =>
      withPromiseQueue(async (queue) => {
        const seen: Array<{ n: number; attempt: number }> = []
        const worker = await queue.work(Double, async ({ n }, ctx) => {
          seen.push({ n, attempt: ctx.attempt })
          await ctx.progress(50, "halfway")
          return n * 2
        }, { concurrency: 3 })
        const one = await queue.enqueue(Double, { n: 21 })
        const many = await queue.enqueueMany(Double, [{ n: 1 }, { n: 2 }])
        for (const id of [one, ...many]) await stateOf(queue, id, "completed")
        await worker.drain()
        assert.strictEqual(await worker.running(), 0)
        assert.deepStrictEqual((await queue.get(one)).result, 42)
        assert.deepStrictEqual((await queue.get(many[1])).result, 4)
        assert.deepStrictEqual(seen.map((s) => s.n).sort(), [1, 2, 21])
        assert.isTrue(seen.every((s) => s.attempt === 1))
      }))

    it(name("a job enqueued in the app's own transaction runs after COMMIT and does not exist after ROLLBACK"), () =>
      withPromiseQueue(async (queue) => {
        const rolledBack = await begin(true) // mysql2's callback API on MySQL/MariaDB
        const gone = await queue.enqueue(Double, { n: 1 }, { transaction: rolledBack.connection })
        await rolledBack.end("ROLLBACK")
        const missing = await queue.get(gone).then(() => undefined, (e: unknown) => e)
        assert.instanceOf(missing, JobNotFound)

        const committed = await begin()
        const kept = await queue.enqueue(Double, { n: 2 }, { transaction: committed.connection })
        // Not visible outside the transaction before its COMMIT.
        assert.instanceOf(await queue.get(kept).then(() => undefined, (e: unknown) => e), JobNotFound)
        await committed.end("COMMIT")
        const batch = await begin()
        const keptMany = await queue.enqueueMany(Double, [{ n: 3 }, { n: 4 }], { transaction: batch.connection })
        await batch.end("COMMIT")

        const worker = await queue.work(Double, async ({ n }) => n * 10)
        for (const id of [kept, ...keptMany]) await stateOf(queue, id, "completed")
        await worker.drain()
        assert.deepStrictEqual(
          await Promise.all([kept, ...keptMany].map((id) => queue.get(id).then((j) => j.result))),
          [20, 30, 40]
        )
        await assertMissing(queue, gone)
      }))

    it(name("a throwing handler's attempts are retried by the job's schedule, then dead-lettered"), () =>
      withPromiseQueue(async (queue) => {
        let calls = 0
        await queue.work(Doomed, async ({ n }) => {
          calls++
          if (n === 1) throw new Refused({ why: "typed" })
          throw new Error("plain")
        })
        const typed = await queue.enqueue(Doomed, { n: 1 })
        const plain = await queue.enqueue(Doomed, { n: 2 })
        await stateOf(queue, typed, "dead")
        await stateOf(queue, plain, "dead")
        const [t, p] = [await queue.get(typed), await queue.get(plain)]
        assert.strictEqual(t.attempts, 3)
        assert.strictEqual(p.attempts, 3)
        assert.strictEqual(calls, 6)
        // A value of the job's failure schema is a typed failure; any other throw a defect with its stack.
        assert.deepStrictEqual(t.errors.map((e) => [e.kind, e.tag]), [["failure", "Refused"], ["failure", "Refused"], [
          "failure",
          "Refused"
        ]])
        assert.deepStrictEqual(p.errors.map((e) => e.kind), ["defect", "defect", "defect"])
        assert.match(p.errors[0].stack ?? "", /Error: plain/)
      }))

    it(name("a cancelled job's handler sees its AbortSignal aborted"), () =>
      withPromiseQueue(async (queue) => {
        let started = false
        let aborted = false
        await queue.work(Double, ({ n }, ctx) =>
          new Promise<number>((resolve) => {
            started = true
            ctx.signal.addEventListener("abort", () => {
              aborted = true
              resolve(n)
            })
          }))
        const id = await queue.enqueue(Double, { n: 1 })
        await Effect.runPromise(waitUntil(Effect.sync(() => started), 20_000, "the handler to start"))
        assert.isTrue(await queue.cancel(id))
        await Effect.runPromise(waitUntil(Effect.sync(() => aborted), 20_000, "the signal to abort"))
        assert.strictEqual((await queue.get(id)).state, "cancelled")
      }))

    it(name("Effect code joins the app's own transaction with Queue.joinTransaction"), () =>
      withPromiseQueue(async (queue) => {
        const enqueueIn = (own: OwnTransaction, n: number) =>
          queue.runtime.runPromise(
            Effect.flatMap(Queue.Queue, (q) => q.enqueue(Double, { n })).pipe(Queue.joinTransaction(own.connection))
          )
        const rolledBack = await begin()
        const gone = await enqueueIn(rolledBack, 1)
        await rolledBack.end("ROLLBACK")
        const committed = await begin()
        const kept = await enqueueIn(committed, 2)
        await committed.end("COMMIT")
        assert.strictEqual((await queue.get(kept)).state, "pending")
        await assertMissing(queue, gone)
      }))

    it(name("Promises reject with the typed errors themselves"), async () => {
      const badUrl = await createQueue({ url: "redis://localhost" }).then(() => undefined, (e: unknown) => e)
      assert.instanceOf(badUrl, SetupError)
      assert.match((badUrl as SetupError).message, /unsupported database URL scheme "redis:"/)
      const closedPort = new URL(target.url)
      closedPort.port = "1"
      closedPort.password = "hunter2"
      const unreachable = await createQueue({ url: closedPort }).then(() => undefined, (e: unknown) => e)
      assert.instanceOf(unreachable, SetupError)
      assert.match((unreachable as SetupError).message, /^createQueue: cannot connect to .*:\*\*\*@127\.0\.0\.1:1\/.*ECONNREFUSED/)
      await withPromiseQueue(async (queue) => {
        const invalid = await queue.enqueue(Double, { n: "one" } as any).then(() => undefined, (e: unknown) => e)
        assert.instanceOf(invalid, InvalidPayload)
        assert.instanceOf(invalid, Error)
        assert.strictEqual((invalid as InvalidPayload).reason, "schema")
        assert.instanceOf(await queue.get("999999").then(() => undefined, (e: unknown) => e), JobNotFound)
        // A pool is not a transaction: its statements could run on any of its connections.
        const pool = new Pg.Pool({ connectionString: target.url })
        const notAConnection = await queue.enqueue(Double, { n: 1 }, { transaction: pool }).then(
          () => undefined,
          (e: unknown) => e
        )
        await pool.end()
        assert.instanceOf(notAConnection, Error)
        assert.match((notAConnection as Error).message, /not a pool|mysql2 connection/)
        // A statement the database refuses: SqlError, with the driver's error as its cause.
        const own = await begin()
        await own.end("COMMIT")
        const ended = await queue.enqueue(Double, { n: 1 }, { transaction: own.connection }).then(
          () => undefined,
          (e: unknown) => e
        )
        assert.instanceOf(ended, SqlError)
      })
    })

    it(name("a queue closed, nothing is left open: the program ends by itself"), async () => {
      const prefix = uniquePrefix("prc")
      try {
        const result = await Effect.runPromise(
          runScript(path.join(import.meta.dirname, "..", "support", "promise-process.ts"), {
            DATABASE_URL: target.url,
            PREFIX: prefix
          }).pipe(Effect.timeoutFail({ duration: "60 seconds", onTimeout: () => new Error("the program did not end") }))
        )
        assert.strictEqual(result.exit, 0, result.stderr)
        assert.deepStrictEqual(result.stdout.trim().split("\n"), [
          JSON.stringify([1, 2, 3].map((n) => ({ state: "completed", result: n * 2 }))),
          "closed"
        ])
      } finally {
        await drop(target, prefix)
      }
    })

    it(name("drain ends with its worker; close waits for calls in flight, later calls reject with QueueClosed"), async () => {
      const prefix = uniquePrefix("prq")
      const queue = await createQueue({ url: target.url, prefix, maxConnections: 3 })
      // A stopped worker's drain does not wait for the due jobs it will never run.
      const stopped = await queue.work(Doomed, async () => undefined)
      await stopped.stop()
      await queue.enqueue(Doomed, { n: 1 })
      await stopped.drain()
      await queue.work(Double, async ({ n }) => n)
      // An enqueue made before close() is waited for: it is written, not cut off by the pool's end.
      const inFlight = queue.enqueue(Double, { n: 1 })
      const closing = queue.close()
      assert.strictEqual(queue.close(), closing)
      assert.match(await inFlight, /^\d+$/)
      await closing
      const refused = await queue.enqueue(Double, { n: 1 }).then(() => undefined, (e: unknown) => e)
      assert.instanceOf(refused, QueueClosed)
      assert.strictEqual((refused as QueueClosed).method, "enqueue")
      await drop(target, prefix)
    })
  })
}

/** Job `id` does not exist. */
const assertMissing = async (queue: PromiseQueue, id: string) =>
  assert.instanceOf(await queue.get(id).then(() => undefined, (e: unknown) => e), JobNotFound)
