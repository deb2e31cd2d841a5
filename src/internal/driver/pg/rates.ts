/**
 * PostgreSQL: the rate windows of a claim (`<prefix>rates`): their lock, the count of what a claim
 * took, the hold a handler's `RateLimited` writes, and the filter of a rated claim's arms (`make`,
 * for the claims of `jobs.ts`); and the operations on the windows outside the claims (`ops`): the
 * names' rows `sqlane status` shows, and the Pruner's deletes.
 *
 * @internal
 */
import type * as Statement from "@effect/sql/Statement"
import * as Effect from "effect/Effect"
import type { Group, NameLimits, RatesOps } from "../Driver.js"
import { keyRateBounds, nameRow, type WindowRow, windowStartUs } from "../rateWindows.js"
import { num } from "../shared.js"
import { numbers, type PgContext, texts } from "./context.js"

export const make = (ctx: PgContext) => {
  const { jobs, prefix, sql, ts } = ctx
  const rates = sql(`${prefix}rates`)
  /**
   * In a rated claim's arm (and in the read of its keys): leaves out the jobs of a concurrency key
   * whose rate window, as the statement's snapshot shows it, is held, used up, or counting a later
   * window, so that a key at its rate never fills the window its name's other keys are read from.
   * What the claim takes is capped by the locked windows, so a stale row here only leaves a job
   * for a later claim.
   */
  const keyRateOpen = (name: string, nowUs: number, limits: ReadonlyMap<string, NameLimits>) => {
    const bounds = keyRateBounds(limits, name, nowUs)
    return sql`
            AND (j.limit_key IS NULL OR NOT EXISTS (SELECT 1 FROM ${rates} r
              WHERE r.name = ${name} AND r.rate_key = j.limit_key AND (r.blocked_until_us > ${nowUs}${
      bounds === undefined ? sql.literal("") : sql`
                OR r.window_us >= ${bounds.endUs} OR (r.window_us >= ${bounds.windowUs} AND r.starts >= ${bounds.starts})`
    })))`
  }
  /**
   * Locks the rate windows of a claim of the rated `names` (their groups `groups`), first in its
   * transaction: each name's own row (with the earliest end of a hold on one of its keys) and a row per concurrency key among the first `window` due
   * jobs of each group (those `keyRateOpen` lets through), or for a name with fair shares the keys its claim reads. A row is created, or moved to the claim's
   * window (its starts set to 0) when it counts an earlier one. `INSERT … ON CONFLICT DO UPDATE`
   * locks each row and returns its newest committed values (not the statement's snapshot), so a
   * claim that waited for another's commit reads the starts that one counted. Rows are locked in
   * (name, key) order: two claims wait for each other, never in a cycle.
   */
  const rateLock = (
    groups: ReadonlyArray<Group>,
    names: ReadonlyArray<string>,
    window: string,
    nowUs: number,
    limits: ReadonlyMap<string, NameLimits>,
    /** The keys a group of a name with fair shares reads (name, limit_key), in place of its window. */
    fairKeys: (g: Group) => Statement.Fragment | undefined = () => undefined
  ): Statement.Statement<WindowRow> => {
    const windowOf = (rate: { readonly starts: number; readonly perMs: number } | undefined) =>
      rate === undefined ? 0 : windowStartUs(nowUs, rate)
    const arms = groups.filter((g) => names.includes(g.name)).map((g) =>
      fairKeys(g) ?? sql`(SELECT j.name, j.limit_key FROM ${jobs} j
          WHERE j.state = 'pending' AND j.name = ${g.name} AND j.priority = ${g.priority} AND j.run_at <= ${ts(nowUs)}
            AND j.limit_key IS NOT NULL${keyRateOpen(g.name, nowUs, limits)}
          ORDER BY j.run_at, j.id LIMIT ${sql.literal(window)})`
    )
    const nameWindows = numbers(names.map((n) => windowOf(limits.get(n)?.rate)))
    const keyWindows = numbers(names.map((n) => windowOf(limits.get(n)?.ratePerKey)))
    const statement = sql`WITH k AS (SELECT DISTINCT x.name, x.limit_key FROM (${sql.join(" UNION ALL ", false)(arms)}) x),
        w AS (SELECT n.name, ${nameRow}::text AS rate_key, n.window_us FROM unnest(${texts(names)}::text[], ${nameWindows}::bigint[]) AS n(name, window_us)
          UNION ALL
          SELECT k.name, k.limit_key, n.window_us FROM k JOIN unnest(${texts(names)}::text[], ${keyWindows}::bigint[]) AS n(name, window_us)
            ON n.name = k.name)
      INSERT INTO ${rates} AS r (name, rate_key, window_us, starts, blocked_until_us)
      SELECT w.name, w.rate_key, w.window_us, 0, NULL FROM w ORDER BY w.name, w.rate_key
      ON CONFLICT (name, rate_key) DO UPDATE SET
        starts = CASE WHEN r.window_us < EXCLUDED.window_us THEN 0 ELSE r.starts END,
        window_us = GREATEST(r.window_us, EXCLUDED.window_us)
      RETURNING r.name, r.rate_key, r.window_us, r.starts, r.blocked_until_us,
        CASE WHEN r.rate_key = ${nameRow} THEN (SELECT min(b.blocked_until_us) FROM ${rates} b
          WHERE b.name = r.name AND b.blocked_until_us > ${nowUs}::bigint AND b.rate_key <> ${nameRow}) END AS key_blocked_us`
    return statement as unknown as Statement.Statement<WindowRow>
  }
  const toWindowRow = (r: any): WindowRow => ({
    name: r.name,
    key: r.rate_key,
    windowUs: num(r.window_us),
    starts: num(r.starts),
    blockedUntilUs: r.blocked_until_us === null ? null : num(r.blocked_until_us),
    keyBlockedUs: r.key_blocked_us === null || r.key_blocked_us === undefined ? null : num(r.key_blocked_us)
  })
  /** Adds the starts a claim took to its locked windows (in the claim's transaction). */
  const rateCount = (taken: ReadonlyArray<{ readonly name: string; readonly key: string; readonly n: number }>) =>
    sql`UPDATE ${rates} AS r SET starts = r.starts + v.n
      FROM unnest(${texts(taken.map((t) => t.name))}::text[], ${texts(taken.map((t) => t.key))}::text[],
        ${numbers(taken.map((t) => t.n))}::int[]) AS v(name, rate_key, n)
      WHERE r.name = v.name AND r.rate_key = v.rate_key`
  /** `rateHold`: the row's `blocked_until_us`, the later of the one there and `untilUs`. */
  const rateHold = (name: string, key: string | null, untilUs: number) =>
    sql`INSERT INTO ${rates} AS r (name, rate_key, window_us, starts, blocked_until_us)
      VALUES (${name}, ${key ?? nameRow}, 0, 0, ${untilUs}::bigint)
      ON CONFLICT (name, rate_key) DO UPDATE SET
        blocked_until_us = GREATEST(coalesce(r.blocked_until_us, 0), EXCLUDED.blocked_until_us)`
  return { keyRateOpen, rateLock, toWindowRow, rateCount, rateHold }
}

