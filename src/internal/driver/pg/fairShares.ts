/**
 * PostgreSQL: fair shares in a keyed claim (`driver/fairShares.ts`). For a group of a name whose
 * jobs carry a concurrency key, the claim's arm reads its keys in turn from the one after the
 * rotation's cursor, wrapping around when the keys after it run out — each next key one lookup of
 * the index `jobs_pending_key` (a loose index scan, never a key's backlog), at most `walkSteps` of
 * them — keeping the first `limit` keys with a due job, a free slot and an open rate window; then of
 * each such key its first due jobs, locked.
 *
 * @internal
 */
import type * as Statement from "@effect/sql/Statement"
import * as Effect from "effect/Effect"
import type { SqlError } from "@effect/sql/SqlError"
import type { Group, NameLimits } from "../Driver.js"
import * as FairShares from "../fairShares.js"
import { keyedWindow, num } from "../shared.js"
import type { PgContext } from "./context.js"

/** What a keyed claim's arm is made of (`jobs.ts`). */
export interface ArmParts {
  /** The group's pending jobs (`j`). */
  readonly inGroup: Statement.Fragment
  /** A key's free slots (of `j.limit_key`). */
  readonly keyFree: Statement.Fragment
  /** A key's open rate window (of `j.limit_key`). */
  readonly keyRate: Statement.Fragment
  readonly mutexFree: Statement.Fragment
  /** The group's window of due jobs, with more conditions. */
  readonly window: (keys: Statement.Fragment, filters: Statement.Fragment) => Statement.Fragment
}

/** Keys walked per group and claim at most: about four times the jobs it takes. */
const walkSteps = (limit: number) => Math.min(1000, 4 * Math.floor(limit) + 64)

