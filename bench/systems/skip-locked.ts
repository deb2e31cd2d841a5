/**
 * The floor of queue overhead: a hand-written `FOR UPDATE SKIP LOCKED` queue, one table and one
 * index. A job is claimed inside a transaction and deleted at its commit.
 *
 * - skip-locked-1: `concurrency` loops, each with its own connection, 1 job per transaction;
 * - skip-locked-50: `concurrency` loops, each claiming up to 50 jobs per transaction and running
 *   them one after another (so `concurrency` jobs are in flight, as with pg-boss's batches).
 *
 * PostgreSQL: `DELETE … WHERE id = ANY(ARRAY(SELECT … LIMIT n FOR UPDATE SKIP LOCKED)) RETURNING`
 * (see `claimPg` for why it has that shape), and a statement-level trigger sends NOTIFY to wake idle
 * loops. MariaDB: a locking read (an index range, no filesort) and a DELETE in one READ COMMITTED
 * transaction; idle loops poll. `checkPlan` fails a drain whose claim would not read the fetch index
 * in order, with or without statistics.
 */
import Pg from "pg"
import * as Mysql from "mysql2/promise"
import { sleep } from "../lib/stats.js"
import { admin, tableBytes } from "../lib/targets.js"
import { type Env, type Instance, type OpenOptions, type Payload, QUEUE, type System } from "./types.js"

const table = (env: Env) => `${env.ns}_jobs`

/**
 * The claim on PostgreSQL, `$1` the queue. Two things keep its plan on the indexes whatever the
 * planner knows about the table:
 * - the candidates are read as a range of the fetch index `(queue, run_at, id)`, written as row
 *   comparisons: `queue = $1 AND run_at <= now()` estimates, without statistics, 1/200 × 1/3 of the
 *   table (33 of 20,000 rows), so the planner reads them all with a bitmap scan and sorts them
 *   (7–11 ms per claim on 20,000 due jobs in `EXPLAIN ANALYZE`, against 0.2 ms in index order). The two row comparisons
 *   select the same rows and are estimated at 1/3 × 1/3 without statistics, and at the whole
 *   backlog with them, so an index scan in order that stops after `n` rows is the cheaper plan either
 *   way; the `ORDER BY` names `queue` too, as the index does, since the row comparisons do not make
 *   it a constant;
 * - the ids reach the `DELETE` as an array (`= ANY(ARRAY(…))`, an InitPlan), so the rows are found
 *   by their primary key, not by a join the planner could turn into a scan of the table.
 */
const claimPg = (t: string, batch: number) =>
  `DELETE FROM ${t} WHERE id = ANY(ARRAY(
     SELECT id FROM ${t}
     WHERE (queue, run_at) >= ($1::text, '-infinity'::timestamptz) AND (queue, run_at) <= ($1::text, now())
     ORDER BY queue, run_at, id
     LIMIT ${batch} FOR UPDATE SKIP LOCKED))
   RETURNING id, payload`

/** The claim's locking read on MySQL/MariaDB (which rejects `LIMIT` inside `IN (subquery)`), `?` the queue. */
const claimMysql = (t: string, batch: number) =>
  // FORCE INDEX: a range over (queue, run_at) in index order — no filesort; without it MariaDB
  // picks a ref on queue alone and filters run_at row by row.
  `SELECT id, payload FROM ${t} FORCE INDEX (${t}_fetch) WHERE queue = ? AND run_at <= NOW(6)
   ORDER BY run_at, id LIMIT ${batch} FOR UPDATE SKIP LOCKED`

interface PlanNode {
  readonly "Node Type": string
  readonly "Relation Name"?: string
  readonly "Index Name"?: string
  readonly Plans?: ReadonlyArray<PlanNode>
}

const planNodes = (n: PlanNode): Array<PlanNode> => [n, ...(n.Plans ?? []).flatMap(planNodes)]

/** `EXPLAIN` of the claim on the table as it is now: throws unless it reads the fetch index in order. */
const checkPlan = (id: string, batch: number) => async (env: Env): Promise<void> => {
  const t = table(env)
  const index = `${t}_fetch`
  const a = admin(env.target)
  try {
    if (env.target.dialect === "pg") {
      const rows = await a.query(`EXPLAIN (FORMAT JSON) ${claimPg(t, batch)}`, [QUEUE])
      const raw = rows[0]["QUERY PLAN"]
      const nodes = planNodes((typeof raw === "string" ? JSON.parse(raw) : raw)[0].Plan as PlanNode)
      const shown = nodes
        .map((n) => `${n["Node Type"]}${n["Relation Name"] ? ` on ${n["Relation Name"]}` : ""}${n["Index Name"] ? ` using ${n["Index Name"]}` : ""}`)
        .join(" > ")
      const sorted = nodes.some((n) => n["Node Type"].includes("Sort"))
      const seq = nodes.some((n) => n["Node Type"] === "Seq Scan" && n["Relation Name"] === t)
      const inOrder = nodes.some((n) => (n["Node Type"] === "Index Scan" || n["Node Type"] === "Index Only Scan") && n["Index Name"] === index)
      if (sorted || seq || !inOrder) {
        throw new Error(`${id}: the claim's plan does not read ${index} in order (${shown}); the floor would not be a floor`)
      }
      return
    }
    const explain = async (sql: string, params: ReadonlyArray<unknown>) => {
      const rows = await a.query(`EXPLAIN FORMAT=JSON ${sql}`, params)
      const text = String(rows[0].EXPLAIN)
      const tables: Array<{ table_name?: string; key?: string; access_type?: string }> = []
      const walk = (v: unknown): void => {
        if (Array.isArray(v)) v.forEach(walk)
        else if (v !== null && typeof v === "object") {
          for (const [k, x] of Object.entries(v)) {
            if (k === "table" && x !== null && typeof x === "object") tables.push(x as any)
            walk(x)
          }
        }
      }
      walk(JSON.parse(text))
      return { text, tables }
    }
    const read = await explain(claimMysql(t, batch), [QUEUE])
    const readOk = read.tables.length > 0 && !read.text.includes("filesort") &&
      read.tables.every((x) => x.key === index && (x.access_type === "range" || x.access_type === "ref"))
    const del = await explain(`DELETE FROM ${t} WHERE id IN (1, 2, 3)`, [])
    const delOk = del.tables.length > 0 && del.tables.every((x) => x.key === "PRIMARY")
    if (!readOk || !delOk) {
      const shown = [...read.tables, ...del.tables].map((x) => `${x.table_name} ${x.access_type} key ${x.key}`).join(", ")
      throw new Error(
        `${id}: the claim's plan does not read ${index} in order and delete by primary key (${shown}${read.text.includes("filesort") ? ", filesort" : ""}); the floor would not be a floor`
      )
    }
  } finally {
    await a.close()
  }
}

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
            const { rows } = await client.query(claimPg(t, batch), [QUEUE])
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
            const [rows] = (await conn.query(claimMysql(t, batch), [QUEUE])) as any
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
  checkPlan: checkPlan(id, batch),
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
