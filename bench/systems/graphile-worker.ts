/**
 * graphile-worker 0.18 with its defaults (LISTEN/NOTIFY, 2 s poll, pool of 10), in its own schema.
 * Enqueue with `WorkerUtils.addJob` / `addJobs`; work with `run({ taskList, concurrency })`.
 */
import { Logger, makeWorkerUtils, run, runMigrations } from "graphile-worker"
import { admin, schemaBytes } from "../lib/targets.js"
import { type Env, type Payload, QUEUE, type System } from "./types.js"

const schema = (env: Env) => `${env.ns}_gw`
const logger = new Logger(() => () => {})

export const graphileWorker: System = {
  id: "graphile-worker",
  dialects: ["pg"],
  prepare: async (env) => {
    await runMigrations({ connectionString: env.target.url, schema: schema(env), logger })
  },
  open: async (env, o = {}) => {
    const pool = o.pool ?? 10
    const utils = await makeWorkerUtils({ connectionString: env.target.url, schema: schema(env), logger, maxPoolSize: pool })
    return {
      enqueue: async (p) => {
        await utils.addJob(QUEUE, p)
      },
      enqueueMany: async (ps) => {
        await utils.addJobs(ps.map((payload) => ({ identifier: QUEUE, payload })))
      },
      work: async ({ concurrency, handle }) => {
        const runner = await run({
          connectionString: env.target.url,
          schema: schema(env),
          logger,
          concurrency,
          maxPoolSize: pool,
          noHandleSignals: true,
          taskList: {
            [QUEUE]: async (p) => {
              const r = handle(p as Payload)
              if (r !== undefined) await r
            }
          }
        })
        return () => runner.stop()
      },
      close: async () => {
        await utils.release()
      }
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
