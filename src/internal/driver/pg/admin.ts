/**
 * PostgreSQL: operations on jobs by id (get, cancel, retry, progress), the paused names, listing,
 * statistics, retries by name, pruning, the pruner's lock, the migrations applied and `NOTIFY`.
 *
 * @internal
 */
import type * as Statement from "@effect/sql/Statement"
import * as Effect from "effect/Effect"
import { uniqueGuard } from "../shared.js"
import type { AdminOps, JobListFilter } from "../Driver.js"
import { isUniqueViolation } from "../errors.js"
import { createdIds, type FirstAtOrAfter } from "../createdIds.js"
import { jobStates, listByStates, newestId, num, prunerLockName, stateLiteral, toJobRow, toStats, toSummary } from "../shared.js"
import { type PgContext, pgLockSpace } from "./context.js"

/**
 * The first `cap` rows of a state, from its partial index (pending, running), the (state, id) index
 * (completed) or the finished index (state, finished_at: dead, cancelled), counted per name: never
 * more rows, however many the table holds. The state
 * is a literal, so that the planner matches the partial indexes, and the rows are taken in the
 * order of the index (a scan of the table that stops at the cap could read every other row first).
 */
export const countByStateStatement = (ctx: PgContext) => (state: string, cap: number) =>
  ctx.sql`SELECT name, COUNT(*) AS n FROM (
      SELECT name FROM ${ctx.jobs} WHERE state = ${ctx.sql.literal(`'${stateLiteral(state)}'`)}
      ORDER BY ${ctx.sql.literal(state === "pending" ? "name" : state === "running" ? "worker_id" : state === "completed" ? "id" : "finished_at")}
      LIMIT ${ctx.sql.literal(String(Math.max(0, Math.floor(cap))))}) s
    GROUP BY name`

/** The first job at or above each id, each by the primary key (a created-time range's bounds, createdIds.ts). */
const firstAtOrAfter = ({ jobs, sql, us }: PgContext): FirstAtOrAfter => (ids) =>
  Effect.map(
    sql`${sql.join(" UNION ALL ", false)(ids.map((id, i) =>
      sql`(SELECT ${sql.literal(String(i))} AS i, id, ${us("created_at")} AS created_at_us FROM ${jobs}
            WHERE id >= ${id}::bigint ORDER BY id LIMIT 1)`
    ))}`,
    (rows: ReadonlyArray<any>) => {
      const byIndex = new Map(rows.map((r) => [num(r.i), { id: String(r.id), createdAtUs: num(r.created_at_us) }]))
      return ids.map((_, i) => byIndex.get(i))
    }
  )

/**
 * The statement that deletes at most `limit` jobs in `state` finished before `cutoffUs`. Dead and
 * cancelled jobs go oldest first by the (state, finished_at) index. Completed jobs go in id order,
 * read (from the completed range of the (state, id) index, or the primary key, as the planner finds
 * cheaper) only below the first id created after the cutoff (plus a minute's margin,
 * createdIds.ts): a job finished before the cutoff was created before it, so the range read holds
 * the jobs to delete and few others (created before the cutoff, finished since), however many
 * recent completed jobs the table keeps. The outer conditions are checked again on rows changed
 * meanwhile (a retried dead job stays).
 */
export const pruneStatement = (ctx: PgContext) => (state: "completed" | "dead" | "cancelled", cutoffUs: number, limit: number) => {
  const { jobs, run, sql, ts } = ctx
  const finished = sql.literal(`state = '${stateLiteral(state)}'`)
  const remove = (inner: Statement.Fragment) =>
    sql`WITH d AS (
        DELETE FROM ${jobs} WHERE id IN (${inner}) AND ${finished} AND finished_at < ${ts(cutoffUs)}
        RETURNING 1)
      SELECT COUNT(*) AS n FROM d`
  const cap = sql.literal(String(Math.floor(limit)))
  if (state !== "completed") {
    return Effect.succeed(remove(sql`SELECT id FROM ${jobs} WHERE ${finished} AND finished_at < ${ts(cutoffUs)}
        ORDER BY finished_at LIMIT ${cap}`))
  }
  return Effect.map(createdIds(firstAtOrAfter(ctx), newestId(run, sql, jobs), undefined, cutoffUs), (ids) =>
    remove(sql`SELECT id FROM ${jobs} WHERE ${finished} AND finished_at < ${ts(cutoffUs)}${
      ids?.beforeId === undefined ? sql.literal("") : sql` AND id < ${ids.beforeId}::bigint`
    }
        ORDER BY id LIMIT ${cap}`))
}

/**
 * The job list's statement: newest first, each filter one index range in id order (see the
 * migration `16_list_indexes`); a created-time range is first turned into ids (createdIds.ts).
 */
