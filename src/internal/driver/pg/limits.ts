/**
 * PostgreSQL: concurrency limits set at run time (`<prefix>limits`), and the slots running
 * attempts hold.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import type { LimitsOps } from "../Driver.js"
import { toLimitRow, toLimitUse } from "../shared.js"
import type { PgContext } from "./context.js"

export const make = (ctx: PgContext): LimitsOps => {
  const { jobs, prefix, sql, ts, us } = ctx
  const limits = sql(`${prefix}limits`)
  return {
    limitList: () =>
      Effect.map(
        sql`SELECT name, running, running_per_key, ${us("updated_at")} AS updated_at_us FROM ${limits} ORDER BY name`,
        (rows: ReadonlyArray<any>) => rows.map(toLimitRow)
      ),
    // A number left undefined keeps the row's (the row's own column in the update).
    limitSet: (name, running, runningPerKey, nowUs) =>
      sql.withTransaction(Effect.gen(function*() {
        const rows = yield* sql`INSERT INTO ${limits} AS l (name, running, running_per_key, updated_at)
            VALUES (${name}, ${running ?? null}, ${runningPerKey ?? null}, ${ts(nowUs)})
            ON CONFLICT (name) DO UPDATE SET
              running = ${running === undefined ? sql.literal("l.running") : sql.literal("EXCLUDED.running")},
              running_per_key = ${
          runningPerKey === undefined ? sql.literal("l.running_per_key") : sql.literal("EXCLUDED.running_per_key")
        },
              updated_at = EXCLUDED.updated_at
            RETURNING name, running, running_per_key, ${us("updated_at")} AS updated_at_us`
        const row = toLimitRow(rows[0])
        if (row.running !== null || row.runningPerKey !== null) return row
        yield* sql`DELETE FROM ${limits} WHERE name = ${name}`
        return undefined
      })),
    limitDelete: (name) =>
      Effect.map(sql`DELETE FROM ${limits} WHERE name = ${name} RETURNING name`, (rows) => rows.length > 0),
    // Each count reads one of the slot indexes (running rows holding a slot only).
    limitUse: (names) =>
      names.length === 0 ? Effect.succeed([]) : Effect.map(
        sql`SELECT n.name,
              (SELECT count(*) FROM ${jobs} r
                WHERE r.state = 'running' AND r.name_slot IS NOT NULL AND r.name = n.name) AS running,
              k.running_keyed, k.keys, b.limit_key AS busiest_key, coalesce(b.running, 0) AS busiest_key_running
            FROM unnest(${names}::text[]) AS n(name)
            CROSS JOIN LATERAL (SELECT count(*) AS running_keyed, count(DISTINCT r.limit_key) AS keys FROM ${jobs} r
              WHERE r.state = 'running' AND r.key_slot IS NOT NULL AND r.name = n.name) k
            LEFT JOIN LATERAL (SELECT r.limit_key, count(*) AS running FROM ${jobs} r
              WHERE r.state = 'running' AND r.key_slot IS NOT NULL AND r.name = n.name
              GROUP BY r.limit_key ORDER BY count(*) DESC, r.limit_key LIMIT 1) b ON true`,
        (rows: ReadonlyArray<any>) => rows.map(toLimitUse).filter((r) => r.running > 0 || r.runningKeyed > 0)
      )
  }
}
