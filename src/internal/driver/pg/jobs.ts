/**
 * PostgreSQL: the probe, the claims (plain and keyed), the ends of attempts (alone, or with a claim
 * riding on them), and the due count.
 *
 * @internal
 */
import type * as Statement from "@effect/sql/Statement"
import * as Effect from "effect/Effect"
import { isUniqueViolation, lostRace } from "../errors.js"
import type { Ahead, Finish, Group, JobsExplain, JobsOps, NameLimits, ProbeRow } from "../Driver.js"
import { allowance, heldAfter, nameRow, ratedNames, startsTaken, windowId } from "../rateWindows.js"
import { byClaimOrder, keyedWindow, nameWindow, noLimits, notHeld, num, retryKeyed, toClaimed } from "../shared.js"
import { numbers, type PgContext, texts } from "./context.js"
import * as Ends from "./ends.js"
import * as Fair from "./fairShares.js"
import * as Rates from "./rates.js"

/** The longest a keyed claim waits for a lock (ms): see `claimLockTimeout`. */
export const keyedLockTimeoutMs = 100

/** A keyed claim made in the statement that writes the ends of attempts (`jobFinishManyAndClaim`). */
interface KeyedRide {
  /** A condition on running rows `r`: left out of the slots and keys held (the rows the ends change). */
  readonly freed: Statement.Fragment
}