export const listStatement = (ctx: PgContext) => (filter: JobListFilter) => {
  const { jobs, run, sql, ts, us } = ctx
  // The index a name or a state is read through, held to it: its first column is compared with
  // `= ANY` (an array of one) and the order names its columns. With `=`, the planner may walk the
  // primary key newest first instead, filtering, when the state is most of the table (completed)
  // by its statistics — and read every newer job of other states first (a backlog of pending jobs).
  const by = filter.id !== undefined || filter.uniqueKey !== undefined
    ? undefined
    : filter.name !== undefined
    ? "name"
    : filter.state !== undefined
    ? "state"
    : undefined
  // A state as a literal, so that the planner matches the partial indexes (those of the lists leave
  // running jobs out); another text selects no job, as a parameter.
  const stateCondition = (state: string, any: boolean) =>
    (jobStates as ReadonlyArray<string>).includes(state)
      ? sql.literal(any ? `state = ANY('{${state}}')` : `state = '${state}'`)
      : sql`state = ${state}`
  return Effect.map(createdIds(firstAtOrAfter(ctx), newestId(run, sql, jobs), filter.createdFromUs, filter.createdBeforeUs), (ids) => {
    const limit = sql.literal(String(Math.max(0, Math.floor(filter.limit))))
    const select = (state: string | undefined) =>
      sql`SELECT id, name, state, attempts, priority, ${us("run_at")} AS run_at_us,
            ${us("created_at")} AS created_at_us, ${us("claimed_at")} AS claimed_at_us,
            ${us("finished_at")} AS finished_at_us, worker_id, last_error, progress
          FROM ${jobs}
          WHERE ${sql.and([
        ...(filter.name === undefined ? [] : [by === "name" ? sql`name = ANY(${[filter.name]})` : sql`name = ${filter.name}`]),
        ...(state === undefined ? [] : [stateCondition(state, by === "state")]),
        ...(filter.beforeId === undefined ? [] : [sql`id < ${filter.beforeId}::bigint`]),
        ...(filter.id === undefined ? [] : [sql`id = ${filter.id}::bigint`]),
        ...(filter.uniqueKey === undefined ? [] : [sql`unique_key = ${filter.uniqueKey}`]),
        ...(ids?.fromId === undefined ? [] : [sql`id >= ${ids.fromId}::bigint`]),
        ...(ids?.beforeId === undefined ? [] : [sql`id < ${ids.beforeId}::bigint`]),
        ...(filter.createdFromUs === undefined ? [] : [sql`created_at >= ${ts(filter.createdFromUs)}`]),
        ...(filter.createdBeforeUs === undefined ? [] : [sql`created_at < ${ts(filter.createdBeforeUs)}`])
      ])}
          ORDER BY ${sql.literal(by === "name" ? "name DESC, state DESC, id DESC" : by === "state" ? "state DESC, id DESC" : "id DESC")}
          LIMIT ${limit}`
    // A name's jobs of every state: one range of (name, state, id) per state, merged newest first.
    return listByStates(filter)
      ? sql`SELECT * FROM (${sql.join(" UNION ALL ", false)(jobStates.map((s) => sql`(${select(s)})`))}) j
          ORDER BY id DESC LIMIT ${limit}`
      : select(filter.state)
  })
}

