/**
 * A worker or producer in its own OS process, for tests that cross processes.
 *
 *   worker-process.ts <mode> <pg|mysql> <url> <prefix> <name> <arg>
 *
 * - work:     runs "noop" jobs (each SQLANE_JOB_MS ms, default 2), recording each run in <prefix>ledger,
 *             until <arg> jobs are completed
 * - enqueue:  enqueues <arg> "noop" jobs and exits
 * - burst:    enqueues <arg> "noop" jobs at once (concurrently, a statement each) and exits
 * - hang:     runs "hang" jobs (recording the start, then sleeping an hour) until killed
 * - hang-one: as hang, at concurrency 1 and prefetch 1, and runs "noop" jobs at once: after a few
 *             "noop" jobs the next "hang" job waits, claimed, behind the one that hangs
 * - suicide:  runs "suicide" jobs, which record the start and SIGKILL this process; exits when none
 *             is left pending or running
 * - graceful: runs "slow" jobs (3 s, recording start and end); on SIGTERM/SIGINT shuts down with a
 *             shutdownTimeout of <arg> ms
 * - cancel:   cancels job <arg>
 * - outage:   runs "slow" jobs at concurrency 20, each for SQLANE_JOB_MS ms (default an hour), printing
 *             `started <id>` as each starts; on
 *             SIGTERM/SIGINT shuts down with a shutdownTimeout of <arg> ms and prints the milliseconds
 *             the shutdown took to stdout (`shutdown <ms>`)
 *
 * - limited:  runs "limited" jobs at concurrency 4, each for SQLANE_JOB_MS ms (default 50), recording
 *             each run's key, start and end (µs) in <prefix>ledger (test/suite/limits.ts's ledger),
 *             until <arg> jobs are completed
 * - forty:    runs "forty" jobs (a limit of 40) at concurrency 50, each for SQLANE_JOB_MS ms (default
 *             10), recording each run's start and end (µs) in <prefix>ledger, until <arg> jobs are
 *             completed
 * - rated:    runs "rated" jobs at concurrency 4, recording each run's key and start (µs) in
 *             <prefix>ledger, until <arg> jobs are completed
 *
 * Every worker but "limited" and "rated" records ("ready", <name>) in the ledger once it runs.
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { Job, Queue, QueueLive, Worker } from "../../src/index.js"
import { Forty, Hang, Limited, Noop, Rated, Slow, Suicide } from "./jobs.js"
import { clientLayer } from "./targets.js"

const [mode, dialect, url, prefix, name, arg] = process.argv.slice(2)

// SQLANE_POOL: the pool's size (default 4).
// Without LISTEN/NOTIFY (MySQL/MariaDB) another process learns of new jobs by polling: poll often.
const layer = QueueLive({ prefix, migrate: false, pollInterval: (process.env.SQLANE_POLL ?? "5 seconds") as Duration.DurationInput })
  .pipe(Layer.provideMerge(clientLayer({ id: "child", dialect: dialect as "pg" | "mysql", url }, { maxConnections: Number(process.env.SQLANE_POOL ?? 4) })))

const record = (jobId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql`INSERT INTO ${sql(`${prefix}ledger`)} (job_id, worker) VALUES (${jobId}, ${name})`.pipe(Effect.orDie))

const ready = record("ready")

/** How long a "work" or "outage" job takes (ms), if set. */
const jobMs = process.env.SQLANE_JOB_MS === undefined ? undefined : Number(process.env.SQLANE_JOB_MS)

const countState = (states: ReadonlyArray<string>) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ n: number }>`SELECT COUNT(*) AS n FROM ${sql(`${prefix}jobs`)} WHERE state IN ${sql.in(states)}`.pipe(
      Effect.map((rows) => Number(rows[0].n))
    ))

/**
 * Runs `job`'s jobs at `concurrency`, each for SQLANE_JOB_MS ms (default `defaultMs`), recording each
 * run's key, start and end (µs) in <prefix>ledger, until <arg> jobs are completed.
 */
const runsInLedger = <J extends Job.Job.Any>(
  job: J,
  concurrency: number,
  defaultMs: number,
  keyOf: (payload: Job.Job.Payload<J>) => string | null
) =>
  Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    const runs = sql(`${prefix}ledger`)
    const nowUs = () => Math.round((performance.timeOrigin + performance.now()) * 1000)
    yield* Worker.make({
      concurrency,
      handlers: [Job.handler(job, (p, ctx) =>
        Effect.gen(function*() {
          yield* sql`INSERT INTO ${runs} (job_id, lkey, worker, started_us) VALUES (${ctx.id}, ${keyOf(p)}, ${name}, ${nowUs()})`
          yield* Effect.promise(() => new Promise((r) => setTimeout(r, jobMs ?? defaultMs)))
          yield* sql`UPDATE ${runs} SET ended_us = ${nowUs()} WHERE job_id = ${ctx.id} AND worker = ${name} AND ended_us IS NULL`
        }).pipe(Effect.orDie) as Effect.Effect<any, never, never>)]
    })
    while ((yield* countState(["completed"])) < Number(arg)) yield* Effect.sleep("50 millis")
  })

