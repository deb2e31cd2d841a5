/**
 * sqlane through its public API: `QueueLive({ prefix })` over `PgClient.layer` / `MysqlClient.layer`
 * (url configs), `Queue.enqueue` / `enqueueMany`, `Worker.make`.
 */
import * as MysqlClient from "@effect/sql-mysql2/MysqlClient"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import { Admin, Claimer, Job, Queue, QueueLive, Worker } from "../../src/index.js"
import { admin, tableBytes } from "../lib/targets.js"
import { type Env, type OpenOptions, type Payload, QUEUE, type System, type SystemId } from "./types.js"

export const BenchJob = Job.make(QUEUE, {
  payload: Schema.Struct({ i: Schema.Number, userId: Schema.Number, email: Schema.String, template: Schema.String })
})

const client = (env: Env, pool: number) =>
  env.target.dialect === "pg"
    ? PgClient.layer({ url: Redacted.make(env.target.url), maxConnections: pool })
    : MysqlClient.layer({ url: Redacted.make(env.target.url), maxConnections: pool })

export const prefix = (env: Env) => `${env.ns}_`

/** sqlane's tables, without their prefix. */
export const sqlaneTables = ["jobs", "migrations", "workers", "schedules", "paused", "limits", "rates", "stats"] as const

/** sqlane's log lines go to stderr: stdout is the benchmark's markdown. */
export const stderrLogger = Logger.replace(Logger.defaultLogger, Logger.withConsoleError(Logger.logfmtLogger))

/** A running sqlane instance (one `QueueLive` with its own pool) as a ManagedRuntime. */
export const runtime = (env: Env, o: OpenOptions = {}, deleteCompleted = false) =>
  ManagedRuntime.make(
    QueueLive({
      prefix: prefix(env),
      ...(deleteCompleted ? { retention: { completed: 0 } } : {}),
      ...(o.pollMs === undefined ? {} : { pollInterval: o.pollMs }),
      // Diagnostic: SQLANE_DURABLE_CLAIMS=1 makes claims wait for the WAL flush (the default does not).
      durableClaims: process.env.SQLANE_DURABLE_CLAIMS === "1"
    }).pipe(
      Layer.provideMerge(client(env, o.pool ?? 10)),
      Layer.orDie,
      // First, so that every fiber QueueLive forks while it is built logs to stderr too.
      Layer.provide(stderrLogger)
    )
  )

export type SqlaneRuntime = ReturnType<typeof runtime>

/** Times `Claimer.probe` for `names`, taken from the QueueLive context; returns ms. */
export const probe = (rt: SqlaneRuntime, names: ReadonlyArray<string>) =>
  rt.runPromise(
    Effect.gen(function*() {
      const claimer = yield* Claimer.Claimer
      const t0 = performance.now()
      yield* claimer.probe(names, Date.now() * 1000)
      return performance.now() - t0
    })
  )

const make = (id: SystemId, deleteCompleted: boolean): System => ({
  id,
  dialects: ["pg", "mysql"],
  prepare: async (env) => {
    const rt = runtime(env, { pool: 2 })
    await rt.runPromise(Effect.void) // migrates
    await rt.dispose()
  },
  open: async (env, o = {}) => {
    const rt = runtime(env, o, deleteCompleted)
    const queue = await rt.runPromise(Queue.Queue)
    return {
      enqueue: (p) => rt.runPromise(Effect.asVoid(queue.enqueue(BenchJob, p))),
      enqueueMany: (ps) => rt.runPromise(Effect.asVoid(queue.enqueueMany(BenchJob, ps))),
      work: async ({ concurrency, handle }) => {
        const scope = await rt.runPromise(Scope.make())
        await rt.runPromise(
          Worker.make({
            concurrency,
            // Diagnostic: SQLANE_PREFETCH=N sets the worker's prefetch (default: the worker's own).
            ...(process.env.SQLANE_PREFETCH === undefined ? {} : { prefetch: Number(process.env.SQLANE_PREFETCH) }),
            handlers: [
              Job.handler(BenchJob, (p: Payload) =>
                Effect.suspend(() => {
                  const r = handle(p)
                  return r === undefined ? Effect.void : Effect.promise(() => r)
                }))
            ]
          }).pipe(Scope.extend(scope)) as Effect.Effect<unknown, never, any>
        )
        return () => rt.runPromise(Scope.close(scope, Exit.void))
      },
      close: () => rt.dispose(),
      limitRunning: (running) =>
        rt.runPromise(Effect.flatMap(Admin.Admin, (admin) =>
          running === undefined
            ? Effect.asVoid(admin.clearLimits(QUEUE))
            : Effect.orDie(admin.setLimits(QUEUE, { running }))))
    }
  },
  bytes: async (env) => {
    const a = admin(env.target)
    try {
      return await tableBytes(a, env.target.dialect, [`${prefix(env)}jobs`])
    } finally {
      await a.close()
    }
  },
  drop: async (env) => {
    const a = admin(env.target)
    try {
      for (const t of sqlaneTables) await a.query(`DROP TABLE IF EXISTS ${prefix(env)}${t}`)
    } finally {
      await a.close()
    }
  }
})

export const sqlane: System = make("sqlane", false)

/** sqlane with `retention.completed` 0: a completed job's row is deleted by the write of its end. */
export const sqlaneDeleteCompleted: System = make("sqlane-delete-completed", true)
