/**
 * PostgreSQL: the per-minute stats of `<prefix>stats` — the processes' additive upserts, the read of
 * the last minutes, and the Pruner's delete of old minutes.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import type { StatsMinuteRow, StatsOps } from "../Driver.js"
import { num, pickupColumns, statsAddChunked, toStatsMinuteRow } from "../shared.js"
import { numbers, type PgContext } from "./context.js"

/** The most rows one upsert writes. */
const chunk = 500


const counted = ["completed", "failed", ...pickupColumns]
const columnList = ["minute_us", "name", ...counted].join(", ")

/** `statsRead`'s statement: one range of the primary key (minute_us, name), newest first (read backwards). */
export const readStatement = (ctx: PgContext) => (sinceUs: number, limit: number) =>
  ctx.sql<Record<string, unknown>>`SELECT ${ctx.sql.literal(columnList)} FROM ${ctx.sql(`${ctx.prefix}stats`)}
    WHERE minute_us >= ${sinceUs}::bigint
    ORDER BY minute_us DESC, name DESC LIMIT ${ctx.sql.literal(String(Math.max(1, Math.floor(limit))))}`

export const make = (ctx: PgContext): StatsOps => {
  const { prefix, sql } = ctx
  const stats = sql(`${prefix}stats`)
  const columns = sql.literal(columnList)
  const additions = sql.literal(counted.map((c) => `${c} = s.${c} + EXCLUDED.${c}`).join(", "))
  /** One upsert: each column as an array (one parameter), unnested into rows; a row there is added to. */
  const upsert = (rows: ReadonlyArray<StatsMinuteRow>) => {
    const counts = [
      rows.map((r) => r.completed),
      rows.map((r) => r.failed),
      ...pickupColumns.map((_, i) => rows.map((r) => r.pickup[i] ?? 0))
    ]
    return sql`INSERT INTO ${stats} AS s (${columns})
      SELECT * FROM unnest(${numbers(rows.map((r) => r.minuteUs))}::bigint[], ${rows.map((r) => r.name)}::text[], ${
      sql.join(", ", false)(counts.map((c) => sql`${numbers(c)}::int[]`))
    })
      ON CONFLICT (minute_us, name) DO UPDATE SET ${additions}`
  }
  return {
    statsAdd: (rows) => statsAddChunked(sql, rows, chunk, upsert),
    statsRead: (sinceUs, limit) => Effect.map(readStatement(ctx)(sinceUs, limit), (rows) => rows.map(toStatsMinuteRow)),
    statsPrune: (cutoffUs, limit) =>
      Effect.map(
        sql<{ n: string }>`WITH d AS (
            DELETE FROM ${stats} WHERE (minute_us, name) IN (
              SELECT minute_us, name FROM ${stats} WHERE minute_us < ${cutoffUs}::bigint
              ORDER BY minute_us, name LIMIT ${sql.literal(String(Math.max(1, Math.floor(limit))))})
            RETURNING 1)
          SELECT COUNT(*) AS n FROM d`,
        (rows) => num(rows[0]?.n ?? 0)
      )
  }
}
