/**
 * MySQL/MariaDB: fair shares in a keyed claim (`driver/fairShares.ts`). Before its transaction, the
 * keys it reads: per group of a name whose jobs carry a concurrency key, its keys in turn from the
 * one after the rotation's cursor, wrapping around, keeping the first `limit` with a due job, a free
 * slot and an open rate window. The claim's locking reads then read each of those keys' first due
 * jobs (`jobs.ts`); here each candidate gets its turn, and the rotation moves past what was picked.
 *
 * Each next key is one lookup of the index `jobs_pending_key` (state, name, priority, limit_key,
 * run_at, id), never a key's backlog: a loose index scan written out as statements, each setting a
 * session variable to the first key after the previous one (`ORDER BY limit_key LIMIT 1`, which
 * reads one index entry where a bound in a recursive CTE or a `MIN` over the range makes MariaDB
 * read the whole range), all in one round trip.
 *
 * @internal
 */
import type { SqlError } from "@effect/sql/SqlError"
import type * as Statement from "@effect/sql/Statement"
import * as Effect from "effect/Effect"
import * as MysqlText from "../../mysqlText.js"
import type { Group, NameLimits } from "../Driver.js"
import * as FairShares from "../fairShares.js"
import type { Candidate, Picked } from "../limitSlots.js"
import { byClaimOrder, num, toClaimed } from "../shared.js"
import { keyOf, type MysqlContext } from "./context.js"

/** A key to read, and its place in the rotation. */
export interface FairKey {
  readonly key: string
  readonly ord: number
}

/**
 * Keys walked per group at most (each one statement, twice with wrapping); a walk reads up to twice
 * the keys the claim takes jobs of (and 4 more), so that keys it passes over (nothing due, no free
 * slot) leave others to take their place.
 */
const maxKeys = 64

/** What the keys read says of each group (by index in the claim's groups). */
export interface FairRead {
  /** The keys to read, in rotation order. */
  readonly keys: ReadonlyMap<number, ReadonlyArray<FairKey>>
  /** The last key the walk passed. */
  readonly passed: ReadonlyMap<number, string>
}

