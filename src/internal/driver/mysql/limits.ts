/**
 * MySQL/MariaDB: concurrency and rate limits set at run time (`<prefix>limits`), and the slots
 * running attempts hold.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import type { LimitsOps } from "../Driver.js"
import { limitColumns, limitRowSetsAny, num, toLimitRow, toLimitUse } from "../shared.js"
import type { MysqlContext } from "./context.js"

export const make = (ctx: MysqlContext): LimitsOps => {
  const { jobs, prefix, run, sql, ts, usOf } = ctx
  const limits = sql(`${prefix}limits`)
  return {
    limitList: () =>
      Effect.map(
        sql`SELECT ${sql.literal(limitColumns)}, ${sql.literal(usOf("updated_at"))} AS updated_at_us
            FROM ${limits} ORDER BY name`,
        (rows: ReadonlyArray<any>) => rows.map(toLimitRow)
      ),
    // `VALUES(col)` in ON DUPLICATE KEY UPDATE: MariaDB and MySQL 8 both take it (MySQL 8.0.20+
    // deprecates it in favour of a row alias, which MariaDB does not take).
    // A limit left undefined keeps the row's (the columns themselves in the update), then the row
    // is read back in the same transaction.
    limitSet: (name, changes, nowUs) =>
      sql.withTransaction(Effect.gen(function*() {
        const set = (given: unknown, ...columns: ReadonlyArray<string>) =>
          columns.map((c) => `${c} = ${given === undefined ? c : `VALUES(${c})`}`).join(", ")
        yield* sql`INSERT INTO ${limits} (${sql.literal(limitColumns)}, updated_at)
            VALUES (${name}, ${changes.running ?? null}, ${changes.runningPerKey ?? null},
              ${changes.rate?.starts ?? null}, ${changes.rate?.perMs ?? null},
              ${changes.ratePerKey?.starts ?? null}, ${changes.ratePerKey?.perMs ?? null}, ${ts(nowUs)})
            ON DUPLICATE KEY UPDATE ${
          sql.literal([
            set(changes.running, "running"),
            set(changes.runningPerKey, "running_per_key"),
            set(changes.rate, "rate_starts", "rate_per_ms"),
            set(changes.ratePerKey, "rate_per_key_starts", "rate_per_key_per_ms")
          ].join(", "))
        }, updated_at = VALUES(updated_at)`
        const rows = yield* sql`SELECT ${sql.literal(limitColumns)}, ${sql.literal(usOf("updated_at"))} AS updated_at_us
            FROM ${limits} WHERE name = ${name}`
        const row = rows.length === 0 ? undefined : toLimitRow(rows[0])
        if (row === undefined || limitRowSetsAny(row)) return row
        yield* sql`DELETE FROM ${limits} WHERE name = ${name}`
        return undefined
      })),
    limitDelete: (name) =>
      Effect.map(sql`DELETE FROM ${limits} WHERE name = ${name}`.raw, (r: any) => Number(r.affectedRows) > 0),
    rateHoldsLift: (name, nowUs) =>
      Effect.map(
        sql`UPDATE ${sql(`${prefix}rates`)} SET blocked_until_us = NULL WHERE name = ${name} AND blocked_until_us > ${nowUs}`.raw,
        (r: any) => Number(r.affectedRows)
      ),
    // Per name, as `limitUse`: of its first `cap` due jobs with a key (read from the key index of
    // pending jobs, which covers them), those whose key is at its limit, read from the key slot index.
    jobCountHeldByKey: (limited, nowUs, cap) =>
      limited.length === 0 ? Effect.succeed([]) : Effect.map(
        run(sql<{ name: string; held: number }>`${
          sql.join(" UNION ALL ", false)(limited.map(({ name, perKey }) =>
            sql`SELECT ${name} AS name, (SELECT COUNT(*) FROM (
                SELECT j.limit_key FROM ${jobs} j FORCE INDEX (${sql(`${prefix}jobs_pending_key`)})
                WHERE j.state = 'pending' AND j.name = ${name} AND j.limit_key IS NOT NULL AND j.run_at <= ${ts(nowUs)}
                LIMIT ${sql.literal(String(Math.floor(cap)))}) d
              WHERE d.limit_key IN (SELECT r.limit_key_running FROM ${jobs} r FORCE INDEX (${sql(`${prefix}jobs_key_slot`)})
                WHERE r.name = ${name} AND r.limit_key_running IS NOT NULL
                GROUP BY r.limit_key_running HAVING COUNT(*) >= ${perKey})) AS held`
          ))
        }`, "unprepared"),
        (rows) => rows.map((r) => ({ name: r.name, held: num(r.held) }))
      ),
    // A statement per name, its name as a parameter in each comparison (a derived table of parameters
    // could compare under another collation on MySQL 8). Each count is one range of a slot index:
    // the running rows that hold a slot.
    limitUse: (names, keys = true) =>
      names.length === 0 ? Effect.succeed([]) : Effect.map(
        sql`${
          sql.join(" UNION ALL ", false)(names.map((name) => {
            const keyed = (what: string, tail = "") =>
              sql`SELECT ${sql.literal(what)} FROM ${jobs} r FORCE INDEX (${sql(`${prefix}jobs_key_slot`)})
                WHERE r.name = ${name} AND r.limit_key_running IS NOT NULL${sql.literal(tail)}`
            const busiest = " GROUP BY r.limit_key_running ORDER BY COUNT(*) DESC, r.limit_key_running LIMIT 1"
            return sql`SELECT ${name} AS name,
                (SELECT COUNT(*) FROM ${jobs} r FORCE INDEX (${sql(`${prefix}jobs_name_slot`)})
                  WHERE r.name_slot_running IS NOT NULL AND r.name = ${name}) AS running,
                ${keys ? sql`(${keyed("COUNT(*)")})` : sql.literal("0")} AS running_keyed,
                ${keys ? sql`(${keyed("COUNT(DISTINCT r.limit_key_running)")})` : sql.literal("0")} AS ${sql("keys")},
                ${keys ? sql`(${keyed("r.limit_key_running", busiest)})` : sql.literal("NULL")} AS busiest_key,
                ${keys ? sql`COALESCE((${keyed("COUNT(*)", busiest)}), 0)` : sql.literal("0")} AS busiest_key_running`
          }))
        }`,
        (rows: ReadonlyArray<any>) => rows.map(toLimitUse).filter((r) => r.running > 0 || r.runningKeyed > 0)
      ),
    // Three ranges of the slot and mutex indexes (their non-null entries: running rows only).
    slotsHeld: (names) =>
      Effect.map(
        sql<{ k: string; n: number | string }>`SELECT name AS k, COUNT(*) AS n
            FROM ${jobs} FORCE INDEX (${sql(`${prefix}jobs_name_slot`)}) WHERE name_slot_running IS NOT NULL GROUP BY name
          ${
          names.length === 0 ? sql.literal("") : sql`UNION ALL SELECT CONCAT('k:', name), COUNT(*)
            FROM ${jobs} FORCE INDEX (${sql(`${prefix}jobs_key_slot`)})
            WHERE name IN ${sql.in(names)} AND limit_key_running IS NOT NULL GROUP BY name`
        }
          UNION ALL SELECT 'mutex', COUNT(*) FROM ${jobs} FORCE INDEX (${sql(`${prefix}jobs_mutex`)})
            WHERE mutex_running IS NOT NULL`,
        (rows) => rows.map((r) => ({ key: String(r.k), held: Number(r.n) })).filter((r) => r.held > 0)
      )
  }
}
