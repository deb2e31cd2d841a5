/**
 * MySQL/MariaDB: the rate windows of a claim (`<prefix>rates`): their lock, the count of what a
 * claim took, the hold a handler's `RateLimited` writes, and the filter of a rated claim's reads
 * (`make`, for the claims of `jobs.ts`); and the operations on the windows outside the claims
 * (`ops`): the names' rows `sqlane status` shows, and the Pruner's deletes.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import type { NameLimits, RatesOps } from "../Driver.js"
import { keyRateBounds, nameRow, type WindowRow, type WindowWanted } from "../rateWindows.js"
import { num } from "../shared.js"
import type { MysqlContext } from "./context.js"

export const make = (ctx: MysqlContext) => {
  const { prefix, sql } = ctx
  const rates = sql(`${prefix}rates`)
  /**
   * In a rated claim's locking read: leaves out the jobs of a concurrency key whose rate window is
   * held, used up, or counting a later window, so that a key at its rate never fills the window its
   * name's other keys are read from. A window row another claim holds is skipped (SKIP LOCKED)
   * and its jobs read; what the claim takes is capped by the locked windows.
   */
  const keyRateOpen = (name: string, nowUs: number, limits: ReadonlyMap<string, NameLimits>) => {
    const bounds = keyRateBounds(limits, name, nowUs)
    return sql`
        AND (limit_key IS NULL OR NOT EXISTS (SELECT 1 FROM ${rates} r
          WHERE r.name = ${name} AND r.rate_key = j.limit_key AND (r.blocked_until_us > ${nowUs}${
      bounds === undefined ? sql.literal("") : sql`
            OR r.window_us >= ${bounds.endUs} OR (r.window_us >= ${bounds.windowUs} AND r.starts >= ${bounds.starts})`
    })))`
  }
  /**
   * Locks the window rows `wanted` (sorted: two claims wait for each other, never in a cycle), in
   * the claim's transaction after its locking reads, and reads them: an upsert that creates each
   * row or moves it to the claim's window (its starts set to 0 when it counted an earlier one),
   * which leaves each row locked (exclusive) until COMMIT; then a plain read of them (a name's row
 * with the earliest end of a hold on one of its keys). At the claim's
   * READ COMMITTED a plain read sees the newest committed rows and the transaction's own writes, and
   * no other transaction can have changed a row this one holds: the counts read are exact. The upsert
   * reads the new row's values with `VALUES()`, which MariaDB 10.11 and MySQL 8 both accept (MySQL
   * 8.0.20+ with a deprecation warning; its `AS new` row alias is not MariaDB syntax).
   */
  const rateLock = (wanted: ReadonlyArray<WindowWanted>, nowUs: number): ReadonlyArray<readonly [string, ReadonlyArray<unknown>]> => [
    sql`INSERT INTO ${rates} (name, rate_key, window_us, starts, blocked_until_us)
      VALUES ${sql.join(", ", false)(wanted.map((w) => sql`(${w.name}, ${w.key}, ${w.windowUs}, 0, NULL)`))}
      ON DUPLICATE KEY UPDATE starts = IF(window_us < VALUES(window_us), 0, starts),
        window_us = GREATEST(window_us, VALUES(window_us))`.compile(true),
    sql`SELECT name, rate_key, window_us, starts, blocked_until_us,
        CASE WHEN rate_key = ${nameRow} THEN (SELECT MIN(b.blocked_until_us) FROM ${rates} b
          WHERE b.name = a.name AND b.blocked_until_us > ${nowUs} AND b.rate_key <> ${nameRow}) END AS key_blocked_us
      FROM ${rates} a
      WHERE ${sql.join(" OR ", false)(wanted.map((w) => sql`(name = ${w.name} AND rate_key = ${w.key})`))}`.compile(true)
  ]
  const toWindowRow = (r: any): WindowRow => ({
    name: String(r.name),
    key: String(r.rate_key).replace(/ +$/, ""),
    windowUs: num(r.window_us),
    starts: num(r.starts),
    blockedUntilUs: r.blocked_until_us === null ? null : num(r.blocked_until_us),
    keyBlockedUs: r.key_blocked_us === null || r.key_blocked_us === undefined ? null : num(r.key_blocked_us)
  })
  /** Adds the starts a claim took to its locked windows (with the claim's update). */
  const rateCount = (taken: ReadonlyArray<{ readonly name: string; readonly key: string; readonly n: number }>) =>
    sql`UPDATE ${rates} SET starts = starts + CASE ${
      sql.join(" ", false)(taken.map((t) => sql`WHEN name = ${t.name} AND rate_key = ${t.key} THEN ${t.n}`))
    } ELSE 0 END
      WHERE ${sql.join(" OR ", false)(taken.map((t) => sql`(name = ${t.name} AND rate_key = ${t.key})`))}`.compile(true)
  /** `rateHold`: the row's `blocked_until_us`, the later of the one there and `untilUs`. */
  const rateHold = (name: string, key: string | null, untilUs: number) =>
    sql`INSERT INTO ${rates} (name, rate_key, window_us, starts, blocked_until_us)
      VALUES (${name}, ${key ?? nameRow}, 0, 0, ${untilUs})
      ON DUPLICATE KEY UPDATE blocked_until_us = GREATEST(COALESCE(blocked_until_us, 0), VALUES(blocked_until_us))`
  return { keyRateOpen, rateLock, toWindowRow, rateCount, rateHold }
}

export const ops = (ctx: MysqlContext): RatesOps => {
  const { prefix, sql } = ctx
  const rates = sql(`${prefix}rates`)
  return {
    // Each name a parameter in its own comparison (as `limitUse`): one primary-key lookup per name.
    rateNameList: (names) =>
      names.length === 0 ? Effect.succeed([]) : Effect.map(
        sql`SELECT name, window_us, starts, blocked_until_us FROM ${rates}
          WHERE rate_key = ${nameRow} AND (${sql.join(" OR ", false)(names.map((n) => sql`name = ${n}`))})`,
        (rows: ReadonlyArray<any>) =>
          rows.map((r) => ({
            name: String(r.name),
            windowUs: num(r.window_us),
            starts: num(r.starts),
            blockedUntilUs: r.blocked_until_us === null ? null : num(r.blocked_until_us)
          }))
      ),
    // A read of one range of the primary key, then a delete of the rows of it that qualify, each
    // row checked again as the delete locks it (a claim that moved it to a later window keeps it).
    // The key read is the cursor as stored (PAD SPACE: a key's trailing spaces are not trimmed).
    ratePrune: (name, cutoffUs, afterKey, limit) =>
      Effect.gen(function*() {
        const batch = yield* sql<{ rate_key: string }>`SELECT rate_key FROM ${rates}
          WHERE name = ${name}${afterKey === undefined ? sql.literal("") : sql` AND rate_key > ${afterKey}`}
          ORDER BY rate_key LIMIT ${sql.literal(String(Math.max(1, Math.floor(limit))))}`
        if (batch.length === 0) return { scanned: 0, deleted: 0, lastKey: undefined }
        const keys = batch.map((r) => String(r.rate_key))
        const result: any = yield* sql`DELETE FROM ${rates}
          WHERE name = ${name} AND rate_key IN ${sql.in(keys)}
            AND window_us < ${cutoffUs} AND COALESCE(blocked_until_us, 0) < ${cutoffUs}`.raw
        return { scanned: keys.length, deleted: Number(result.affectedRows), lastKey: keys[keys.length - 1] }
      })
  }
}
