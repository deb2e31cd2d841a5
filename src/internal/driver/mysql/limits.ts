/**
 * MySQL/MariaDB: concurrency limits set at run time (`<prefix>limits`), and the slots running
 * attempts hold.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import type { LimitsOps } from "../Driver.js"
import { toLimitRow, toLimitUse } from "../shared.js"
import type { MysqlContext } from "./context.js"

export const make = (ctx: MysqlContext): LimitsOps => {
  const { jobs, prefix, sql, ts, usOf } = ctx
  const limits = sql(`${prefix}limits`)
  return {
    limitList: () =>
      Effect.map(
        sql`SELECT name, running, running_per_key, ${sql.literal(usOf("updated_at"))} AS updated_at_us
            FROM ${limits} ORDER BY name`,
        (rows: ReadonlyArray<any>) => rows.map(toLimitRow)
      ),
    // `VALUES(col)` in ON DUPLICATE KEY UPDATE: MariaDB and MySQL 8 both take it (MySQL 8.0.20+
    // deprecates it in favour of a row alias, which MariaDB does not take).
    limitSet: (name, running, runningPerKey, nowUs) =>
      Effect.asVoid(
        sql`INSERT INTO ${limits} (name, running, running_per_key, updated_at)
            VALUES (${name}, ${running}, ${runningPerKey}, ${ts(nowUs)})
            ON DUPLICATE KEY UPDATE running = VALUES(running), running_per_key = VALUES(running_per_key),
              updated_at = VALUES(updated_at)`
      ),
    limitDelete: (name) =>
      Effect.map(sql`DELETE FROM ${limits} WHERE name = ${name}`.raw, (r: any) => Number(r.affectedRows) > 0),
    // The slots are the leading columns of their indexes: each read is the range of running slots.
    limitUse: (names) =>
      names.length === 0 ? Effect.succeed([]) : Effect.map(
        sql`SELECT n.name,
              (SELECT COUNT(*) FROM ${jobs} r WHERE r.name_slot_running IS NOT NULL AND r.name = n.name) AS running,
              (SELECT COUNT(*) FROM ${jobs} r WHERE r.key_slot_running IS NOT NULL AND r.name = n.name) AS running_keyed,
              (SELECT COUNT(DISTINCT r.limit_key) FROM ${jobs} r
                WHERE r.key_slot_running IS NOT NULL AND r.name = n.name) AS ${sql("keys")},
              (SELECT r.limit_key FROM ${jobs} r WHERE r.key_slot_running IS NOT NULL AND r.name = n.name
                GROUP BY r.limit_key ORDER BY COUNT(*) DESC, r.limit_key LIMIT 1) AS busiest_key,
              COALESCE((SELECT COUNT(*) FROM ${jobs} r WHERE r.key_slot_running IS NOT NULL AND r.name = n.name
                GROUP BY r.limit_key ORDER BY COUNT(*) DESC, r.limit_key LIMIT 1), 0) AS busiest_key_running
            FROM (${sql.join(" UNION ALL ", false)(names.map((name) => sql`SELECT ${name} AS name`))}) n`,
        (rows: ReadonlyArray<any>) => rows.map(toLimitUse).filter((r) => r.running > 0 || r.runningKeyed > 0)
      )
  }
}