const programs: Record<string, Effect.Effect<void, unknown, any>> = {
  work: Effect.gen(function*() {
    yield* Worker.make({
      concurrency: 5,
      handlers: [Job.handler(Noop, (_, ctx) => record(ctx.id).pipe(Effect.zipRight(Effect.sleep(jobMs ?? 2))))]
    })
    yield* ready
    while ((yield* countState(["completed"])) < Number(arg)) yield* Effect.sleep("50 millis")
  }),
  enqueue: Effect.gen(function*() {
    const queue = yield* Queue.Queue
    for (let i = 0; i < Number(arg); i++) yield* queue.enqueue(Noop, { i })
  }),
  burst: Effect.gen(function*() {
    const queue = yield* Queue.Queue
    yield* Effect.forEach(Array.from({ length: Number(arg) }, (_, i) => i), (i) => queue.enqueue(Noop, { i }), {
      concurrency: "unbounded",
      discard: true
    })
  }),
  hang: Effect.gen(function*() {
    yield* Worker.make({ handlers: [Job.handler(Hang, (_, ctx) => record(ctx.id).pipe(Effect.zipRight(Effect.sleep("1 hour"))))] })
    yield* ready
    yield* Effect.never
  }),
  "hang-one": Effect.gen(function*() {
    yield* Worker.make({
      concurrency: 1,
      prefetch: 1,
      handlers: [
        Job.handler(Hang, (_, ctx) => record(ctx.id).pipe(Effect.zipRight(Effect.sleep("1 hour")))),
        Job.handler(Noop, () => Effect.void)
      ]
    })
    yield* ready
    yield* Effect.never
  }),
  suicide: Effect.gen(function*() {
    yield* Worker.make({
      handlers: [Job.handler(Suicide, (_, ctx) =>
        record(ctx.id).pipe(Effect.zipRight(Effect.sync(() => process.kill(process.pid, "SIGKILL")))))]
    })
    yield* ready
    while ((yield* countState(["pending", "running"])) > 0) yield* Effect.sleep("50 millis")
  }),
  graceful: Effect.gen(function*() {
    yield* Worker.make({
      shutdownTimeout: Duration.millis(Number(arg)),
      handlers: [Job.handler(Slow, (_, ctx) =>
        record(`start:${ctx.id}`).pipe(Effect.zipRight(Effect.sleep("3 seconds")), Effect.zipRight(record(`end:${ctx.id}`))))]
    })
    yield* ready
    yield* Effect.never
  }),
  cancel: Effect.flatMap(Queue.Queue, (queue) => queue.cancel(arg)),
  limited: runsInLedger(Limited, 4, 50, (p) => p.tenant),
  forty: runsInLedger(Forty, 50, 10, () => null),
  rated: Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    const runs = sql(`${prefix}ledger`)
    const nowUs = () => Math.round((performance.timeOrigin + performance.now()) * 1000)
    yield* Worker.make({
      concurrency: 4,
      handlers: [Job.handler(Rated, (p, ctx) =>
        sql`INSERT INTO ${runs} (job_id, lkey, worker, started_us) VALUES (${ctx.id}, ${p.tenant}, ${name}, ${nowUs()})`.pipe(
          Effect.asVoid,
          Effect.orDie
        ))]
    })
    while ((yield* countState(["completed"])) < Number(arg)) yield* Effect.sleep("50 millis")
  }),
  outage: Effect.gen(function*() {
    yield* Worker.make({
      concurrency: 20,
      shutdownTimeout: Duration.millis(Number(arg)),
      // Each start is printed (`started <id>`): a claim whose answer the cut lost started nothing here.
      handlers: [Job.handler(Slow, (_, ctx) => Effect.zipRight(Effect.sync(() => console.log(`started ${ctx.id}`)), Effect.sleep(jobMs ?? 3_600_000)))]
    })
    yield* Effect.never
  })
}

const program = Effect.scoped(programs[mode]).pipe(Effect.provide(layer)) as Effect.Effect<void, unknown>
if (mode === "outage") {
  // The time from the signal to the end of the program's scope (the worker's and QueueLive's).
  let signalledAt = 0
  for (const signal of ["SIGINT", "SIGTERM"] as const) process.once(signal, () => void (signalledAt = Date.now()))
  const stamp = (what: string) => Effect.sync(() => console.log(`${what} ${Date.now() - signalledAt}`))
  NodeRuntime.runMain(
    Effect.scoped(programs[mode]).pipe(
      Effect.provide(QueueLive({ prefix, migrate: false })),
      // QueueLive (and the worker) closed; then the SQL client closes.
      Effect.ensuring(stamp("queue closed")),
      Effect.provide(clientLayer({ id: "child", dialect: dialect as "pg" | "mysql", url }, { maxConnections: Number(process.env.SQLANE_POOL ?? 4) })),
      Effect.ensuring(stamp("shutdown"))
    ) as Effect.Effect<void, unknown>,
    { disableErrorReporting: false }
  )
} else if (mode === "graceful") {
  // SIGTERM/SIGINT interrupt the program: the worker's scope closes and it shuts down gracefully.
  NodeRuntime.runMain(program, { disableErrorReporting: false })
} else {
  Effect.runPromise(program).then(
    () => process.exit(0),
    (e) => {
      console.error(e)
      process.exit(1)
    }
  )
}
