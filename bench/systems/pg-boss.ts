/**
 * pg-boss 12, in its own schema.
 * - pg-boss-default: `work()` with defaults (batchSize 1, 2 s polling, no LISTEN/NOTIFY);
 * - pg-boss-tuned: `batchSize: 50`, `burstWhenBatchFull: true`, `useListenNotify: true` and the
 *   queue created with `notify: true`. The batch handler runs its jobs one after another, so
 *   `localConcurrency` is the number of jobs in flight.
 */
import { PgBoss } from "pg-boss"
import { admin, schemaBytes } from "../lib/targets.js"
import { type Env, type Payload, QUEUE, type System } from "./types.js"

const schema = (env: Env) => `${env.ns}_boss`

const make = (id: "pg-boss-default" | "pg-boss-tuned", tuned: boolean): System => {
  const boss = async (env: Env, pool: number) => {
    const b = new PgBoss({
      connectionString: env.target.url,
      schema: schema(env),
      max: pool,
      schedule: false,
      ...(tuned ? { useListenNotify: true } : {})
    })
    b.on("error", () => {})
    await b.start()
    return b
  }
  return {
    id,
    dialects: ["pg"],
    prepare: async (env) => {
      const b = await boss(env, 2)
      await b.createQueue(QUEUE, tuned ? { notify: true } : {})
      await b.stop({ graceful: false })
    },
    open: async (env, o = {}) => {
      const b = await boss(env, o.pool ?? 10)
      return {
        enqueue: async (p) => {
          await b.send(QUEUE, p)
        },
        enqueueMany: async (ps) => {
          await b.insert(QUEUE, ps.map((data) => ({ data })))
        },
        work: async ({ concurrency, handle }) => {
          const workerId = await b.work<Payload>(
            QUEUE,
            tuned
              ? { localConcurrency: concurrency, batchSize: 50, burstWhenBatchFull: true }
              : { localConcurrency: concurrency },
            async (jobs) => {
              for (const job of jobs) {
                const r = handle(job.data)
                if (r !== undefined) await r
              }
            }
          )
          return () => b.offWork(QUEUE, { id: workerId, wait: true })
        },
        close: () => b.stop({ graceful: false })
      }
    },
    bytes: async (env) => {
      const a = admin(env.target)
      try {
        return await schemaBytes(a, schema(env))
      } finally {
        await a.close()
      }
    },
    drop: async (env) => {
      const a = admin(env.target)
      try {
        await a.query(`DROP SCHEMA IF EXISTS ${schema(env)} CASCADE`)
      } finally {
        await a.close()
      }
    }
  }
}

export const pgBossDefault = make("pg-boss-default", false)
export const pgBossTuned = make("pg-boss-tuned", true)