export const make = (
  ctx: PgContext,
  armParts: (
    g: Group,
    limit: number,
    nowUs: number,
    limits: ReadonlyMap<string, NameLimits>,
    rated: ReadonlyArray<string>
  ) => ArmParts
) => {
  const { jobs, run, sql, ts } = ctx
  const cursors = FairShares.make()
  /**
   * The keys of `g` a claim reads, as a `WITH RECURSIVE` whose last CTE `kf` holds them (limit_key,
   * ord): the walk after the cursor (`ka`) and, once it runs out, from the first key up to the
   * cursor (`kb`); keys kept when due and admitted by `keyFilters` and `once`, at most `limit`.
   */
  const keyWalk = (
    g: Group,
    limit: number,
    nowUs: number,
    inGroup: Statement.Fragment,
    keyFilters: Statement.Fragment,
    once: Statement.Fragment
  ) => {
    const after = cursors.after(g.name, g.priority)
    const steps = walkSteps(limit)
    const keys = (cte: string, first: number, bound: Statement.Fragment) => {
      const t = sql.literal(cte)
      return sql`${t}(limit_key, ord) AS (
            (SELECT j.limit_key, ${sql.literal(String(first))}::bigint FROM ${jobs} j
              WHERE ${inGroup} AND ${cte === "ka" && after !== undefined ? sql`j.limit_key > ${after}` : sql.literal("j.limit_key IS NOT NULL")}${bound}
              ORDER BY j.limit_key LIMIT 1)
            UNION ALL
            SELECT (SELECT j.limit_key FROM ${jobs} j
                WHERE ${inGroup} AND j.limit_key > ${t}.limit_key${bound} ORDER BY j.limit_key LIMIT 1), ${t}.ord + 1
              FROM ${t} WHERE ${t}.limit_key IS NOT NULL AND ${t}.ord < ${sql.literal(String(first + steps - 1))})`
    }
    // Around to the first keys only when the walk after the cursor ran out of keys (not when it
    // was cut short: the next claim goes on from where it stopped).
    const walked = after === undefined
      ? sql.literal("SELECT * FROM ka")
      : sql.literal(`SELECT * FROM ka UNION ALL SELECT * FROM kb WHERE NOT EXISTS (SELECT 1 FROM ka WHERE ka.ord >= ${steps})`)
    return sql`WITH RECURSIVE ${keys("ka", 1, sql.literal(""))}${
      after === undefined ? sql.literal("") : sql`,
          ${keys("kb", FairShares.wrapped, sql` AND j.limit_key <= ${after}`)}`
    },
          kf AS (SELECT j.limit_key, j.ord FROM (${walked}) j
            -- The key's first run_at, one index entry (a subquery with LIMIT: the planner never
            -- turns it into a join over the group's due jobs, as it may an EXISTS). See ofKey.
            WHERE j.limit_key IS NOT NULL AND (SELECT d.run_at FROM ${jobs} d
              WHERE d.state = 'pending' AND d.name = ${g.name} AND d.priority = ${g.priority} AND ${ofKey("d", "j")}
              ORDER BY d.limit_key, d.run_at LIMIT 1) <= ${ts(nowUs)}${keyFilters}${once}
            LIMIT ${sql.literal(String(Math.floor(limit)))})`
  }
  /**
   * The rows of `t` with the key of `k`, read in (key, run_at) order: written as a range, not an
   * equality, so that the order by key stays in the plan and only the key index gives it without
   * a sort. With `=` the planner drops the key from the order, and where its statistics say one
   * key holds most jobs it reads the group's index in run_at order instead, past that backlog.
   */
  const ofKey = (t: string, k: string) => sql.literal(`${t}.limit_key >= ${k}.limit_key AND ${t}.limit_key <= ${k}.limit_key`)
  /**
   * A group's arm in a claim with fair shares: its keys (`keyWalk`), then of each its first due
   * jobs, locked: twice its equal share of the claim (at most `limit`), so that keys with fewer due
   * jobs than their share leave the rest to the others. Each job comes with its turn (`rnd`: 1 for
   * a key's first job) and its key's place in the rotation (`ord`). The name's jobs without a key
   * (the index holds none of them) take turns as one key, from among the group's first due jobs in
   * `run_at` order (a window, as the claim without fair shares reads): never read past a backlog,
   * they wait for its head to reach them.
   */
  const arm = (
    g: Group,
    i: number,
    limit: number,
    nowUs: number,
    parts: {
      readonly inGroup: Statement.Fragment
      readonly window: ArmParts["window"]
      readonly mutexFree: Statement.Fragment
      /** Filters that hold for the whole group (the name's free slots, not paused). */
      readonly once: Statement.Fragment
      /** Filters of a key (its free slots, its rate window), of `j.limit_key`. */
      readonly keyFilters: Statement.Fragment
    }
  ) => {
    const n = sql.literal(String(Math.floor(limit)))
    return sql`SELECT * FROM (
        ${keyWalk(g, limit, nowUs, parts.inGroup, parts.keyFilters, parts.once)}
        SELECT c.*, row_number() OVER (PARTITION BY c.limit_key ORDER BY c.run_at, c.id) AS rnd, kf.ord
        FROM kf CROSS JOIN LATERAL (
          SELECT j.id, j.name, j.mutex_key, j.limit_key, j.priority, j.run_at FROM ${jobs} j
          WHERE ${parts.inGroup} AND ${ofKey("j", "kf")} AND j.run_at <= ${ts(nowUs)}${parts.mutexFree}
          ORDER BY j.limit_key, j.run_at, j.id LIMIT (SELECT least(${n}, (2 * ${n} + count(*) - 1) / greatest(count(*), 1)) FROM kf)
          FOR UPDATE OF j SKIP LOCKED) c
        UNION ALL
        SELECT w.*, row_number() OVER (ORDER BY w.run_at, w.id) AS rnd, 0::bigint AS ord
        FROM (${
      parts.window(
        sql`
            AND j.limit_key IS NULL AND j.id IN (SELECT h.id FROM (SELECT h.id, h.limit_key FROM ${jobs} h
                WHERE h.state = 'pending' AND h.name = ${g.name} AND h.priority = ${g.priority} AND h.run_at <= ${ts(nowUs)}
                ORDER BY h.run_at, h.id LIMIT ${sql.literal(keyedWindow(limit))}) h
              WHERE h.limit_key IS NULL)`,
        parts.once
      )
    }) w) ${sql(`g${i}`)}`
  }
  /** The keys a rated claim of `g` reads (name, limit_key), for the windows it locks first. */
  const keysRead = (g: Group, limit: number, nowUs: number, limits: ReadonlyMap<string, NameLimits>, rated: ReadonlyArray<string>) => {
    const parts = armParts(g, limit, nowUs, limits, rated)
    return sql`(SELECT ${g.name}::text AS name, x.limit_key FROM (
        ${keyWalk(g, limit, nowUs, parts.inGroup, sql`${parts.keyFree}${parts.keyRate}`, sql.literal(""))}
        SELECT kf.limit_key FROM kf) x)`
  }
  /** The last key of `g` the walk after the cursor passes (none: undefined). */
  const lastWalked = (g: Group, limit: number) => {
    const { inGroup } = armParts(g, limit, 0, new Map(), [])
    const after = cursors.after(g.name, g.priority)
    return Effect.map(
      run(sql<{ limit_key: string }>`WITH RECURSIVE ka(limit_key, ord) AS (
            (SELECT j.limit_key, 1 FROM ${jobs} j
              WHERE ${inGroup} AND ${after === undefined ? sql.literal("j.limit_key IS NOT NULL") : sql`j.limit_key > ${after}`}
              ORDER BY j.limit_key LIMIT 1)
            UNION ALL
            SELECT (SELECT j.limit_key FROM ${jobs} j WHERE ${inGroup} AND j.limit_key > ka.limit_key ORDER BY j.limit_key LIMIT 1), ka.ord + 1
              FROM ka WHERE ka.limit_key IS NOT NULL AND ka.ord < ${sql.literal(String(walkSteps(limit)))})
          SELECT limit_key FROM ka WHERE limit_key IS NOT NULL ORDER BY ord DESC LIMIT 1`),
      (rows) => (rows.length === 0 ? undefined : rows[0].limit_key)
    )
  }
  /**
   * Moves the rotations past the keys a claim took jobs of (`rows`, with `fair_key` and `fair_ord`);
   * a group of a name with fair shares that got none of them moves past the keys its walk passed
   * (nothing due, no free slot, or locked by other claims), so that keys beyond the walk's reach
   * get their turn.
   */
  const rotated = (
    groups: ReadonlyArray<Group>,
    limit: number,
    limits: ReadonlyMap<string, NameLimits>,
    rows: ReadonlyArray<any>
  ): Effect.Effect<void, SqlError> =>
    Effect.gen(function*() {
      const moved = cursors.remember(
        rows.filter((r) => r.fair_ord !== undefined)
          .map((r) => ({ name: r.name, priority: num(r.priority), key: r.fair_key ?? null, ord: num(r.fair_ord) }))
      )
      for (const g of groups) {
        if (limits.get(g.name)?.fair !== true || moved.has(FairShares.groupId(g.name, g.priority))) continue
        const key = yield* lastWalked(g, limit)
        if (key !== undefined) cursors.remember([{ name: g.name, priority: g.priority, key, ord: 1 }])
      }
    })
  return { arm, keysRead, rotated }
}
