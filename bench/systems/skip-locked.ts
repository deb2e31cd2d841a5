/**
 * The floor of queue overhead: a hand-written `FOR UPDATE SKIP LOCKED` queue, one table and one
 * index. A job is claimed inside a transaction and deleted at its commit.
 *
 * - skip-locked-1: `concurrency` loops, each with its own connection, 1 job per transaction;
 * - skip-locked-50: `concurrency` loops, each claiming up to 50 jobs per transaction and running
 *   them one after another (so `concurrency` jobs are in flight, as with pg-boss's batches).
 *
 * PostgreSQL: `DELETE … WHERE id IN (SELECT … FOR UPDATE SKIP LOCKED LIMIT n) RETURNING`, and a
 * statement-level trigger sends NOTIFY to wake idle loops. MariaDB: a locking read (an index range,
 * no filesort) and a DELETE in one READ COMMITTED transaction; idle loops poll.
 */
import Pg from "pg"
import * as Mysql from "mysql2/promise"
import { sleep } from "../lib/stats.js"
import { admin, tableBytes } from "../lib/targets.js"
import { type Env, type Instance, type OpenOptions, type Payload, QUEUE, type System } from "./types.js"

const table = (env: Env) => `${env.ns}_jobs`

const prepare = async (env: Env) => {
  const a = admin(env.target)
  const t = table(env)
  try {
    if (env.target.dialect === "pg") {
      await a.query(`DROP TABLE IF EXISTS ${t}`)
      await a.query(`CREATE TABLE ${t} (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        queue text NOT NULL,
        payload jsonb NOT NULL,
        run_at timestamptz NOT NULL DEFAULT now(),
        attempts int NOT NULL DEFAULT 0)`)
      await a.query(`CREATE INDEX ${t}_fetch ON ${t} (queue, run_at, id)`)
      await a.query(`CREATE OR REPLACE FUNCTION ${t}_notify() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN PERFORM pg_notify('${t}', ''); RETURN NULL; END $$`)
      await a.query(`CREATE TRIGGER ${t}_notify AFTER INSERT ON ${t}
        FOR EACH STATEMENT EXECUTE FUNCTION ${t}_notify()`)
    } else {
      await a.query(`DROP TABLE IF EXISTS ${t}`)
      await a.query(`CREATE TABLE ${t} (
        id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
        queue VARCHAR(100) NOT NULL,
        payload LONGTEXT NOT NULL,
        run_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
        attempts INT NOT NULL DEFAULT 0,
        KEY ${t}_fetch (queue, run_at, id)) ENGINE=InnoDB`)
    }
  } finally {
    await a.close()
  }
}

const sleepOrWake = (waiters: Set<() => void>, ms: number) =>
  new Promise<void>((resolve) => {
    const timer = setTimeout(done, ms)
    function done() {
      clearTimeout(timer)
      waiters.delete(done)
      resolve()
    }
    waiters.add(done)
  })

const openPg = async (env: Env, batch: number, o: OpenOptions): Promise<Instance> => {
  const t = table(env)
  const concurrency = o.concurrency ?? 10
  const pool = new Pg.Pool({ connectionString: env.target.url, max: Math.max(o.pool ?? 10, concurrency + 1) })
  pool.on("error", () => {})
  const pollMs = o.pollMs ?? 1000
  return {
    enqueue: async (p) => {
      await pool.query(`INSERT INTO ${t} (queue, payload) VALUES ($1, $2)`, [QUEUE, p])
    },
    enqueueMany: async (ps) => {
      await pool.query(`INSERT INTO ${t} (queue, payload) SELECT $1, x FROM jsonb_array_elements($2::jsonb) AS x`, [
        QUEUE,
        JSON.stringify(ps)
      ])
    },
    work: async ({ concurrency, handle }) => {
      let stopped = false
      const waiters = new Set<() => void>()
      const wakeAll = () => {
        for (const w of Array.from(waiters)) w()
      }
      const listener = new Pg.Client({ connectionString: env.target.url })
      listener.on("error", () => {})
      await listener.connect()
      listener.on("notification", wakeAll)
      await listener.query(`LISTEN ${t}`)
      const loop = async () => {
        const client = await pool.connect()
        try {
          while (!stopped) {
            try {
              await iterationPg()
            } catch {
              // A failed statement (deadlock, lost connection): roll back and go on.
              await client.query("ROLLBACK").catch(() => {})
              await sleep(10)
            }
          }
          async function iterationPg() {
            await client.query("BEGIN")
            const { rows } = await client.query(
              `DELETE FROM ${t} WHERE id IN (
                 SELECT id FROM ${t} WHERE queue = $1 AND run_at <= now()
                 ORDER BY run_at, id FOR UPDATE SKIP LOCKED LIMIT ${batch})
               RETURNING id, payload`,
              [QUEUE]
            )
            if (rows.length === 0) {
              await client.query("COMMIT")
              await sleepOrWake(waiters, pollMs)
              return
            }
            for (const row of rows) {
              const r = handle(row.payload as Payload)
              if (r !== undefined) await r
            }
            await client.query("COMMIT")
          }
        } finally {
          client.release()
        }
      }
      const loops = Array.from({ length: concurrency }, () => loop().catch(() => {}))
      return async () => {
        stopped = true
        wakeAll()
        await Promise.all(loops)
        await listener.end().catch(() => {})
      }
    },
    close: () => pool.end()
  }
}

