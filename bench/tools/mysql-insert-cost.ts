/**
 * Diagnostic: what the server's side of "enqueue, a transaction each" costs on MariaDB/MySQL, without
 * any queue's client. 8 connections of a plain mysql2 pool insert one row per statement (autocommit)
 * for 5 s, in alternating rounds (4 each), into:
 * - `sqlane`: sqlane's jobs table as its migrations make it (4 secondary indexes), with its driver's insert;
 * - `sqlane-no-keys`: the same table without the unique-key and mutex-key indexes (2 secondary);
 * - `espq`: Effect's SqlPersistedQueue table with its 3 secondary indexes and its `INSERT IGNORE`;
 * - `floor`: the hand-written SKIP LOCKED queue's table (bench/systems/skip-locked.ts, 1 secondary index).
 * Prints rows per second of each round and the medians.
 *   node --import tsx bench/tools/mysql-insert-cost.ts [rounds=4] [seconds=5]
 */
import * as Mysql from "mysql2/promise"
import { randomUUID } from "node:crypto"
import { benchRow, statementOf } from "../lib/driverSql.js"
import { open } from "../lib/targets.js"
import { sqlane } from "../systems/sqlane.js"
import { payload } from "../systems/types.js"

const rounds = Number(process.argv[2] ?? 4)
const seconds = Number(process.argv[3] ?? 5)
const target = await open("mariadb-10.11")
const env = { target, ns: `inscost_${process.pid}` }
await sqlane.drop(env).catch(() => {})
await sqlane.prepare(env)
const pool = Mysql.createPool({ uri: target.url, connectionLimit: 8 })
const jobs = `${env.ns}_jobs`
const noKeys = `${env.ns}_nokeys`
const espq = `${env.ns}_espq`
const floor = `${env.ns}_floor`
try {
  await pool.query(`DROP TABLE IF EXISTS ${noKeys}, ${espq}, ${floor}`)
  await pool.query(`CREATE TABLE ${noKeys} LIKE ${jobs}`)
  await pool.query(`CREATE TABLE ${floor} (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, queue VARCHAR(100) NOT NULL,
    payload LONGTEXT NOT NULL, run_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6), attempts INT NOT NULL DEFAULT 0,
    KEY ${floor}_fetch (queue, run_at, id)) ENGINE=InnoDB`)
  await pool.query(`ALTER TABLE ${noKeys} DROP KEY ${jobs}_unique, DROP KEY ${jobs}_mutex`)
  await pool.query(`CREATE TABLE ${espq} (sequence BIGINT UNSIGNED AUTO_INCREMENT PRIMARY KEY, id VARCHAR(36) NOT NULL,
    queue_name VARCHAR(100) NOT NULL, element TEXT NOT NULL, completed BOOLEAN NOT NULL, attempts INT NOT NULL DEFAULT 0,
    last_failure TEXT NULL, acquired_at DATETIME NULL, acquired_by VARCHAR(36) NULL, created_at DATETIME NOT NULL,
    updated_at DATETIME NOT NULL)`)
  await pool.query(`CREATE UNIQUE INDEX ${espq}_id ON ${espq} (id)`)
  await pool.query(`CREATE INDEX ${espq}_take ON ${espq} (queue_name, completed, attempts, acquired_at)`)
  await pool.query(`CREATE INDEX ${espq}_update ON ${espq} (sequence, acquired_by)`)

  // The one-job insert of sqlane's driver (`jobInsertMany` of one row), on either table.
  const sqlaneInsert = await statementOf<"payload" | "now">("mysql", `${env.ns}_`, (driver, slot) =>
    driver.jobInsertMany([benchRow(slot("payload"), slot("now"))], slot("now"), undefined))
  const insert = (table: string, i: number) =>
    table === floor
      ? pool.execute(`INSERT INTO ${floor} (queue, payload) VALUES (?, ?)`, ["bench", JSON.stringify(payload(i))])
      : table === espq
      ? pool.execute(
        `INSERT IGNORE INTO ${espq} (id, queue_name, element, completed, attempts, created_at, updated_at)
         VALUES (?, 'bench', ?, FALSE, 0, NOW(), NOW())`,
        [randomUUID(), JSON.stringify(payload(i))]
      )
      : pool.execute(
        table === jobs ? sqlaneInsert.text : sqlaneInsert.text.replace(`\`${jobs}\``, `\`${table}\``),
        sqlaneInsert.params({ payload: JSON.stringify(payload(i)), now: Date.now() * 1000 })
      )
  const round = async (table: string, ms: number) => {
    const end = Date.now() + ms
    let n = 0
    await Promise.all(Array.from({ length: 8 }, async () => {
      while (Date.now() < end) await insert(table, n++)
    }))
    return n / (ms / 1000)
  }
  const tables = { sqlane: jobs, "sqlane-no-keys": noKeys, espq, floor } as const
  for (const t of Object.values(tables)) await round(t, 1000)
  const results: Record<string, Array<number>> = { sqlane: [], "sqlane-no-keys": [], espq: [], floor: [] }
  for (let r = 0; r < rounds; r++) {
    for (const [id, t] of Object.entries(tables)) results[id].push(await round(t, seconds * 1000))
  }
  const median = (xs: Array<number>) => {
    const s = [...xs].sort((a, b) => a - b)
    const m = Math.floor(s.length / 2)
    return s.length % 2 === 1 ? s[m] : (s[m - 1] + s[m]) / 2
  }
  for (const [id, xs] of Object.entries(results)) {
    console.log(`${id.padEnd(15)} median ${median(xs).toFixed(0)} rows/s; rounds ${xs.map((x) => x.toFixed(0)).join(", ")}`)
  }
} finally {
  await pool.query(`DROP TABLE IF EXISTS ${noKeys}, ${espq}, ${floor}`).catch(() => {})
  await pool.end()
  await sqlane.drop(env).catch(() => {})
  await target.stop()
}