export const make = (ctx: PgContext): JobsOps & JobsExplain => {
  const { asyncCommit, claimedColumnsJ, claimedColumnsU, jobs, options, prefix, run, sql, ts, us } = ctx
  const windows = Rates.make(ctx)
  const { keyRateOpen } = windows
  // Every (name, priority) group with pending jobs, of any name: a loose index scan, one index
  // entry per group. The caller keeps its own names (a `name = ANY($1)` filter here costs more
  // than it saves: the array is sent and parsed on every probe).
  const probeAll = sql<{ name: string; priority: number; next_us: string }>`WITH RECURSIVE t AS (
        (SELECT name, priority, run_at FROM ${jobs} WHERE state = 'pending'
         ORDER BY name, priority, run_at LIMIT 1)
        UNION ALL
        SELECT n.name, n.priority, n.run_at FROM t CROSS JOIN LATERAL (
          SELECT j.name, j.priority, j.run_at FROM ${jobs} j
          WHERE j.state = 'pending' AND (j.name, j.priority) > (t.name, t.priority)
          ORDER BY j.name, j.priority, j.run_at LIMIT 1) n
      )
      SELECT name, priority, ${us("run_at")} AS next_us FROM t`
  // The groups of the worker's names: the same loose scan, started from each of those names, so its
  // cost follows the worker's names, not every name with pending jobs. The names come through an
  // InitPlan (`SELECT $1`), which hides the array's length from the planner: with it visible the
  // estimate grows with the names, and past a few hundred crosses `jit_above_cost` (JIT then adds
  // ~100 ms to each probe).
  const probeNames = (names: ReadonlyArray<string>) =>
    sql<{ name: string; priority: number; next_us: string }>`WITH RECURSIVE t AS (
        SELECT n.name, p.priority, p.run_at FROM unnest((SELECT ${names}::text[])) AS n(name) CROSS JOIN LATERAL (
          SELECT j.priority, j.run_at FROM ${jobs} j WHERE j.state = 'pending' AND j.name = n.name
          ORDER BY j.priority, j.run_at LIMIT 1) p
        UNION ALL
        SELECT t.name, q.priority, q.run_at FROM t CROSS JOIN LATERAL (
          SELECT j.priority, j.run_at FROM ${jobs} j
          WHERE j.state = 'pending' AND j.name = t.name AND j.priority > t.priority
          ORDER BY j.priority, j.run_at LIMIT 1) q
      )
      SELECT name, priority, ${us("run_at")} AS next_us FROM t`
  /**
   * Which form probes `names`. The per-name form costs about 2 µs per name plus 2 per group it
   * finds; the scan of every group about 6 µs per group with pending jobs, of any name (PostgreSQL
   * 15, 1,000 names; docs/performance.md, "Probe"). Up to `probeNamesMax` names the
   * per-name form always runs; above, the form with the lower cost by the last probe of the same
   * names: the groups of these names it found, and all groups as the last scan counted them (at
   * least the groups found since). A stale count only picks the slower form, never a wrong answer.
   */
  const probeNamesMax = 32
  const probeHistory = new Map<string, { readonly found: number; readonly all: number }>()
  const probeKey = (names: ReadonlyArray<string>) => `${names.length}\u0000${names[0]}\u0000${names[names.length - 1]}`
  const probePerName = (names: ReadonlyArray<string>) => {
    if (names.length <= probeNamesMax) return true
    const last = probeHistory.get(probeKey(names))
    return last !== undefined && 2 * names.length + 2 * last.found < 6 * last.all
  }
  /** `all`: the groups of every name the scan found, or undefined after a per-name probe. */
  const probeRemember = (names: ReadonlyArray<string>, found: number, all: number | undefined) => {
    if (names.length <= probeNamesMax) return
    const key = probeKey(names)
    const before = probeHistory.get(key)
    if (before === undefined && probeHistory.size >= 256) probeHistory.clear()
    probeHistory.set(key, { found, all: all ?? Math.max(found, before?.all ?? 0) })
  }
  /**
   * The paused check of a claim's arm: the group's name is not a row of `<prefix>paused` (one lookup
   * of its primary key, evaluated once per arm, before the arm reads any job: an InitPlan and a
   * one-time filter). The arm's jobs have `name = <the group's name>`, so this leaves out exactly the
   * jobs of a paused name, compared as the database compares text (what the primary key compares).
   *
   * Why this is a barrier: the whole claim (every arm of the UNION ALL, the keyed claim's CTE, the
   * claim inside `jobFinishManyAndClaim`) is one statement, and at READ COMMITTED one statement reads
   * one snapshot, the paused table included. A job enqueued after `pause` returned was inserted after
   * the pause committed, so any snapshot that shows the job also shows the pause row: no claim can
   * see such a job and miss the pause. `FOR UPDATE` re-reads a locked row's newest version only for
   * rows that were already pending in the snapshot (never a row inserted after it), and the one-time
   * filter is not evaluated again for it. So what a claim in flight when the pause commits (its
   * snapshot taken before the commit) may still take is a job that was pending before the pause
   * committed; every claim whose statement starts after the commit takes no job of that name.
   */
  const notPaused = (name: string) =>
    sql`NOT EXISTS (SELECT 1 FROM ${sql(`${prefix}paused`)} p WHERE p.name = ${name})`
  // One arm per group, with the group's name and priority as parameters (not an unnest): the
  // planner sees the values, estimates the group's size from its statistics and reads the index
  // range in order, stopping after `limit` rows, instead of fetching the whole group and sorting.
  const claimStatement = (
    groups: ReadonlyArray<Group>,
    limit: number,
    nowUs: number,
    workerId: string,
    commit: Statement.Fragment = asyncCommit
  ) => {
    const k = sql.literal(String(Math.floor(limit)))
    const arms = groups.map((g, i) =>
      sql`SELECT * FROM (
          SELECT j.id, j.priority, j.run_at FROM ${jobs} j
          WHERE j.state = 'pending' AND j.name = ${g.name} AND j.priority = ${g.priority} AND j.run_at <= ${ts(nowUs)}
            AND j.mutex_key IS NULL AND ${notPaused(g.name)}
          ORDER BY j.run_at, j.id LIMIT ${k}
          FOR UPDATE SKIP LOCKED) ${sql(`g${i}`)}`
    )
    // One group (the common case): its arm alone, already in claim order.
    const pick = arms.length === 1 ? arms[0] : sql`SELECT c.id FROM (${sql.join(" UNION ALL ", false)(arms)}) c
          ORDER BY c.priority, c.run_at, c.id LIMIT ${k}`
    return sql`UPDATE ${jobs} AS u SET state = 'running', attempts = LEAST(u.attempts, 2147483646) + 1, claimed_at = ${ts(nowUs)},
          worker_id = ${workerId}, name_slot = NULL, key_slot = NULL
        FROM (${pick}) AS pick
        WHERE u.id = pick.id${commit}
        RETURNING ${claimedColumnsU}`
  }
  /**
   * A keyed claim waits for no lock longer than `keyedLockTimeoutMs`: set for its own transaction
   * (the statement), before its update writes a slot or a mutex key (an InitPlan of the update).
   * Such an update waits on the unique index when another claim in flight wrote the same slot or
   * key; and a claim's `FOR UPDATE` that meets a row another worker claimed after the claim's
   * snapshot locks the row's newest version before it finds the row no longer pending and skips it
   * (read committed's recheck), so that worker's next write of ends may wait for the claim. Two such
   * waits make a deadlock, which PostgreSQL breaks only after `deadlock_timeout` (1 s by default);
   * measured with 2 worker processes under one concurrency limit, about one every 2 s of a drain.
   * The claim gives up instead (`lock_not_available`): tried again as a claim that lost a race for a
   * slot, and a write of ends it rode on is written alone.
   */
  const claimLockTimeout = sql.literal(
    ` AND (SELECT set_config('lock_timeout', '${keyedLockTimeoutMs}ms', true)) IS NOT NULL`
  )
  /**
   * The keyed claim's `m` under rate windows: per rated name its starts left (`name_left`, null
   * for a name without rate windows), and per concurrency key of a rated name no more of its jobs
   * than its window has left (none for a key whose window the claim did not lock).
   */
  const rateCapped = (mutexFirst: Statement.Fragment, rated: ReadonlyArray<string>, left: ReadonlyMap<string, number>) => {
    const keyRows = Array.from(left).flatMap(([id, n]) => {
      const [name, key] = id.split("\u0000")
      return key === nameRow ? [] : [{ name, key, n }]
    })
    const capped = (n: number | undefined) => (n === undefined ? null : Math.min(n, 2_147_483_647))
    return sql`rl AS (SELECT * FROM unnest(${texts(keyRows.map((r) => r.name))}::text[], ${texts(keyRows.map((r) => r.key))}::text[],
            ${numbers(keyRows.map((r) => capped(r.n)))}::bigint[]) AS r(name, rate_key, lft)),
        rn AS (SELECT * FROM unnest(${texts(rated)}::text[], ${numbers(rated.map((n) => capped(left.get(windowId(n, nameRow)) ?? 0)))}::bigint[])
          AS r(name, name_left)),
        m AS (SELECT m.*, l.running, l.per_key, rn.name_left FROM (
            SELECT m.*, row_number() OVER (PARTITION BY m.name, m.limit_key ORDER BY m.priority, m.run_at, m.id) AS rkth
            FROM (${mutexFirst}) m) m
          LEFT JOIN lim l ON l.name = m.name LEFT JOIN rn ON rn.name = m.name
          WHERE rn.name IS NULL OR m.limit_key IS NULL
            OR m.rkth <= coalesce((SELECT r.lft FROM rl r WHERE r.name = m.name AND r.rate_key = m.limit_key), 0)),`
  }
  /**
   * The parts of a keyed claim's arm for the group `g`: the filters of its jobs (mutex key free, the
   * key's and the name's slots free, the key's rate window open) and its window of due jobs.
   */
  const armParts = (
    g: Group,
    limit: number,
    nowUs: number,
    limits: ReadonlyMap<string, NameLimits>,
    rated: ReadonlyArray<string>,
    /** Running rows that no longer hold what they hold (`KeyedRide.freed`): a condition on `r`. */
    freed: Statement.Fragment = sql.literal(""),
    /** Jobs of the name may be taken without a slot (`Ahead`). */
    ahead = false
  ) => {
    const l = limits.get(g.name)
    const perKey = l?.runningPerKey
    const running = l?.running
    const keyFree = perKey === undefined ? sql.literal("") : sql`
            AND (j.limit_key IS NULL OR (SELECT count(*) FROM ${jobs} r
              WHERE r.state = 'running' AND r.key_slot IS NOT NULL AND r.name = ${g.name}
                AND r.limit_key = j.limit_key${freed}) < ${perKey})`
    /** The name's free slots, when it has a limit. */
    const nameLeft = running === undefined ? undefined : sql`(${running} - (SELECT count(*) FROM ${jobs} r
              WHERE r.state = 'running' AND r.name_slot IS NOT NULL AND r.name = ${g.name}${freed}))`
    const nameFree = nameLeft === undefined || ahead ? sql.literal("") : sql`
            AND ${nameLeft} > 0`
    const keyRate = rated.includes(g.name) ? keyRateOpen(g.name, nowUs, limits) : sql.literal("")
    const mutexFree = sql`
            AND (j.mutex_key IS NULL OR NOT EXISTS (
              -- "mutex_key IS NOT NULL" lets the planner read the running keys from the small
              -- partial index jobs_mutex instead of scanning the table.
              SELECT 1 FROM ${jobs} r
              WHERE r.state = 'running' AND r.mutex_key IS NOT NULL AND r.mutex_key = j.mutex_key${freed}))`
    const inGroup = sql`j.state = 'pending' AND j.name = ${g.name} AND j.priority = ${g.priority}`
    // A name limited only by its name's slots locks no more jobs than it has free slots.
    // A name whose jobs may be claimed ahead (no mutex keys, no key limits) locks no more than the claim takes.
    const windowSize = ahead
      ? sql.literal(String(Math.max(1, Math.floor(limit))))
      : nameLeft !== undefined && perKey === undefined && l?.fair !== true
      ? sql`LEAST(${sql.literal(nameWindow(limit, l))}, GREATEST(${nameLeft}, 0))`
      : sql.literal(keyedWindow(limit))
    const window = (keys: Statement.Fragment, filters: Statement.Fragment) =>
      sql`SELECT j.id, j.name, j.mutex_key, j.limit_key, j.priority, j.run_at FROM ${jobs} j
          WHERE ${inGroup} AND j.run_at <= ${ts(nowUs)}${keys}${mutexFree}${filters}
          ORDER BY j.run_at, j.id LIMIT ${windowSize}
          FOR UPDATE OF j SKIP LOCKED`
    return { inGroup, keyFree, keyRate, mutexFree, nameFree, window }
  }
  const fair_ = Fair.make(ctx, armParts)
  /** The ends of attempts alone, in one statement; the ends that changed nothing (`staleEnds`). */
  const finishMany = (finishes: ReadonlyArray<Finish>) => {
    const { applied, ctes, report } = finishCtes(finishes)
    return Effect.map(
      run(sql<{ applied: string | null; passed: string | null }>`WITH ${ctes} SELECT a.applied, a.passed FROM ${applied} AS a`),
      (rows) => report(rows[0])
    )
  }
  /**
   * The keyed claim: per group (of a name not paused, see `notPaused`), a window of due jobs read in
   * order from the group's index range and locked, leaving out jobs whose mutex key has a running
   * job, jobs whose concurrency key has no free slot, and (a one-time filter) every job of a name
   * with no free slot. Of the merged windows: the jobs without a mutex key and the first job of each
   * mutex key; then, per concurrency key of a limited name, as many as the key has free slots, each
   * given one; then, per limited name, as many as it has free slots, each given one; the first
   * `limit` of those in claim order.
   *
   * A limit's slots are numbered from 0 and held in the running row (`name_slot`, `key_slot`), under
   * unique indexes over running rows: a claim that picked a slot another claim committed meanwhile
   * fails on the index and is tried again (`retryKeyed`), so no instant has more running attempts than
   * slots. The free slots are the numbers below the limit that no running row holds; those looked
   * at are bounded by the jobs to place and the slots held (never a series up to the limit), and a
   * count reads only the running rows that hold a slot (the partial indexes).
   */
  const claimKeyedStatement = (
    groups: ReadonlyArray<Group>,
    limit: number,
    nowUs: number,
    workerId: string,
    limits: ReadonlyMap<string, NameLimits>,
    /** With rate windows locked (`jobClaimRated`): the starts each has left (`windowId`). */
    rateLeft?: ReadonlyMap<string, number>,
    /** Riding on the ends of attempts in the same statement. */
    ride?: KeyedRide,
    /** Jobs of limited names it may take without a slot (none with `rateLeft`). */
    ahead?: Ahead
  ) => {
    const limited = groups.some((g) => limits.has(g.name))
    const rated = rateLeft === undefined ? [] : ratedNames(groups, limits)
    const fair = groups.some((g) => limits.get(g.name)?.fair === true)
    const freed = ride?.freed ?? sql.literal("")
    const commit = ride === undefined ? asyncCommit : sql.literal("")
    const arms = groups.map((g, i) => {
      const { inGroup, keyFree, keyRate, mutexFree, nameFree, window } = armParts(
        g,
        limit,
        nowUs,
        limits,
        rated,
        freed,
        ahead?.names.has(g.name) === true
      )
      if (limits.get(g.name)?.fair === true) {
        return fair_.arm(g, i, limit, nowUs, { inGroup, window, mutexFree, once: sql`${nameFree}
            AND ${notPaused(g.name)}`, keyFilters: sql`${keyFree}${keyRate}` })
      }
      const arm = window(sql.literal(""), sql`${keyFree}${nameFree}
            AND ${notPaused(g.name)}${keyRate}`)
      // In a claim with fair shares, a group without keys takes turns as one key would.
      return fair
        ? sql`SELECT w.*, row_number() OVER (ORDER BY w.run_at, w.id) AS rnd, 0::bigint AS ord FROM (${arm}) w`
        : sql`SELECT * FROM (${arm}) ${sql(`g${i}`)}`
    })
    /**
     * The claim order of a pick: with fair shares, by turns (`rnd`); in each turn every group's first
     * job (`sub` 1: a plain name's job, a fair name's first key in its rotation), oldest group first
     * (`gat`), then every group's second, and so on — a fair name's keys in rotation order (`ord`).
     */
    const claimOrder = (t: string) =>
      sql.literal(
        fair ? `${t}.priority, ${t}.rnd, ${t}.sub, ${t}.gat, ${t}.ord, ${t}.run_at, ${t}.id` : `${t}.priority, ${t}.run_at, ${t}.id`
      )
    /** The candidates of every group; with fair shares each with its place in its group's turn and the group's age in it. */
    const candidates = fair
      ? sql`cand AS (SELECT u.*, row_number() OVER (PARTITION BY u.name, u.priority, u.rnd ORDER BY u.ord, u.run_at, u.id) AS sub,
            min(u.run_at) OVER (PARTITION BY u.name, u.priority, u.rnd) AS gat
          FROM (${sql.join(" UNION ALL ", false)(arms)}) u)`
      : sql`cand AS (${sql.join(" UNION ALL ", false)(arms)})`
    const take = sql.literal(String(Math.floor(limit)))
    // Claiming ahead (not with rate limits or fair shares, whose claims take no jobs ahead): a
    // worker whose names pass slots has no mutex keys (the unique index on running keys would
    // refuse a second job of a key all the same), so the one-per-key pass is left out.
    const capped = ahead !== undefined && rated.length === 0 && !fair
    const mutexFirst = capped ? sql`SELECT c.* FROM cand c` : sql`SELECT c.* FROM (
            SELECT c.*, row_number() OVER (PARTITION BY c.mutex_key ORDER BY c.priority, c.run_at, c.id) AS rn
            FROM cand c) c
          WHERE c.mutex_key IS NULL OR c.rn = 1`
    // Not under rate windows: their claim waits for the windows' rows in its transaction.
    const bounded = rateLeft === undefined ? claimLockTimeout : sql.literal("")
    const update = (slots: Statement.Fragment) =>
      sql`UPDATE ${jobs} AS j SET state = 'running', attempts = LEAST(j.attempts, 2147483646) + 1, claimed_at = ${ts(nowUs)},
          worker_id = ${workerId}, ${slots}
        FROM pick WHERE j.id = pick.id${bounded}${commit}
        RETURNING ${claimedColumnsJ}, j.name_slot${rateLeft === undefined ? sql.literal("") : sql.literal(", j.limit_key AS rate_limit_key")}${
          fair ? sql.literal(", j.limit_key AS fair_key, pick.ord AS fair_ord") : sql.literal("")
        }`
    if (!limited) {
      return sql`WITH cand AS (${sql.join(" UNION ALL ", false)(arms)}),
        pick AS (SELECT m.id FROM (${mutexFirst}) m ORDER BY m.priority, m.run_at, m.id LIMIT ${take})
        ${update(sql.literal("name_slot = NULL, key_slot = NULL"))}`
    }
    const names = Array.from(limits.keys())
    const aheadNames = capped ? groups.map((g) => g.name).filter((n) => ahead.names.has(n)) : []
    const perKeyLimited = groups.some((g) => limits.get(g.name)?.runningPerKey !== undefined)
    // The free slots of each (name, key) with jobs to place, numbered (`nth`): the numbers below the
    // limit that no running row holds, looked for below min(limit, slots held + jobs to place), which
    // holds enough; no more of them than the limit less the slots held (after a limit was lowered,
    // running rows may hold numbers above it).
    const freeSlots = (
      what: Statement.Fragment,
      slot: Statement.Fragment,
      from: Statement.Fragment,
      limitOf: Statement.Fragment,
      held: Statement.Fragment
    ) =>
      sql`SELECT ${what}, f.slot, f.nth FROM (${from}) x
          CROSS JOIN LATERAL (SELECT count(*) AS n FROM ${jobs} r
            WHERE r.state = 'running' AND r.${slot} IS NOT NULL AND ${held}${freed}) h
          CROSS JOIN LATERAL (
            SELECT s.slot, row_number() OVER (ORDER BY s.slot) AS nth
            FROM generate_series(0, LEAST(x.${limitOf}, x.needed + h.n) - 1) AS s(slot)
            WHERE NOT EXISTS (SELECT 1 FROM ${jobs} r
              WHERE r.state = 'running' AND r.${slot} IS NOT NULL AND ${held} AND r.${slot} = s.slot${freed})) f
          WHERE f.nth <= x.${limitOf} - h.n`
    return sql`WITH ${candidates},
        lim AS (SELECT * FROM unnest(${names}::text[], ${numbers(names.map((n) => limits.get(n)!.running ?? null))}::int[],
            ${numbers(names.map((n) => limits.get(n)!.runningPerKey ?? null))}::int[]) AS l(name, running, per_key)),
        ${rated.length === 0 ? sql`m AS (SELECT m.*, l.running, l.per_key FROM (${mutexFirst}) m LEFT JOIN lim l ON l.name = m.name),` : rateCapped(mutexFirst, rated, rateLeft!)}
        ${
      // Parts no limit of these names needs are left out: the statement is planned at each call.
      !perKeyLimited ? sql`k AS (SELECT m.*, NULL::int AS key_slot FROM m),` : sql`kfree AS (${
        freeSlots(
          sql.literal("x.name, x.limit_key"),
          sql.literal("key_slot"),
          sql.literal(
            "SELECT name, limit_key, min(per_key) AS per_key, count(*) AS needed FROM m WHERE per_key IS NOT NULL AND limit_key IS NOT NULL GROUP BY name, limit_key"
          ),
          sql.literal("per_key"),
          sql.literal("r.name = x.name AND r.limit_key = x.limit_key")
        )
      }),
        k AS (SELECT m.*, f.slot AS key_slot FROM (
            SELECT m.*, row_number() OVER (PARTITION BY m.name, m.limit_key ORDER BY m.priority, m.run_at, m.id) AS kth FROM m) m
          LEFT JOIN kfree f ON f.name = m.name AND f.limit_key = m.limit_key AND f.nth = m.kth
          WHERE m.per_key IS NULL OR m.limit_key IS NULL OR f.slot IS NOT NULL),`
    }
        nfree AS (${
      freeSlots(
        sql.literal("x.name"),
        sql.literal("name_slot"),
        sql.literal("SELECT name, min(running) AS running, count(*) AS needed FROM k WHERE running IS NOT NULL GROUP BY name"),
        sql.literal("running"),
        sql.literal("r.name = x.name")
      )
    }),
        ${
      !capped
        ? sql`pick AS (SELECT k.id, k.key_slot, f.slot AS name_slot${fair ? sql.literal(", k.ord") : sql.literal("")} FROM (
            SELECT k.*, row_number() OVER (PARTITION BY k.name ORDER BY ${claimOrder("k")}) AS nth FROM k) k
          LEFT JOIN nfree f ON f.name = k.name AND f.nth = k.nth
          WHERE (k.running IS NULL OR f.slot IS NOT NULL)${
          rated.length === 0 ? sql.literal("") : sql`
            AND (k.name_left IS NULL OR k.nth <= k.name_left)`
        }
          ORDER BY ${claimOrder("k")} LIMIT ${take})`
        // Claiming ahead: the first `ahead.slots` jobs with a free slot take it, and jobs of the
        // names in `ahead.names` are taken without one beyond that (they wait for a slot handed
        // over in the worker); jobs of other limited names without a slot are left.
        : sql`pick AS (SELECT q.id, q.key_slot, q.name_slot FROM (
            SELECT p.*, sum(CASE WHEN p.name_slot IS NULL AND p.running IS NOT NULL THEN 1 ELSE 0 END)
                OVER (ORDER BY ${claimOrder("p")} ROWS UNBOUNDED PRECEDING) AS waiting FROM (
              SELECT p.id, p.key_slot, p.running, p.name, p.priority, p.run_at,
                CASE WHEN p.slotted <= ${ahead!.slots} THEN p.name_slot END AS name_slot FROM (
                SELECT k.*, f.slot AS name_slot,
                  count(f.slot) OVER (ORDER BY ${claimOrder("k")} ROWS UNBOUNDED PRECEDING) AS slotted FROM (
                  SELECT k.*, row_number() OVER (PARTITION BY k.name ORDER BY ${claimOrder("k")}) AS nth FROM k) k
                LEFT JOIN nfree f ON f.name = k.name AND f.nth = k.nth) p
              WHERE p.running IS NULL OR (p.name_slot IS NOT NULL AND p.slotted <= ${ahead!.slots}) OR p.name = ANY(${aheadNames}::text[])) p) q
          WHERE q.running IS NULL OR q.name_slot IS NOT NULL OR q.waiting <= ${ahead!.waiting}
          ORDER BY ${claimOrder("q")} LIMIT ${take})`
    }
        ${update(sql.literal("name_slot = pick.name_slot, key_slot = pick.key_slot"))}`
  }
  const { finishCtes } = Ends.make(ctx)
  const explain = (statement: Statement.Statement<unknown>) => {
    const [text, params] = statement.compile()
    return Effect.map(
      sql.unsafe<{ "QUERY PLAN": string }>(`EXPLAIN ${text}`, params),
      (rows) => rows.map((r) => r["QUERY PLAN"])
    )
  }
  return {
    jobPendingGroups: () =>
      Effect.map(run(probeAll), (rows) => rows.map((r) => ({ name: r.name, priority: num(r.priority), nextUs: num(r.next_us) }))),
    jobProbe: (names) => {
      const perName = probePerName(names)
      return Effect.map(
        run(perName ? probeNames(names) : probeAll),
        (rows) => {
          const wanted = perName ? undefined : new Set(names)
          const groups: Array<ProbeRow> = []
          for (const r of rows) {
            if (wanted === undefined || wanted.has(r.name)) {
              groups.push({ name: r.name, priority: num(r.priority), nextUs: num(r.next_us) })
            }
          }
          probeRemember(names, groups.length, perName ? undefined : rows.length)
          return groups
        }
      )
    },
    jobClaim: (groups, limit, nowUs, workerId) =>
      Effect.map(run(claimStatement(groups, limit, nowUs, workerId)), (rows) => rows.map(toClaimed).sort(byClaimOrder)),
    /** The plan of any statement of this driver (for the plans of other areas' statements). */
    explainStatement: explain,
    explainProbe: (names) =>
      // Both forms: the one that starts from the names and the scan of every group.
      Effect.zipWith(explain(probeNames(names)), explain(probeAll), (a, b) => [...a, ...b]),
    explainClaim: (groups, limit, nowUs) => explain(claimStatement(groups, limit, nowUs, "explain")),
    explainClaimKeyed: (groups, limit, nowUs, limits = noLimits) =>
      explain(claimKeyedStatement(groups, limit, nowUs, "explain", limits)),
    jobClaimKeyed: (groups, limit, nowUs, workerId, limits = noLimits, ahead) =>
      retryKeyed(
        Effect.flatMap(run(claimKeyedStatement(groups, limit, nowUs, workerId, limits, undefined, undefined, ahead)), (rows) =>
          Effect.as(fair_.rotated(groups, limit, limits, rows), rows.map(toClaimed).sort(byClaimOrder)))
      ),
    /**
     * In one transaction: the rate windows locked (`rateLock`), the keyed claim capped by them
     * (names with no start left are not read), and the starts it took counted (`rateCount`). A
     * claim that loses a race for a slot or a mutex key rolls back (counting nothing) and is tried
     * again, up to 5 times; then it claims nothing.
     */
    jobClaimRated: (groups, limit, nowUs, workerId, limits) => {
      const names = ratedNames(groups, limits)
      const once = sql.withTransaction(Effect.gen(function*() {
        const locked = (yield* run(windows.rateLock(groups, names, keyedWindow(limit), nowUs, limits, (g) =>
          limits.get(g.name)?.fair === true ? fair_.keysRead(g, limit, nowUs, limits, names) : undefined))).map(windows.toWindowRow)
        const allowed = allowance(locked, limits, nowUs)
        const open = groups.filter((g) => !allowed.heldUntilUs.has(g.name))
        const rows = open.length === 0
          ? []
          : yield* run(claimKeyedStatement(open, limit, nowUs, workerId, limits, allowed.left))
        yield* fair_.rotated(open, limit, limits, rows)
        const taken = startsTaken(rows.map((r: any) => ({ name: r.name, key: r.rate_limit_key ?? null })), limits)
        if (taken.length > 0) yield* run(windows.rateCount(taken))
        return { claimed: rows.map(toClaimed).sort(byClaimOrder), ...heldAfter(allowed, taken, limits, nowUs, names) }
      }))
      const go = (tries: number): ReturnType<JobsOps["jobClaimRated"]> =>
        Effect.catchIf(once, isUniqueViolation, () =>
          tries >= 5 ? Effect.succeed({ claimed: [], heldUntilUs: new Map(), keyWakeUs: undefined, keyAdmitsUs: undefined }) : go(tries + 1))
      return go(1)
    },
    rateHold: (name, key, untilUs) => Effect.asVoid(run(windows.rateHold(name, key, untilUs))),
    jobCountDue: (names, nowUs, cap) =>
      Effect.map(
        sql<{ name: string; due: string }>`SELECT n.name, (SELECT count(*) FROM (
              SELECT 1 FROM ${jobs} j WHERE j.state = 'pending' AND j.name = n.name AND j.run_at <= ${ts(nowUs)}
              LIMIT ${sql.literal(String(Math.floor(cap)))}) x) AS due
            FROM unnest(${names}::text[]) AS n(name)`,
        (rows) => rows.map((r) => ({ name: r.name, due: num(r.due) }))
      ),
    jobFinishMany: finishMany,
    jobEndsNotHeld: (finishes) =>
      Effect.map(
        sql`SELECT id, attempts, state, worker_id IS NULL AS free, ${us("run_at")} AS run_at_us,
              ${us("finished_at")} AS finished_at_us
            FROM ${jobs} WHERE id = ANY(${numbers(finishes.map((f) => f.id))}::bigint[])`,
        (rows) => notHeld(finishes, rows, options.deleteCompleted === true)
      ),
    // The ends touch running rows and the claim pending ones: one snapshot, disjoint rows. The
    // claim's rows are locked while the ends are written, so a bulk update by hand can deadlock
    // with it; the transient retry runs it again. Its commit waits for the WAL flush, as the
    // ends' writes always do (no `synchronous_commit` off here).
    // The claim is a CTE too, so that the statement returns a row (the ends written) when it claims
    // nothing; it reads the paused names in the statement's one snapshot, as alone (`notPaused`).
    jobFinishManyAndClaim: (finishes, groups, limit, nowUs, workerId, keyed) => {
      const { applied, ctes, givers, report, written } = finishCtes(finishes)
      if (keyed !== undefined) {
        // One statement: the claim's snapshot still shows the rows the ends change as running, so
        // its reads of held slots and keys leave out those rows (`written`: read in full before
        // the claim's update, so they no longer hold them when it writes the slots) — but not the
        // rows whose name slot passes to a job claimed ahead (`givers`: the slot stays taken). A
        // claim that lost a race for a slot or a key fails the statement (`lostRace`): see below.
        const freed = givers === undefined
          ? sql` AND r.id NOT IN (SELECT w.id FROM ${written} AS w)`
          : sql` AND (r.id NOT IN (SELECT w.id FROM ${written} AS w) OR r.id = ANY(${givers}::bigint[]))`
        const claim = claimKeyedStatement(groups, limit, nowUs, workerId, keyed.limits, undefined, { freed }, keyed.ahead)
        const ride = Effect.flatMap(
          run(sql`WITH ${ctes}, claimed AS (${claim})
            SELECT c.*, a.applied, a.passed FROM ${applied} AS a LEFT JOIN claimed c ON true`),
          (rows) => {
            const claimed = rows.filter((r) => r.id !== null)
            // The rotation is advice: a failure to move it (after the commit) loses nothing.
            return Effect.as(Effect.ignore(fair_.rotated(groups, limit, keyed.limits, claimed)), {
              claimed: claimed.map(toClaimed).sort(byClaimOrder),
              stale: report(rows[0] as { applied: string | null; passed: string | null } | undefined)
            })
          }
        )
        // A claim that lost a race rolled the whole statement back: it runs again (a new snapshot
        // shows what the winner took), up to 5 times as on MySQL/MariaDB, then the ends alone. Written
        // alone at once, they would free every slot this worker holds, and the other workers'
        // claims take them: this worker would wait, its backlog unclaimed, until one is left to it.
        const tries = (n: number): typeof ride =>
          Effect.catchIf(ride, lostRace, () =>
            n < 5 ? tries(n + 1) : Effect.map(finishMany(finishes), (stale) => ({ claimed: [], stale })))
        return tries(1)
      }
      return Effect.map(
        run(sql`WITH ${ctes}, claimed AS (${claimStatement(groups, limit, nowUs, workerId, sql.literal(""))})
          SELECT c.*, a.applied, a.passed FROM ${applied} AS a LEFT JOIN claimed c ON true`),
        (rows) => ({
          claimed: rows.filter((r) => r.id !== null).map(toClaimed).sort(byClaimOrder),
          stale: report(rows[0] as { applied: string | null; passed: string | null } | undefined)
        })
      )
    }
  }
}