export const ops = (ctx: PgContext): RatesOps => {
  const { prefix, sql } = ctx
  const rates = sql(`${prefix}rates`)
  return {
    rateNameList: (names) =>
      names.length === 0 ? Effect.succeed([]) : Effect.map(
        sql`SELECT r.name, r.window_us, r.starts, r.blocked_until_us FROM ${rates} r
          WHERE r.name = ANY(${texts(names)}::text[]) AND r.rate_key = ${nameRow}`,
        (rows: ReadonlyArray<any>) =>
          rows.map((r) => ({
            name: r.name,
            windowUs: num(r.window_us),
            starts: num(r.starts),
            blockedUntilUs: r.blocked_until_us === null ? null : num(r.blocked_until_us)
          }))
      ),
    // One range of the primary key (name, rate_key); the DELETE re-checks each row it locks, so a
    // claim that moved a row to a later window meanwhile keeps it.
    ratePrune: (name, cutoffUs, afterKey, limit) =>
      Effect.map(
        sql`WITH batch AS (
            SELECT b.rate_key FROM ${rates} b
            WHERE b.name = ${name}${afterKey === undefined ? sql.literal("") : sql` AND b.rate_key > ${afterKey}`}
            ORDER BY b.rate_key LIMIT ${sql.literal(String(Math.max(1, Math.floor(limit))))}
          ), gone AS (
            DELETE FROM ${rates} r USING batch
            WHERE r.name = ${name} AND r.rate_key = batch.rate_key
              AND r.window_us < ${cutoffUs}::bigint AND coalesce(r.blocked_until_us, 0) < ${cutoffUs}::bigint
            RETURNING 1
          )
          SELECT (SELECT count(*) FROM batch) AS scanned, (SELECT count(*) FROM gone) AS deleted,
            (SELECT b.rate_key FROM batch b ORDER BY b.rate_key DESC LIMIT 1) AS last_key`,
        (rows: ReadonlyArray<any>) => ({
          scanned: num(rows[0]?.scanned ?? 0),
          deleted: num(rows[0]?.deleted ?? 0),
          lastKey: rows[0]?.last_key ?? undefined
        })
      )
  }
}
