/**
 * Effect's own `SqlPersistedQueue` (`@effect/sql`) behind `PersistedQueue` (`@effect/experimental`),
 * with its defaults (1 s poll, no wake-ups). `offer` enqueues one element; it has no batch API, so
 * "enqueueMany" is `offer`s in one `sql.withTransaction`. A worker of concurrency `c` is `c` fibers,
 * each looping on `take`.
 */
import * as PersistedQueue from "@effect/experimental/PersistedQueue"
import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlPersistedQueue from "@effect/sql/SqlPersistedQueue"
import * as MysqlClient from "@effect/sql-mysql2/MysqlClient"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import { admin, tableBytes } from "../lib/targets.js"
import { type Env, type OpenOptions, type Payload, QUEUE, type System } from "./types.js"

const PayloadSchema = Schema.Struct({ i: Schema.Number, userId: Schema.Number, email: Schema.String, template: Schema.String })

const tableName = (env: Env) => `${env.ns}_effect_queue`

const client = (env: Env, pool: number) =>
  env.target.dialect === "pg"
    ? PgClient.layer({ url: Redacted.make(env.target.url), maxConnections: pool })
    : MysqlClient.layer({ url: Redacted.make(env.target.url), maxConnections: pool })

const runtime = (env: Env, o: OpenOptions) =>
  ManagedRuntime.make(
    PersistedQueue.layer.pipe(
      Layer.provideMerge(
        SqlPersistedQueue.layerStore({
          tableName: tableName(env),
          ...(o.pollMs === undefined ? {} : { pollInterval: o.pollMs })
        })
      ),
      Layer.provideMerge(client(env, o.pool ?? 10)),
      Layer.orDie
    )
  )

/** An error whose message carries the whole chain of causes (the driver's message, not only "Failed to offer"). */
const withCauses = (e: unknown): Error => {
  const parts: Array<string> = []
  let c: any = e
  for (let depth = 0; c != null && depth < 6; depth++, c = c.cause) {
    const m = typeof c === "object" && "message" in c ? String(c.message) : String(c)
    if (m !== "" && !parts.includes(m)) parts.push(m)
    if (typeof c !== "object") break
  }
  return new Error(parts.join(": "))
}

export const effectSqlPersistedQueue: System = {
  id: "effect-sql-persisted-queue",
  dialects: ["pg", "mysql"],
  prepare: async (env) => {
    const rt = runtime(env, { pool: 2 })
    await rt.runPromise(Effect.void) // creates the table
    await rt.dispose()
  },
  open: async (env, o = {}) => {
    const rt = runtime(env, o)
    const [queue, sql] = await rt.runPromise(
      Effect.all([PersistedQueue.make({ name: QUEUE, schema: PayloadSchema }), SqlClient.SqlClient])
    )
    return {
      enqueue: (p) => rt.runPromise(Effect.asVoid(queue.offer(p)).pipe(Effect.mapError(withCauses))),
      enqueueMany: (ps) =>
        rt.runPromise(
          sql.withTransaction(Effect.forEach(ps, (p) => queue.offer(p), { discard: true })).pipe(
            Effect.mapError(withCauses)
          )
        ),
      work: async ({ concurrency, handle }) => {
        const scope = await rt.runPromise(Scope.make())
        const take = queue.take((p: Payload) =>
          Effect.suspend(() => {
            const r = handle(p)
            return r === undefined ? Effect.void : Effect.promise(() => r)
          })
        )
        await rt.runPromise(
          Effect.forEach(
            Array.from({ length: concurrency }),
            () => Effect.forkIn(Effect.forever(Effect.ignore(take)), scope),
            { discard: true }
          )
        )
        return () => rt.runPromise(Scope.close(scope, Exit.void))
      },
      close: () => rt.dispose()
    }
  },
  bytes: async (env) => {
    const a = admin(env.target)
    try {
      return await tableBytes(a, env.target.dialect, [tableName(env)])
    } finally {
      await a.close()
    }
  },
  drop: async (env) => {
    const a = admin(env.target)
    try {
      await a.query(`DROP TABLE IF EXISTS ${tableName(env)}`)
    } finally {
      await a.close()
    }
  }
}