export const make = (
  ctx: MysqlContext,
  keyRateOpen: (name: string, nowUs: number, limits: ReadonlyMap<string, NameLimits>) => Statement.Fragment
) => {
  const { jobs, prefix, sql, ts } = ctx
  const keyIndex = sql(`${prefix}jobs_pending_key`)
  /** Per (name, priority), how many keys its next walk reads (each one statement). */
  const widths = new Map<string, number>()
  const groupId = (g: Group) => FairShares.groupId(g.name, g.priority)
  const widthOf = (g: Group, limit: number) =>
    Math.max(1, Math.min(2 * Math.floor(limit) + 4, maxKeys, widths.get(groupId(g)) ?? maxKeys))
  /** The first key of the group `g` with pending jobs that `from` and `bound` admit. */
  const nextKey = (g: Group, from: Statement.Fragment, bound: Statement.Fragment) =>
    sql`SELECT limit_key FROM ${jobs} FORCE INDEX (${keyIndex})
      WHERE state = 'pending' AND name = ${g.name} AND priority = ${g.priority} AND ${from}${bound}
      ORDER BY limit_key LIMIT 1`
  /**
   * The statements (one round trip) that read the keys of the groups `fair` (the claim's groups,
   * by index in `groups`), the last returning rows (g, limit_key, ord): per group its keys to read,
   * in rotation order.
   */
  const keysRead = (
    groups: ReadonlyArray<Group>,
    fair: ReadonlyArray<number>,
    limit: number,
    nowUs: number,
    limits: ReadonlyMap<string, NameLimits>,
    rated: ReadonlyArray<string>,
    after: (g: Group) => string | undefined,
    /** Running jobs whose ends the claim rides on: their key slots count as free. */
    freed: ReadonlyArray<string> = []
  ): ReadonlyArray<readonly [string, ReadonlyArray<unknown>]> => {
    const statements: Array<readonly [string, ReadonlyArray<unknown>]> = []
    const selects = fair.map((gi) => {
      const g = groups[gi]
      const n = widthOf(g, limit)
      const cursor = after(g)
      const vars: Array<readonly [string, number]> = []
      /** `only`: the walk runs only while the condition holds (NULL keys otherwise). */
      const walk = (tag: string, first: Statement.Fragment, bound: Statement.Fragment, ord0: number, only?: string) => {
        for (let i = 1; i <= n; i++) {
          const v = `@sqlane_${tag}${gi}_${i}`
          const from = i === 1 ? first : sql.literal(`limit_key > @sqlane_${tag}${gi}_${i - 1}`)
          const next = nextKey(g, from, bound)
          statements.push(
            (only === undefined
              ? sql`SET ${sql.literal(v)} = (${next})`
              : sql`SET ${sql.literal(v)} = CASE WHEN ${sql.literal(only)} THEN (${next}) END`).compile(true)
          )
          vars.push([v, ord0 + i])
        }
      }
      walk("k", cursor === undefined ? sql.literal("limit_key IS NOT NULL") : sql`limit_key > ${cursor}`, sql.literal(""), 0)
      // Around to the first keys only when the walk after the cursor ran out of keys: with keys left
      // after it, the next claim goes on from there (the keys before the cursor had their turn).
      if (cursor !== undefined) {
        walk("w", sql.literal("limit_key IS NOT NULL"), sql` AND limit_key <= ${cursor}`, FairShares.wrapped, `@sqlane_k${gi}_${n} IS NULL`)
      }
      const perKey = limits.get(g.name)?.runningPerKey
      return sql`(SELECT ${gi} AS g, j.limit_key, j.ord FROM (${
        sql.join(" UNION ALL ", false)(vars.map(([v, ord]) => sql.literal(`SELECT ${v} AS limit_key, ${ord} AS ord`)))
      }) j
        -- The key's first run_at: one index entry (an EXISTS becomes a semi-join that reads the
        -- key's entries until one is due).
        WHERE j.limit_key IS NOT NULL AND (SELECT d.run_at FROM ${jobs} d FORCE INDEX (${keyIndex})
          WHERE d.state = 'pending' AND d.name = ${g.name} AND d.priority = ${g.priority} AND d.limit_key = j.limit_key
          ORDER BY d.run_at LIMIT 1) <= ${ts(nowUs)}${
        perKey === undefined ? sql.literal("") : sql`
          AND (SELECT COUNT(*) FROM ${jobs} r FORCE INDEX (${sql(`${prefix}jobs_key_slot`)})
            WHERE r.name = ${g.name} AND r.limit_key_running = j.limit_key${
          freed.length === 0 ? sql.literal("") : sql` AND r.id NOT IN ${sql.in(freed)}`
        }) < ${perKey}`
      }${rated.includes(g.name) ? keyRateOpen(g.name, nowUs, limits) : sql.literal("")}
        ORDER BY j.ord LIMIT ${sql.literal(String(Math.max(1, Math.floor(limit))))})
        UNION ALL
        SELECT ${gi}, COALESCE(${sql.literal(vars.map(([v]) => v).reverse().join(", "))}), -(${
        sql.literal(vars.map(([v]) => `(${v} IS NOT NULL)`).join(" + "))
      })`
    })
    statements.push(sql`${sql.join(" UNION ALL ", false)(selects)}`.compile(true))
    return statements
  }
  /**
   * Per group (by index in `groups`), from `keysRead`'s last result set: its keys to read in
   * rotation order, and the last key its walk passed (undefined: none), so that a claim that takes
   * no job of them still moves the rotation past keys with no free slot. Each group's next walk is
   * sized by this one: about twice the keys found, doubled while a walk is cut short.
   */
  const keysOf = (groups: ReadonlyArray<Group>, limit: number, rows: ReadonlyArray<any>): FairRead => {
    const keys = new Map<number, Array<FairKey>>()
    const passed = new Map<number, string>()
    for (const r of rows) {
      const g = num(r.g)
      const ord = num(r.ord)
      if (ord <= 0) {
        // The walk's row: how many keys it found (negated), and the last.
        const found = -ord
        const width = widthOf(groups[g], limit)
        widths.set(groupId(groups[g]), found >= width ? width * 2 : found + 2)
        if (r.limit_key !== null && r.limit_key !== undefined) passed.set(g, String(r.limit_key))
        continue
      }
      let list = keys.get(g)
      if (list === undefined) keys.set(g, list = [])
      list.push({ key: String(r.limit_key), ord })
    }
    for (const list of keys.values()) list.sort((a, b) => a.ord - b.ord)
    return { keys, passed }
  }
  /** For EXPLAIN: a step of the walk over the keys of `g`, and the read of the keys found (without them). */
  const explainable = (
    groups: ReadonlyArray<Group>,
    fair: ReadonlyArray<number>,
    limit: number,
    nowUs: number,
    limits: ReadonlyMap<string, NameLimits>
  ): ReadonlyArray<Statement.Statement<unknown>> => {
    if (fair.length === 0) return []
    const reads = keysRead(groups, fair, limit, nowUs, limits, [], () => "")
    return [
      ...fair.map((gi) => nextKey(groups[gi], sql`limit_key > ${""}`, sql` AND limit_key <= ${"~"}`)),
      sql.unsafe(reads[reads.length - 1][0], reads[reads.length - 1][1] as Array<unknown>)
    ]
  }
  const fairCursors = FairShares.make()
  /**
   * Fair shares: the keys to read of the claim's groups of names with a concurrency key (by index
   * in `groups`), read in a round trip before the claim's transaction (`mysql/fairShares.ts`);
   * undefined when no group has fair shares.
   */
  const readFairKeys = (
    groups: ReadonlyArray<Group>,
    limit: number,
    nowUs: number,
    limits: ReadonlyMap<string, NameLimits>,
    rated: ReadonlyArray<string>,
    /** Running jobs whose ends the claim rides on (their key slots count as free). */
    freed: ReadonlyArray<string> = []
  ): Effect.Effect<FairRead | undefined, SqlError> => {
    const fair = groups.flatMap((g, i) => (limits.get(g.name)?.fair === true ? [i] : []))
    if (fair.length === 0) return Effect.succeed(undefined)
    const statements = keysRead(groups, fair, limit, nowUs, limits, rated, (g) => fairCursors.after(g.name, g.priority), freed)
    return Effect.scoped(Effect.flatMap(sql.reserve, (conn) =>
      Effect.map(
        conn.executeUnprepared(statements.map(([q]) => q).join("; "), MysqlText.values(statements.flatMap(([, p]) => p)), undefined),
        (results) => keysOf(groups, limit, (results[results.length - 1] ?? []) as ReadonlyArray<any>)
      )))
  }
  /**
   * The candidates of a keyed claim, from its groups' locked rows; with fair shares each with its
   * turn: in a group of a name with fair shares, its place among its key's rows (the rows without a
   * key as one key) and its key's place in the rotation; in another group, its place in the group.
   */
  const candidatesOf = (
    groups: ReadonlyArray<Group>,
    sets: ReadonlyArray<ReadonlyArray<any>>,
    limits: ReadonlyMap<string, NameLimits>,
    fair: FairRead | undefined
  ): Array<Candidate> =>
    sets.flatMap((set, i) => {
      const rows = set.map((row): Candidate => ({ claimed: toClaimed(row), mutexKey: keyOf(row.mutex_key), limitKey: keyOf(row.limit_key) }))
      if (fair === undefined) return rows
      const rotated = limits.get(groups[i].name)?.fair === true
      const ords = new Map((fair.keys.get(i) ?? []).map((k) => [keyOf(k.key), k.ord]))
      const turns = new Map<string | null, number>()
      const placed = rows.sort((a, b) => byClaimOrder(a.claimed, b.claimed)).map((c) => {
        const key = rotated ? c.limitKey : null
        const rnd = (turns.get(key) ?? 0) + 1
        turns.set(key, rnd)
        return { c: key === null ? c : { ...c, claimed: { ...c.claimed, fairKey: key } }, rnd, ord: key === null ? 0 : ords.get(key) ?? 0 }
      })
      // Per turn of this group: each job's place in it (by its key's place in the rotation, then
      // claim order) and the turn's oldest run_at.
      const ofTurn = new Map<number, Array<(typeof placed)[number]>>()
      for (const p of placed) {
        const list = ofTurn.get(p.rnd)
        if (list === undefined) ofTurn.set(p.rnd, [p])
        else list.push(p)
      }
      return Array.from(ofTurn.values()).flatMap((list) => {
        list.sort((a, b) => a.ord - b.ord || byClaimOrder(a.c.claimed, b.c.claimed))
        const gatUs = Math.min(...list.map((p) => p.c.claimed.runAtUs))
        return list.map((p, i): Candidate => ({ ...p.c, turn: { rnd: p.rnd, sub: i + 1, gatUs, ord: p.ord } }))
      })
    })
  /**
   * Moves the rotations of fair shares past the keys of the jobs picked; a group that had none
   * picked past the last key its walk passed (keys with no free slot, or whose jobs were locked).
   */
  const rotate = (
    groups: ReadonlyArray<Group>,
    fair: FairRead,
    candidates: ReadonlyArray<Candidate>,
    picked: ReadonlyArray<Picked>
  ) => {
    const ord = new Map(candidates.map((c) => [c.claimed.id, c.turn?.ord ?? 0]))
    const moved = fairCursors.remember(
      picked.map((p) => ({ name: p.name, priority: p.priority, key: p.limitKey, ord: ord.get(p.id) ?? 0 }))
    )
    for (const [i, key] of fair.passed) {
      const g = groups[i]
      if (!moved.has(FairShares.groupId(g.name, g.priority))) fairCursors.remember([{ name: g.name, priority: g.priority, key, ord: 1 }])
    }
  }
  return { candidatesOf, explainable, readFairKeys, rotate }
}
