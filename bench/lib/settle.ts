/**
 * What a server with autovacuum would have done between a preload and the work that follows it:
 * statistics for the planner, and the preload's dirty pages written out. After every preload the
 * scenarios call `settle` for the measurement's namespace, for every system alike:
 * - PostgreSQL: `ANALYZE` of every table whose schema or name starts with `${ns}_`, then `CHECKPOINT`;
 * - MySQL/MariaDB: `ANALYZE TABLE` of every table of the database whose name starts with `${ns}_`.
 * Without it a claim whose plan depends on statistics (a peer's, or the hand-written floor's) is
 * planned for a table the planner takes to be nearly empty; the `burst-c50` scenario keeps that
 * order on purpose (see docs/performance.md).
 */
import { admin } from "./targets.js"
import type { Env } from "../systems/types.js"

/** The tables of namespace `ns`, qualified and quoted for the dialect. */
export const namespaceTables = async (env: Env): Promise<ReadonlyArray<string>> => {
  const a = admin(env.target)
  const prefix = `${env.ns}_`
  try {
    if (env.target.dialect === "pg") {
      const rows = await a.query(
        `SELECT format('%I.%I', n.nspname, c.relname) AS t FROM pg_class c
         JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE c.relkind IN ('r', 'p')
           AND (starts_with(n.nspname, $1) OR (n.nspname = current_schema() AND starts_with(c.relname, $1)))
         ORDER BY 1`,
        [prefix]
      )
      return rows.map((r) => String(r.t))
    }
    const rows = await a.query(
      `SELECT table_name AS t FROM information_schema.tables
       WHERE table_schema = DATABASE() AND table_type = 'BASE TABLE' AND LEFT(table_name, ?) = ?
       ORDER BY 1`,
      [prefix.length, prefix]
    )
    return rows.map((r) => `\`${String(r.t)}\``)
  } finally {
    await a.close()
  }
}

/** `ANALYZE` (and on PostgreSQL `CHECKPOINT`) for the tables of `env.ns`; returns the tables. */
export const settle = async (env: Env): Promise<ReadonlyArray<string>> => {
  const tables = await namespaceTables(env)
  const a = admin(env.target)
  try {
    if (env.target.dialect === "pg") {
      if (tables.length > 0) await a.query(`ANALYZE ${tables.join(", ")}`)
      await a.query("CHECKPOINT")
    } else if (tables.length > 0) {
      // A table it could not analyze is a row of the result, not an error.
      const rows = await a.query(`ANALYZE TABLE ${tables.join(", ")}`)
      const failed = rows.filter((r) => String(r.Msg_type).toLowerCase() === "error")
      if (failed.length > 0) throw new Error(`ANALYZE TABLE: ${failed.map((r) => `${r.Table}: ${r.Msg_text}`).join("; ")}`)
    }
    return tables
  } finally {
    await a.close()
  }
}
