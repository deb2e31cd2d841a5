/**
 * PostgreSQL: concurrency and rate limits set at run time (`<prefix>limits`), and the slots
 * running attempts hold.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import type { LimitsOps } from "../Driver.js"
import { limitColumns, limitRowSetsAny, num, toLimitRow, toLimitUse } from "../shared.js"
import { numbers, type PgContext } from "./context.js"

export const make = (ctx: PgContext): LimitsOps => {
  const { jobs, prefix, sql, ts, us } = ctx
  const limits = sql(`${prefix}limits`)
  return {
    limitList: () =>
      Effect.map(
        sql`SELECT ${sql.literal(limitColumns)}, ${us("updated_at")} AS updated_at_us FROM ${limits} ORDER BY name`,
        (rows: ReadonlyArray<any>) => rows.map(toLimitRow)
      ),
    // A limit left undefined keeps the row's (the row's own columns in the update).
    limitSet: (name, changes, nowUs) =>
      sql.withTransaction(Effect.gen(function*() {
        const set = (given: unknown, ...columns: ReadonlyArray<string>) =>
          columns.map((c) => `${c} = ${given === undefined ? "l" : "EXCLUDED"}.${c}`).join(", ")
        const rows = yield* sql`INSERT INTO ${limits} AS l (${sql.literal(limitColumns)}, updated_at)
            VALUES (${name}, ${changes.running ?? null}, ${changes.runningPerKey ?? null},
              ${changes.rate?.starts ?? null}, ${changes.rate?.perMs ?? null}::bigint,
              ${changes.ratePerKey?.starts ?? null}, ${changes.ratePerKey?.perMs ?? null}::bigint, ${ts(nowUs)})
            ON CONFLICT (name) DO UPDATE SET ${
          sql.literal([
            set(changes.running, "running"),
            set(changes.runningPerKey, "running_per_key"),
            set(changes.rate, "rate_starts", "rate_per_ms"),
            set(changes.ratePerKey, "rate_per_key_starts", "rate_per_key_per_ms")
          ].join(", "))
        }, updated_at = EXCLUDED.updated_at
            RETURNING ${sql.literal(limitColumns)}, ${us("updated_at")} AS updated_at_us`
        const row = toLimitRow(rows[0])
        if (limitRowSetsAny(row)) return row
        yield* sql`DELETE FROM ${limits} WHERE name = ${name}`
        return undefined
      })),
    limitDelete: (name) =>
      Effect.map(sql`DELETE FROM ${limits} WHERE name = ${name} RETURNING name`, (rows) => rows.length > 0),
    rateHoldsLift: (name, nowUs) =>
      Effect.map(
        sql`UPDATE ${sql(`${prefix}rates`)} SET blocked_until_us = NULL
          WHERE name = ${name} AND blocked_until_us > ${nowUs} RETURNING name`,
        (rows) => rows.length
      ),
    // Of the name's first `cap` due jobs with a key (from the pending jobs' key index, which holds
    // them: never more, whatever the backlog), those whose key is at its limit, read from the
    // running rows holding a key slot (a partial index).
    jobCountHeldByKey: (limited, nowUs, cap) =>
      limited.length === 0 ? Effect.succeed([]) : Effect.map(
        sql<{ name: string; held: string }>`SELECT n.name, (SELECT count(*) FROM (
              SELECT j.limit_key FROM ${jobs} j
              WHERE j.state = 'pending' AND j.name = n.name AND j.limit_key IS NOT NULL AND j.run_at <= ${ts(nowUs)}
              LIMIT ${sql.literal(String(Math.floor(cap)))}) d
            WHERE d.limit_key IN (SELECT r.limit_key FROM ${jobs} r
              WHERE r.state = 'running' AND r.key_slot IS NOT NULL AND r.name = n.name
              GROUP BY r.limit_key HAVING count(*) >= n.per_key)) AS held
            FROM unnest(${limited.map((l) => l.name)}::text[], ${numbers(limited.map((l) => l.perKey))}::int[]) AS n(name, per_key)`,
        (rows) => rows.map((r) => ({ name: r.name, held: num(r.held) }))
      ),
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
