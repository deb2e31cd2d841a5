/**
 * pg-boss 12, in its own schema.
 * - pg-boss-default: `work()` with defaults (batchSize 1, 2 s polling, no LISTEN/NOTIFY);
 * - pg-boss-tuned: `batchSize: 50`, `burstWhenBatchFull: true`, `useListenNotify: true` and the
 *   queue created with `notify: true`. The batch handler runs its jobs one after another, so
 *   `localConcurrency` is the number of jobs in flight (as in the published comparison of SKIP
 *   LOCKED, pg-boss and BullMQ these settings come from);
 * - pg-boss-tuned-all: the same settings, the batch handler running its jobs at once
 *   (`Promise.all`), so up to `batchSize × localConcurrency` jobs are in flight (2,500 at c50).
 */
import { PgBoss } from "pg-boss"
import { admin, schemaBytes } from "../lib/targets.js"
import { type Env, type Payload, QUEUE, type System } from "./types.js"

const schema = (env: Env) => `${env.ns}_boss`

type Mode = "default" | "tuned" | "tuned-all"

const make = (id: "pg-boss-default" | "pg-boss-tuned" | "pg-boss-tuned-all", mode: Mode): System => {
  const tuned = mode !== "default"
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
            mode === "tuned-all"
              ? async (jobs) => {
                await Promise.all(jobs.map((job) => handle(job.data)))
              }
              : async (jobs) => {
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

export const pgBossDefault = make("pg-boss-default", "default")
export const pgBossTuned = make("pg-boss-tuned", "tuned")
export const pgBossTunedAll = make("pg-boss-tuned-all", "tuned-all")
