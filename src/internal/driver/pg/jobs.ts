/**
 * PostgreSQL: the probe, the claims (plain and keyed), the ends of attempts (alone, or with a claim
 * riding on them), and the due count.
 *
 * @internal
 */
import type * as Statement from "@effect/sql/Statement"
import * as Effect from "effect/Effect"
import type { Explain, Finish, Group, JobsOps, ProbeRow } from "../Driver.js"
import { byClaimOrder, keyedWindow, notHeld, num, retryKeyed, splitEnds, staleEnds, toClaimed } from "../shared.js"
import { numbers, type PgContext, texts } from "./context.js"

export const make = (ctx: PgContext): JobsOps & Explain => {
  const { asyncCommit, claimedColumnsJ, claimedColumnsU, jobs, options, prefix, run, sql, ts, us } = ctx
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
          worker_id = ${workerId}
        FROM (${pick}) AS pick
        WHERE u.id = pick.id${commit}
        RETURNING ${claimedColumnsU}`
  }
  // The keyed claim: per group (of a name not paused, see `notPaused`), a window of due jobs whose
  // key (if any) has no running job, read in order from the group's index range and locked; of the
  // merged windows, the jobs without a key and the first job of each key, in claim order; the
  // first `limit` of those.
  const claimKeyedStatement = (groups: ReadonlyArray<Group>, limit: number, nowUs: number, workerId: string) => {
    const w = sql.literal(keyedWindow(limit))
    const arms = groups.map((g, i) =>
      sql`SELECT * FROM (
          SELECT j.id, j.mutex_key, j.priority, j.run_at FROM ${jobs} j
          WHERE j.state = 'pending' AND j.name = ${g.name} AND j.priority = ${g.priority} AND j.run_at <= ${ts(nowUs)}
            AND (j.mutex_key IS NULL OR NOT EXISTS (
              -- "mutex_key IS NOT NULL" lets the planner read the running keys from the small
              -- partial index jobs_mutex instead of scanning the table.
              SELECT 1 FROM ${jobs} r
              WHERE r.state = 'running' AND r.mutex_key IS NOT NULL AND r.mutex_key = j.mutex_key))
            AND ${notPaused(g.name)}
          ORDER BY j.run_at, j.id LIMIT ${w}
          FOR UPDATE OF j SKIP LOCKED) ${sql(`g${i}`)}`
    )
    return sql`WITH cand AS (${sql.join(" UNION ALL ", false)(arms)}),
        pick AS (
          SELECT c.id FROM (
            SELECT id, mutex_key, priority, run_at,
              row_number() OVER (PARTITION BY mutex_key ORDER BY priority, run_at, id) AS rn
            FROM cand) c
          WHERE c.mutex_key IS NULL OR c.rn = 1
          ORDER BY c.priority, c.run_at, c.id
          LIMIT ${sql.literal(String(Math.floor(limit)))}
        )
        UPDATE ${jobs} AS j SET state = 'running', attempts = LEAST(j.attempts, 2147483646) + 1, claimed_at = ${ts(nowUs)},
          worker_id = ${workerId}
        FROM pick WHERE j.id = pick.id${asyncCommit}
        RETURNING ${claimedColumnsJ}`
  }
  // The ends of attempts, guarded by id, attempt and state: a stale attempt changes nothing.
  /**
   * The ends of attempts, as common table expressions for a `WITH` (data-modifying statements must
   * be at its top level): `ended`, an update; with `deleteCompleted`, `removed` deletes the rows of
   * completed jobs instead (those not `keep`, see `Finish`), and `ended` updates the others, if any.
   * Both return the (id, attempt) of the ends they wrote; `applied` is a one-row subquery over them:
   * its column `applied` is null when every end was written, else those ends as `id:attempt,…`
   * (read with `staleEnds`).
   */
  const finishCtes = (finishes: ReadonlyArray<Finish>) => {
    const { removed, rest } = splitEnds(finishes, options.deleteCompleted === true)
    const ended = () => sql`ended AS (${finishUpdate(rest)})`
    const remove = () => sql`removed AS (DELETE FROM ${jobs} AS j
        USING unnest(${numbers(removed.map((f) => f.id))}::bigint[], ${numbers(removed.map((f) => f.attempt))}::int[])
          AS v(id, attempt)
        WHERE j.id = v.id AND j.attempts = v.attempt AND j.state = 'running'
        RETURNING v.id, v.attempt)`
    const ctes = removed.length === 0 ? ended() : rest.length === 0 ? remove() : sql`${remove()}, ${ended()}`
    const written = removed.length === 0
      ? sql.literal("ended")
      : rest.length === 0
      ? sql.literal("removed")
      : sql.literal("(SELECT id, attempt FROM removed UNION ALL SELECT id, attempt FROM ended)")
    // One row: null when every end was written (the common case), else the ends written.
    const applied = sql`(SELECT CASE WHEN count(*) < ${sql.literal(String(finishes.length))}
        THEN (SELECT coalesce(string_agg(w.id::text || ':' || w.attempt::text, ','), '') FROM ${written} AS w) END
        AS applied FROM ${written} AS e)`
    return { ctes, applied }
  }
  const finishUpdate = (finishes: ReadonlyArray<Finish>) =>
    sql`UPDATE ${jobs} AS j SET
        state = CASE WHEN v.state = 'released' THEN 'pending' ELSE v.state END,
        attempts = CASE WHEN v.state = 'released' THEN j.attempts - 1 ELSE j.attempts END,
        run_at = COALESCE(TIMESTAMPTZ 'epoch' + v.run_at_us * INTERVAL '1 microsecond', j.run_at),
        finished_at = TIMESTAMPTZ 'epoch' + v.finished_at_us * INTERVAL '1 microsecond',
        last_error = COALESCE(v.last_error, j.last_error),
        errors = COALESCE(v.errors, j.errors),
        result = v.result,
        worker_id = NULL
      FROM unnest(${numbers(finishes.map((f) => f.id))}::bigint[], ${numbers(finishes.map((f) => f.attempt))}::int[],
                  ${numbers(finishes.map((f) => f.state))}::text[], ${numbers(finishes.map((f) => f.runAtUs))}::bigint[],
                  ${numbers(finishes.map((f) => f.finishedAtUs))}::bigint[], ${texts(finishes.map((f) => f.lastError))}::text[],
                  ${texts(finishes.map((f) => f.errors))}::text[], ${texts(finishes.map((f) => f.result))}::text[])
           AS v(id, attempt, state, run_at_us, finished_at_us, last_error, errors, result)
      WHERE j.id = v.id AND j.attempts = v.attempt AND j.state = 'running'
      RETURNING v.id, v.attempt`
  const explain = (statement: Statement.Statement<unknown>) => {
    const [text, params] = statement.compile()
    return Effect.map(
      sql.unsafe<{ "QUERY PLAN": string }>(`EXPLAIN ${text}`, params),
      (rows) => rows.map((r) => r["QUERY PLAN"])
    )
  }
  return {
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
    explainProbe: (names) =>
      // Both forms: the one that starts from the names and the scan of every group.
      Effect.zipWith(explain(probeNames(names)), explain(probeAll), (a, b) => [...a, ...b]),
    explainClaim: (groups, limit, nowUs) => explain(claimStatement(groups, limit, nowUs, "explain")),
    explainClaimKeyed: (groups, limit, nowUs) => explain(claimKeyedStatement(groups, limit, nowUs, "explain")),
    jobClaimKeyed: (groups, limit, nowUs, workerId) =>
      retryKeyed(Effect.map(run(claimKeyedStatement(groups, limit, nowUs, workerId)), (rows) => rows.map(toClaimed).sort(byClaimOrder))),
    jobCountDue: (names, nowUs, cap) =>
      Effect.map(
        sql<{ name: string; due: string }>`SELECT n.name, (SELECT count(*) FROM (
              SELECT 1 FROM ${jobs} j WHERE j.state = 'pending' AND j.name = n.name AND j.run_at <= ${ts(nowUs)}
              LIMIT ${sql.literal(String(Math.floor(cap)))}) x) AS due
            FROM unnest(${names}::text[]) AS n(name)`,
        (rows) => rows.map((r) => ({ name: r.name, due: num(r.due) }))
      ),
    jobFinishMany: (finishes) => {
      const { applied, ctes } = finishCtes(finishes)
      return Effect.map(
        run(sql<{ applied: string | null }>`WITH ${ctes} SELECT a.applied FROM ${applied} AS a`),
        (rows) => staleEnds(finishes, rows[0]?.applied ?? null)
      )
    },
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
    jobFinishManyAndClaim: (finishes, groups, limit, nowUs, workerId) => {
      const { applied, ctes } = finishCtes(finishes)
      return Effect.map(
        run(sql`WITH ${ctes}, claimed AS (${claimStatement(groups, limit, nowUs, workerId, sql.literal(""))})
          SELECT c.*, a.applied FROM ${applied} AS a LEFT JOIN claimed c ON true`),
        (rows) => ({
          claimed: rows.filter((r) => r.id !== null).map(toClaimed).sort(byClaimOrder),
          stale: staleEnds(finishes, (rows[0]?.applied ?? null) as string | null)
        })
      )
    }
  }
}
