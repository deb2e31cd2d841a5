import * as SqlClient from "@effect/sql/SqlClient"
import * as Deferred from "effect/Deferred"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import { QueueLive } from "../../src/index.js"
import { Database } from "../../src/internal/Database.js"
import { Facts } from "../../src/internal/facts.js"
import * as Claimer from "../../src/services/Claimer.js"
import * as Completer from "../../src/services/Completer.js"
import type { QueueOptions } from "../../src/services/QueueConfig.js"
import { clientLayer, type Target, uniquePrefix } from "./targets.js"

/** Waits in real time, whatever Clock the test runs under (DB work takes real time). */
export const realSleep = (ms: number) => Effect.promise(() => new Promise<void>((r) => setTimeout(r, ms)))

/** Polls `check` in real time until it returns true; fails after `timeoutMs`. */
export const waitUntil = <E, R>(
  check: Effect.Effect<boolean, E, R>,
  timeoutMs = 20_000,
  what = "condition"
): Effect.Effect<void, E | Error, R> =>
  Effect.gen(function*() {
    const start = Date.now()
    while (!(yield* check)) {
      if (Date.now() - start > timeoutMs) return yield* Effect.fail(new Error(`timed out waiting for ${what}`))
      yield* realSleep(20)
    }
  })

/** The SQL client and a QueueLive on its own table prefix. */
export const testLayer = (target: Target, options: QueueOptions & { maxConnections?: number } = {}) => {
  const prefix = options.prefix ?? uniquePrefix()
  const client = clientLayer(target, { maxConnections: options.maxConnections })
  return {
    prefix,
    client,
    layer: QueueLive({ ...options, prefix }).pipe(Layer.provideMerge(client))
  }
}

/**
 * Runs `body` with a fresh QueueLive on its own table prefix (given to `body`), in a scope of its
 * own, and drops the prefix's tables afterwards, whatever the outcome.
 *
 * Tests under `TestClock` use a poll interval of 1 hour: the worker still wakes exactly at the
 * next known `run_at` and on hints, and `TestClock.adjust` does not have to replay a poll (each a
 * real database round trip) every 5 simulated seconds.
 */
export const withQueue = <A, E>(
  target: Target,
  body: (prefix: string) => Effect.Effect<A, E, any>,
  options: Parameters<typeof testLayer>[1] = {}
) => {
  const t = testLayer(target, options)
  return body(t.prefix).pipe(
    Effect.scoped,
    Effect.provide(t.layer),
    Effect.ensuring(dropTables(t.prefix).pipe(Effect.provide(t.client), Effect.ignore))
  ) as Effect.Effect<A, E | Error, never>
}

/** Drops a test's tables (best effort). */
export const dropTables = (prefix: string) =>
  Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    for (const t of ["jobs", "workers", "migrations", "ledger", "schedules", "paused", "limits", "rates", "stats"]) {
      yield* Effect.ignore(sql`DROP TABLE IF EXISTS ${sql(prefix + t)}`)
    }
  })

/** Counts rows of the jobs table by state. */
export const countJobs = (prefix: string, state?: string) =>
  Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    const rows = state === undefined
      ? yield* sql<{ n: number }>`SELECT COUNT(*) AS n FROM ${sql(prefix + "jobs")}`
      : yield* sql<{ n: number }>`SELECT COUNT(*) AS n FROM ${sql(prefix + "jobs")} WHERE state = ${state}`
    return Number(rows[0].n)
  })

/**
 * Runs `work` in a transaction of its own, on a connection of its own, and leaves the transaction
 * open: gives what `work` returned and `end(commit)`, which commits it (`true`) or rolls it back.
 * A `work` that fails fails here (the transaction rolled back).
 */
export const openTransaction = <A, E, R>(work: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const opened = yield* Deferred.make<A, E>()
    const done = yield* Deferred.make<boolean>()
    const holder = yield* sql.withTransaction(Effect.gen(function*() {
      yield* Deferred.succeed(opened, yield* Effect.tapError(work, (e) => Deferred.fail(opened, e)))
      if (!(yield* Deferred.await(done))) return yield* Effect.fail("roll back" as const)
    })).pipe(Effect.exit, Effect.fork)
    const value = yield* Deferred.await(opened)
    return {
      value,
      // A rollback is the transaction's failure on purpose; a commit that failed fails here.
      end: (commit: boolean) =>
        Deferred.succeed(done, commit).pipe(
          Effect.zipRight(Fiber.join(holder)),
          Effect.flatMap((exit) => (commit ? exit : Effect.void)),
          Effect.asVoid
        )
    }
  })

