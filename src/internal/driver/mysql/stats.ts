/**
 * MySQL/MariaDB: the per-minute stats of `<prefix>stats` — the processes' additive upserts, the read
 * of the last minutes, and the Pruner's delete of old minutes. `INSERT … ON DUPLICATE KEY UPDATE c =
 * c + VALUES(c)`, which MySQL 8.0 and MariaDB both take (MySQL 8.0.20+ deprecates `VALUES()` there
 * with a warning, and still runs it).
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import type { StatsMinuteRow, StatsOps } from "../Driver.js"
import { pickupColumns, statsAddChunked, toStatsMinuteRow } from "../shared.js"
import type { MysqlContext } from "./context.js"

/** The most rows one upsert writes (23 placeholders each: far below a prepared statement's 65,535). */
const chunk = 500


const counted = ["completed", "failed", ...pickupColumns]
const columnList = ["minute_us", "name", ...counted].join(", ")

/** `statsRead`'s statement: one range of the primary key (minute_us, name), newest first (read backwards). */
export const readStatement = (ctx: MysqlContext) => (sinceUs: number, limit: number) =>
  ctx.sql<Record<string, unknown>>`SELECT ${ctx.sql.literal(columnList)} FROM ${ctx.sql(`${ctx.prefix}stats`)}
    WHERE minute_us >= ${sinceUs}
    ORDER BY minute_us DESC, name DESC LIMIT ${ctx.sql.literal(String(Math.max(1, Math.floor(limit))))}`

export const make = (ctx: MysqlContext): StatsOps => {
  const { prefix, sql } = ctx
  const stats = sql(`${prefix}stats`)
  const columns = sql.literal(columnList)
  const additions = sql.literal(counted.map((c) => `${c} = ${c} + VALUES(${c})`).join(", "))
  const upsert = (rows: ReadonlyArray<StatsMinuteRow>) =>
    sql`INSERT INTO ${stats} (${columns}) VALUES ${
      sql.join(", ", false)(rows.map((r) =>
        sql`(${sql.join(", ", false)([r.minuteUs, r.name, r.completed, r.failed, ...pickupColumns.map((_, i) => r.pickup[i] ?? 0)].map((v) => sql`${v}`))})`
      ))
    } ON DUPLICATE KEY UPDATE ${additions}`
  return {
    statsAdd: (rows) => statsAddChunked(sql, rows, chunk, upsert),
    statsRead: (sinceUs, limit) => Effect.map(readStatement(ctx)(sinceUs, limit), (rows) => rows.map(toStatsMinuteRow)),
    // A range at the start of the primary key, in its order (so a statement-based replica deletes the
    // same rows): the rows a flush writes (the current minutes) are far from it.
    statsPrune: (cutoffUs, limit) =>
      Effect.map(
        sql`DELETE FROM ${stats} WHERE minute_us < ${cutoffUs}
          ORDER BY minute_us, name LIMIT ${sql.literal(String(Math.max(1, Math.floor(limit))))}`.raw,
        (result: any) => Number(result.affectedRows)
      )
  }
}
