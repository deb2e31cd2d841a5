/**
 * BullMQ 6 with its defaults, on Redis (`SQLANE_REDIS_URL`, default redis://127.0.0.1:6379, keys under
 * a prefix of their own) and on PostgreSQL (`createPostgresBackend`, a schema of its own).
 * `add` / `addBulk`; `Worker` with `concurrency`.
 */
import { createPostgresBackend, Queue, Worker } from "bullmq"
import { Redis } from "ioredis"
import { admin, schemaBytes } from "../lib/targets.js"
import { type Env, type OpenOptions, type Payload, QUEUE, type System } from "./types.js"

const schema = (env: Env) => `${env.ns}_bullmq`

const redisConnection = (env: Env) => ({ ...env.target.redis, maxRetriesPerRequest: null })

const options = (env: Env, redis: boolean, pool: number): any =>
  redis
    ? { connection: redisConnection(env), prefix: env.ns }
    : { connection: { connectionString: env.target.url, schema: schema(env), max: pool, migrate: true } }

const newQueue = (env: Env, redis: boolean, pool: number) =>
  redis ? new Queue(QUEUE, options(env, true, pool)) : new Queue(QUEUE, options(env, false, pool), createPostgresBackend)

const newWorker = (env: Env, redis: boolean, pool: number, concurrency: number, processor: (job: any) => Promise<void>) =>
  redis
    ? new Worker(QUEUE, processor, { ...options(env, true, pool), concurrency })
    : new Worker(QUEUE, processor, { ...options(env, false, pool), concurrency }, createPostgresBackend)

const checked = new Map<string, Promise<void>>()

/**
 * Fails within about 3 s when Redis does not answer (`SQLANE_REDIS_URL`, default
 * redis://127.0.0.1:6379); BullMQ's own connections would retry for ever. Checked once per address
 * and run.
 */
const redisUp = (env: Env): Promise<void> => {
  const key = `${env.target.redis.host}:${env.target.redis.port}`
  let check = checked.get(key)
  if (check === undefined) {
    const bound = (ms: number) =>
      new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`no answer in ${ms / 1000} s`)), ms).unref())
    check = (async () => {
      const r = new Redis({
        ...env.target.redis,
        lazyConnect: true,
        connectTimeout: 3000,
        maxRetriesPerRequest: 0,
        enableOfflineQueue: false,
        retryStrategy: () => null
      })
      let cause: unknown
      r.on("error", (e) => void (cause ??= e))
      try {
        // connectTimeout covers the TCP connect only; a server that accepts and never answers is bounded here.
        await Promise.race([r.connect().then(() => r.ping()), bound(3000)])
      } catch (e) {
        cause ??= e
        const message = cause instanceof Error ? cause.message : String(cause)
        throw new Error(`Redis not reachable at ${key} (set SQLANE_REDIS_URL): ${message}`)
      } finally {
        r.disconnect()
      }
    })()
    checked.set(key, check)
  }
  return check
}

const usedMemory = async (env: Env) => {
  const r = new Redis(redisConnection(env))
  try {
    const info = await r.info("memory")
    return Number(/used_memory:(\d+)/.exec(info)?.[1] ?? 0)
  } finally {
    r.disconnect()
  }
}

const make = (id: "bullmq-redis" | "bullmq-pg", redis: boolean): System => ({
  id,
  dialects: ["pg"],
  storage: redis ? "RAM" : "disk",
  prepare: async (env) => {
    if (redis) await redisUp(env)
    const q = newQueue(env, redis, 2)
    await q.waitUntilReady()
    await q.close()
  },
  open: async (env, o: OpenOptions = {}) => {
    const pool = o.pool ?? 10
    if (redis) await redisUp(env)
    const q = newQueue(env, redis, pool)
    q.on("error", () => {})
    await q.waitUntilReady()
    return {
      enqueue: async (p) => {
        await q.add("job", p)
      },
      enqueueMany: async (ps) => {
        await q.addBulk(ps.map((data) => ({ name: "job", data })))
      },
      work: async ({ concurrency, handle }) => {
        const w = newWorker(env, redis, pool, concurrency, async (job) => {
          const r = handle(job.data as Payload)
          if (r !== undefined) await r
        })
        w.on("error", () => {})
        await w.waitUntilReady()
        return () => w.close(true)
      },
      close: () => q.close()
    }
  },
  bytes: async (env) => {
    if (redis) return usedMemory(env)
    const a = admin(env.target)
    try {
      return await schemaBytes(a, schema(env))
    } finally {
      await a.close()
    }
  },
  drop: async (env) => {
    if (redis) {
      await redisUp(env)
      const r = new Redis(redisConnection(env))
      try {
        let cursor = "0"
        do {
          const [next, keys] = await r.scan(cursor, "MATCH", `${env.ns}:*`, "COUNT", 1000)
          cursor = next
          if (keys.length > 0) await r.del(...keys)
        } while (cursor !== "0")
      } finally {
        r.disconnect()
      }
      return
    }
    const a = admin(env.target)
    try {
      await a.query(`DROP SCHEMA IF EXISTS ${schema(env)} CASCADE`)
    } finally {
      await a.close()
    }
  }
})

export const bullmqRedis = make("bullmq-redis", true)
export const bullmqPg = make("bullmq-pg", false)