const openMysql = async (env: Env, batch: number, o: OpenOptions): Promise<Instance> => {
  const t = table(env)
  const concurrency = o.concurrency ?? 10
  const pool = Mysql.createPool({ uri: env.target.url, connectionLimit: Math.max(o.pool ?? 10, concurrency + 1) })
  const pollMs = o.pollMs ?? 1000
  return {
    enqueue: async (p) => {
      await pool.execute(`INSERT INTO ${t} (queue, payload) VALUES (?, ?)`, [QUEUE, JSON.stringify(p)])
    },
    enqueueMany: async (ps) => {
      await pool.query(`INSERT INTO ${t} (queue, payload) VALUES ?`, [ps.map((p) => [QUEUE, JSON.stringify(p)])])
    },
    work: async ({ concurrency, handle }) => {
      let stopped = false
      const waiters = new Set<() => void>()
      const loop = async () => {
        const conn = await pool.getConnection()
        try {
          // READ COMMITTED: the locking read and the DELETE lock only the rows claimed. At MariaDB's
          // default REPEATABLE READ they also take next-key locks on the index records they pass;
          // 50 loops on a 20,000-job backlog filled the buffer pool with locks and crashed the server.
          await conn.query("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
          while (!stopped) {
            try {
              await iterationMysql()
            } catch {
              // A failed statement (deadlock, lock wait timeout): roll back and go on.
              await conn.query("ROLLBACK").catch(() => {})
              await sleep(10)
            }
          }
          async function iterationMysql() {
            await conn.query("BEGIN")
            const [rows] = (await conn.query(
              // FORCE INDEX: a range over (queue, run_at) in index order — no filesort; without it
              // MariaDB picks a ref on queue alone and filters run_at row by row.
              `SELECT id, payload FROM ${t} FORCE INDEX (${t}_fetch) WHERE queue = ? AND run_at <= NOW(6)
               ORDER BY run_at, id LIMIT ${batch} FOR UPDATE SKIP LOCKED`,
              [QUEUE]
            )) as any
            if (rows.length === 0) {
              await conn.query("COMMIT")
              await sleepOrWake(waiters, pollMs)
              return
            }
            await conn.query(`DELETE FROM ${t} WHERE id IN (?)`, [rows.map((r: any) => r.id)])
            for (const row of rows) {
              const r = handle(JSON.parse(row.payload) as Payload)
              if (r !== undefined) await r
            }
            await conn.query("COMMIT")
          }
        } finally {
          conn.release()
        }
      }
      const loops = Array.from({ length: concurrency }, () => loop().catch(() => {}))
      return async () => {
        stopped = true
        for (const w of Array.from(waiters)) w()
        await Promise.all(loops)
      }
    },
    close: () => pool.end()
  }
}

const make = (id: "skip-locked-1" | "skip-locked-50", batch: number): System => ({
  id,
  dialects: ["pg", "mysql"],
  prepare,
  open: (env, o = {}) => (env.target.dialect === "pg" ? openPg(env, batch, o) : openMysql(env, batch, o)),
  bytes: async (env) => {
    const a = admin(env.target)
    try {
      return await tableBytes(a, env.target.dialect, [table(env)])
    } finally {
      await a.close()
    }
  },
  drop: async (env) => {
    const a = admin(env.target)
    try {
      await a.query(`DROP TABLE IF EXISTS ${table(env)}`)
      if (env.target.dialect === "pg") await a.query(`DROP FUNCTION IF EXISTS ${table(env)}_notify()`)
    } finally {
      await a.close()
    }
  }
})

export const skipLocked1 = make("skip-locked-1", 1)
export const skipLocked50 = make("skip-locked-50", 50)