/** Holds a lock on job `id`'s row in a transaction of its own; the effect returned ends it. */
export const holdJobRow = (prefix: string, id: string) =>
  Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    const held = yield* openTransaction(sql`UPDATE ${sql(prefix + "jobs")} SET progress = NULL WHERE id = ${id}`)
    return held.end(true)
  })

/** A ledger table of the prefix (`job_id`, `worker`) that handlers and child processes record runs in. */
export const ledgerOf = (prefix: string) =>
  Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    const ledger = sql(prefix + "ledger")
    yield* sql`CREATE TABLE ${ledger} (job_id VARCHAR(64) NOT NULL, worker VARCHAR(64) NOT NULL)`
    return {
      rows: sql<{ job_id: string; worker: string }>`SELECT job_id, worker FROM ${ledger}`,
      count: (jobId: string) =>
        Effect.map(
          sql<{ n: number }>`SELECT COUNT(*) AS n FROM ${ledger} WHERE job_id = ${jobId}`,
          (r) => Number(r[0].n)
        ),
      record: (jobId: string, worker: string) =>
        Effect.orDie(sql`INSERT INTO ${ledger} (job_id, worker) VALUES (${jobId}, ${worker})`)
    }
  })

/**
 * A Completer on a Claimer that counts the jobs claimed with the writes of ends (claims riding on
 * them; on MySQL/MariaDB the ends written in the claim's transaction), and the ends that passed
 * their slot of a concurrency limit to a job claimed ahead (`passed`): the services to give a
 * `Worker.make`, and the counts so far. Built in the caller's scope, on its `Database` and `Facts`.
 */
export const countingRides = Effect.gen(function*() {
  let rode = 0
  let passed = 0
  const spying = Layer.effect(
    Claimer.Claimer,
    Effect.map(Claimer.make, (claimer) => ({
      ...claimer,
      finishAndClaim: (...args: Parameters<typeof claimer.finishAndClaim>) =>
        Effect.tap(claimer.finishAndClaim(...args), ({ claimed }) => Effect.sync(() => void (rode += claimed.length)))
    }))
  )
  const built = yield* Layer.build(
    Completer.layer.pipe(
      Layer.provideMerge(spying),
      Layer.provide(Layer.succeedContext(yield* Effect.context<Database | Facts>()))
    )
  )
  const completer = Context.get(built, Completer.Completer)
  const services = Context.add(built, Completer.Completer, {
    ...completer,
    submit: (outcome, onWritten, claimant) =>
      completer.submit(outcome, (changed, unwritten, retaken, handed) => {
        if (outcome.handTo !== undefined && handed === true) passed++
        onWritten(changed, unwritten, retaken, handed)
      }, claimant)
  })
  return { services, rode: () => rode, passed: () => passed }
})

/**
 * PostgreSQL: the condition on `pg_locks` that finds the session lock named `lockName` (a worker's,
 * `driver.workerLockName`) held in this database. `lockName` is written into the SQL: test names only.
 */
export const pgLockHeldWhere = (lockName: string) =>
  `locktype = 'advisory' AND granted AND objsubid = 2 AND classid::bigint = ${0x5a1a7e}
    AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
    AND objid::bigint = (hashtext('${lockName.replace(/'/g, "''")}')::bigint & 4294967295)`

/**
 * Ends the connection that holds worker `workerId`'s session lock, as the server does to a terminated
 * backend; false when nobody holds the lock.
 */

export const cutLockConnection = (target: Target, workerId: string) =>
  Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    const lockName = (yield* Database).driver.workerLockName(workerId)
    if (target.dialect === "pg") {
      const ended = yield* sql.unsafe<{ ok: boolean }>(
        `SELECT pg_terminate_backend(pid) AS ok FROM pg_locks WHERE ${pgLockHeldWhere(lockName)}`
      )
      return ended.length > 0
    }
    const [row] = yield* sql<{ conn: number | null }>`SELECT IS_USED_LOCK(${lockName}) AS conn`
    if (row.conn === null) return false
    // Ended meanwhile (it took its lock again on another connection): nothing to end.
    yield* Effect.ignore(sql.unsafe(`KILL CONNECTION ${Number(row.conn)}`))
    return true
  })