export const make = (ctx: PgContext): AdminOps => {
  const { claimedColumns, jobs, prefix, sql, ts, us } = ctx
  return {
    jobCancel: (id, nowUs) =>
      Effect.map(
        sql`UPDATE ${jobs} SET state = 'cancelled', finished_at = ${ts(nowUs)}, worker_id = NULL
            WHERE id = ${id}::bigint AND state IN ('pending', 'running') RETURNING id`,
        (rows) => rows.length > 0
      ),
    jobDelete: (id) =>
      Effect.map(
        sql`DELETE FROM ${jobs} WHERE id = ${id}::bigint AND state <> 'running' RETURNING id`,
        (rows) => rows.length > 0
      ),
    jobRetry: (id, nowUs) =>
      Effect.map(
        // Not while another job holds its unique key (the unique index would refuse the update).
        sql`UPDATE ${jobs} j SET state = 'pending', run_at = ${ts(nowUs)}, finished_at = NULL, attempt_base = attempts
            WHERE j.id = ${id}::bigint AND j.state IN ('dead', 'cancelled')
              AND (j.unique_key IS NULL OR NOT EXISTS (
                SELECT 1 FROM ${jobs} o WHERE o.unique_key = j.unique_key AND o.id <> j.id
                  AND ${sql.literal(uniqueGuard("o."))}))
            RETURNING j.id`,
        (rows) => rows.length > 0
      ).pipe(
        // The guard cannot see a key taken by an uncommitted transaction: the update then waits for
        // it and meets the index. Inside the caller's transaction that error would abort it, so the
        // update runs in a transaction of its own — a savepoint there — rolled back on the error.
        sql.withTransaction,
        Effect.catchIf(isUniqueViolation, () => Effect.succeed(false))
      ),
    jobGet: (id) =>
      Effect.map(
        sql`SELECT ${claimedColumns}, state, ${us("claimed_at")} AS claimed_at_us,
              ${us("finished_at")} AS finished_at_us, last_error, result
            FROM ${jobs} WHERE id = ${id}::bigint`,
        (rows) => (rows.length === 0 ? undefined : toJobRow(rows[0]))
      ),

    // --- Operations -------------------------------------------------------------------------
    pausedList: () =>
      Effect.map(
        sql`SELECT name, ${us("paused_at")} AS paused_at_us FROM ${sql(`${prefix}paused`)} ORDER BY name`,
        (rows: ReadonlyArray<any>) => rows.map((r) => ({ name: r.name, pausedAtUs: num(r.paused_at_us) }))
      ),
    pausedInsert: (name, nowUs) =>
      Effect.map(
        sql`INSERT INTO ${sql(`${prefix}paused`)} (name, paused_at) VALUES (${name}, ${ts(nowUs)})
            ON CONFLICT (name) DO NOTHING RETURNING name`,
        (rows) => rows.length > 0
      ),
    pausedDelete: (name) =>
      Effect.map(sql`DELETE FROM ${sql(`${prefix}paused`)} WHERE name = ${name} RETURNING name`, (rows) => rows.length > 0),
    jobList: (filter) =>
      Effect.flatMap(listStatement(ctx)(filter), (statement) => Effect.map(statement, (rows) => rows.map(toSummary))),
    // A run_at of -infinity (a row edited by hand) reads as the year 1000, as in usText.
    jobStats: (nowUs, sinceUs) =>
      Effect.map(
        sql`SELECT name, state, COUNT(*) AS n,
              COUNT(*) FILTER (WHERE state = 'pending' AND run_at <= ${ts(nowUs)}) AS due,
              (EXTRACT(EPOCH FROM MIN(GREATEST(run_at, '1000-01-01Z')) FILTER (WHERE state = 'pending' AND run_at <= ${ts(nowUs)})) * 1000000)::bigint
                AS oldest_due_us,
              COUNT(*) FILTER (WHERE finished_at >= ${ts(sinceUs)}) AS recent
            FROM ${jobs} GROUP BY name, state ORDER BY name, state`,
        (rows) => rows.map(toStats)
      ),
    jobCountByState: (state, cap) =>
      Effect.map(
        countByStateStatement(ctx)(state, cap),
        (rows: ReadonlyArray<any>) => rows.map((r) => ({ name: String(r.name), count: num(r.n) }))
      ),
    jobRetryByName: (name, state, nowUs, limit, finishedByUs) =>
      Effect.map(
        // Jobs with a unique key are left to `jobRetry`, one by one (another job may hold the key).
        // `= ANY(ARRAY(…))` reads the ids once: as `IN (…)` the planner may make the locking subquery
        // the inner side of a nested loop, run again per outer row, each run taking the next `limit`.
        sql`UPDATE ${jobs} SET state = 'pending', run_at = ${ts(nowUs)}, finished_at = NULL, attempt_base = attempts
            WHERE id = ANY(ARRAY(
              SELECT id FROM ${jobs} WHERE state = ${state} AND name = ${name} AND unique_key IS NULL
                AND finished_at <= ${ts(finishedByUs)}
              ORDER BY id LIMIT ${sql.literal(String(Math.floor(limit)))} FOR UPDATE SKIP LOCKED))
              AND state = ${state} AND unique_key IS NULL AND finished_at <= ${ts(finishedByUs)}
            RETURNING id`,
        (rows) => rows.length
      ),
    jobKeyedIdsByName: (name, state, afterId, finishedByUs, limit) =>
      Effect.map(
        sql<{ id: string }>`SELECT id FROM ${jobs}
            WHERE state = ${state} AND name = ${name} AND unique_key IS NOT NULL
              AND finished_at <= ${ts(finishedByUs)} AND id > ${afterId}::bigint
            ORDER BY id LIMIT ${sql.literal(String(Math.floor(limit)))}`,
        (rows) => rows.map((r) => String(r.id))
      ),
    jobProgressSet: (id, attempt, progress) =>
      Effect.map(
        sql`UPDATE ${jobs} SET progress = ${progress}
            WHERE id = ${id}::bigint AND attempts = ${attempt} AND state = 'running' RETURNING id`,
        (rows) => rows.length > 0
      ),
    jobProgressGet: (id) =>
      Effect.map(
        sql<{ progress: string | null }>`SELECT progress FROM ${jobs} WHERE id = ${id}::bigint`,
        (rows) => rows[0]?.progress ?? null
      ),
    jobPruneFinished: (state, cutoffUs, limit) =>
      Effect.flatMap(pruneStatement(ctx)(state, cutoffUs, limit), (statement) =>
        Effect.map(statement, (rows: ReadonlyArray<any>) => num(rows[0]?.n ?? 0))),
    prunerLock: ({
      lock: ["SELECT pg_try_advisory_lock($1, hashtext($2))", [pgLockSpace, prunerLockName(prefix)]],
      unlock: ["SELECT pg_advisory_unlock($1, hashtext($2))", [pgLockSpace, prunerLockName(prefix)]]
    })
  }
}
