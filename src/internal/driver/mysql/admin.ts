/**
 * MySQL/MariaDB: operations on jobs by id (get, cancel, retry, progress), the paused names,
 * listing, statistics, retries by name, pruning, the pruner's lock and the migrations applied.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import type { AdminOps, JobListFilter } from "../Driver.js"
import { isUniqueViolation } from "../errors.js"
import { createdIds } from "../createdIds.js"
import { jobStates, listByStates, newestId, num, prunerLockName, stateLiteral, toJobRow, toStats, toSummary } from "../shared.js"
import type { MysqlContext } from "./context.js"

/**
 * The first `cap` rows of a state, from an index led by state (pending: the pending index; the
 * others: (state, finished_at, name), which holds the running rows too), counted per name: never
 * more rows, however many the table holds, and read from the index alone (it holds the name).
 */
export const countByStateStatement = (ctx: MysqlContext) => (state: string, cap: number) =>
  ctx.sql`SELECT name, COUNT(*) AS n FROM (
      SELECT name FROM ${ctx.jobs} FORCE INDEX (${ctx.sql(`${ctx.prefix}${state === "pending" ? "jobs_pending" : "jobs_finished"}`)})
      WHERE state = ${ctx.sql.literal(`'${stateLiteral(state)}'`)}
      LIMIT ${ctx.sql.literal(String(Math.max(0, Math.floor(cap))))}) s
    GROUP BY name`

/**
 * The job list's statement: newest first, each filter one index range in id order (see the
 * migration `16_list_indexes`); a created-time range is first turned into ids (createdIds.ts).
 */
export const listStatement = (ctx: MysqlContext) => (filter: JobListFilter) => {
  const { jobs, prefix, run, sql, ts, usOf } = ctx
  /** The first job at or above each id, each by the primary key (a created-time range's bounds, createdIds.ts). */
  const firstAtOrAfter = (ids: ReadonlyArray<string>) =>
    Effect.map(
      run(sql`${sql.join(" UNION ALL ", false)(ids.map((id, i) =>
        sql`(SELECT ${sql.literal(String(i))} AS i, id, ${sql.literal(usOf("created_at"))} AS created_at_us FROM ${jobs}
              WHERE id >= ${id} ORDER BY id LIMIT 1)`
      ))}`, "unprepared"),
      (rows: ReadonlyArray<any>) => {
        const byIndex = new Map(rows.map((r) => [num(r.i), { id: String(r.id), createdAtUs: num(r.created_at_us) }]))
        return ids.map((_, i) => byIndex.get(i))
      }
    )
  return Effect.map(createdIds(firstAtOrAfter, newestId(run, sql, jobs), filter.createdFromUs, filter.createdBeforeUs), (ids) => {
    const limit = sql.literal(String(Math.max(0, Math.floor(filter.limit))))
    // The index whose range holds the filter's jobs in id order (named: the optimizer may prefer
    // walking the primary key newest first, reading every job of other names and states).
    const index = filter.id !== undefined
      ? undefined
      : filter.uniqueKey !== undefined
      ? "jobs_unique_key"
      : filter.name !== undefined
      ? "jobs_name_state"
      : filter.state !== undefined
      ? "jobs_state"
      : undefined
    const select = (state: string | undefined) =>
      sql`SELECT id, name, state, attempts, priority, ${sql.literal(usOf("run_at"))} AS run_at_us,
            ${sql.literal(usOf("created_at"))} AS created_at_us, ${sql.literal(usOf("claimed_at"))} AS claimed_at_us,
            ${sql.literal(usOf("finished_at"))} AS finished_at_us, worker_id, last_error, progress
          FROM ${jobs}${index === undefined ? sql.literal("") : sql` FORCE INDEX (${sql(`${prefix}${index}`)})`}
          WHERE ${sql.and([
        ...(filter.name === undefined ? [] : [sql`name = ${filter.name}`]),
        ...(state === undefined ? [] : [sql`state = ${state}`]),
        ...(filter.beforeId === undefined ? [] : [sql`id < ${filter.beforeId}`]),
        ...(filter.id === undefined ? [] : [sql`id = ${filter.id}`]),
        ...(filter.uniqueKey === undefined ? [] : [sql`unique_key = ${filter.uniqueKey}`]),
        ...(ids?.fromId === undefined ? [] : [sql`id >= ${ids.fromId}`]),
        ...(ids?.beforeId === undefined ? [] : [sql`id < ${ids.beforeId}`]),
        ...(filter.createdFromUs === undefined ? [] : [sql`created_at >= ${ts(filter.createdFromUs)}`]),
        ...(filter.createdBeforeUs === undefined ? [] : [sql`created_at < ${ts(filter.createdBeforeUs)}`])
      ])}
          ORDER BY id DESC LIMIT ${limit}`
    // A name's jobs of every state: one range of (name, state, id) per state, at most `limit`
    // rows each, merged newest first.
    return listByStates(filter)
      ? sql`SELECT * FROM (${sql.join(" UNION ALL ", false)(jobStates.map((s) => sql`(${select(s)})`))}) j
          ORDER BY id DESC LIMIT ${limit}`
      : select(filter.state)
  })
}

/** The read of the ids `jobPruneFinished` deletes: oldest first, by the (state, finished_at) index. */
export const pruneReadStatement = ({ jobs, sql, ts }: MysqlContext) => (state: string, cutoffUs: number, limit: number) =>
  sql<{ id: string }>`SELECT id FROM ${jobs}
    WHERE state = ${state} AND finished_at < ${ts(cutoffUs)}
    ORDER BY finished_at LIMIT ${sql.literal(String(Math.floor(limit)))}`

export const make = (ctx: MysqlContext): AdminOps => {
  const { claimedColumns, jobs, prefix, run, sql, ts, usOf } = ctx
  return {
    jobCancel: (id, nowUs) =>
      Effect.map(
        sql`UPDATE ${jobs} SET state = 'cancelled', finished_at = ${ts(nowUs)}, worker_id = NULL
            WHERE id = ${id} AND state IN ('pending', 'running')`.raw,
        (r: any) => Number(r.affectedRows) > 0
      ),
    jobDelete: (id) =>
      Effect.map(
        sql`DELETE FROM ${jobs} WHERE id = ${id} AND state <> 'running'`.raw,
        (r: any) => Number(r.affectedRows) > 0
      ),
    jobRetry: (id, nowUs) =>
      Effect.map(
        sql`UPDATE ${jobs} SET state = 'pending', run_at = ${ts(nowUs)}, finished_at = NULL, attempt_base = attempts
            WHERE id = ${id} AND state IN ('dead', 'cancelled')`.raw,
        (r: any) => Number(r.affectedRows) > 0
        // Another job holds its unique key: the index refuses the update (only this statement fails).
      ).pipe(Effect.catchIf(isUniqueViolation, () => Effect.succeed(false))),
    jobGet: (id) =>
      Effect.map(
        sql`SELECT ${claimedColumns}, state, ${sql.literal(usOf("claimed_at"))} AS claimed_at_us,
              ${sql.literal(usOf("finished_at"))} AS finished_at_us, last_error, result
            FROM ${jobs} WHERE id = ${id}`,
        (rows) => (rows.length === 0 ? undefined : toJobRow(rows[0]))
      ),

    // --- Operations -------------------------------------------------------------------------
    pausedList: () =>
      Effect.map(
        sql`SELECT name, ${sql.literal(usOf("paused_at"))} AS paused_at_us FROM ${sql(`${prefix}paused`)} ORDER BY name`,
        (rows: ReadonlyArray<any>) => rows.map((r) => ({ name: r.name, pausedAtUs: num(r.paused_at_us) }))
      ),
    pausedInsert: (name, nowUs) =>
      Effect.map(
        sql`INSERT IGNORE INTO ${sql(`${prefix}paused`)} (name, paused_at) VALUES (${name}, ${ts(nowUs)})`.raw,
        (r: any) => Number(r.affectedRows) > 0
      ),
    pausedDelete: (name) =>
      Effect.map(sql`DELETE FROM ${sql(`${prefix}paused`)} WHERE name = ${name}`.raw, (r: any) => Number(r.affectedRows) > 0),
    jobList: (filter) =>
      Effect.flatMap(listStatement(ctx)(filter), (statement) => Effect.map(run(statement, "unprepared"), (rows) => rows.map(toSummary))),
    jobStats: (nowUs, sinceUs) =>
      Effect.map(
        run(sql`SELECT name, state, COUNT(*) AS n,
              SUM(CASE WHEN state = 'pending' AND run_at <= ${ts(nowUs)} THEN 1 ELSE 0 END) AS due,
              TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00',
                MIN(CASE WHEN state = 'pending' AND run_at <= ${ts(nowUs)} THEN run_at END)) AS oldest_due_us,
              SUM(CASE WHEN finished_at >= ${ts(sinceUs)} THEN 1 ELSE 0 END) AS recent
            FROM ${jobs} GROUP BY name, state ORDER BY name, state`, "unprepared"),
        (rows) => rows.map(toStats)
      ),
    jobCountByState: (state, cap) =>
      Effect.map(
        run(countByStateStatement(ctx)(state, cap), "unprepared"),
        (rows: ReadonlyArray<any>) => rows.map((r) => ({ name: String(r.name), count: num(r.n) }))
      ),
    jobRetryByName: (name, state, nowUs, limit, finishedByUs) =>
      Effect.map(
        // Jobs with a unique key are left to `jobRetry`, one by one (another job may hold the key).
        sql`UPDATE ${jobs} SET state = 'pending', run_at = ${ts(nowUs)}, finished_at = NULL, attempt_base = attempts
            WHERE state = ${state} AND name = ${name} AND unique_key IS NULL AND finished_at <= ${ts(finishedByUs)}
            ORDER BY id LIMIT ${sql.literal(String(Math.floor(limit)))}`.raw,
        (r: any) => Number(r.affectedRows)
      ),
    jobKeyedIdsByName: (name, state, afterId, finishedByUs, limit) =>
      Effect.map(
        sql<{ id: string }>`SELECT id FROM ${jobs}
            WHERE state = ${state} AND name = ${name} AND unique_key IS NOT NULL
              AND finished_at <= ${ts(finishedByUs)} AND id > ${afterId}
            ORDER BY id LIMIT ${sql.literal(String(Math.floor(limit)))}`,
        (rows) => rows.map((r) => String(r.id))
      ),
    jobProgressSet: (id, attempt, progress) =>
      Effect.map(
        // Through the primary key, named (see the delete of completed jobs, jobs.ts): a handler may report
        // progress inside its own transaction, and a lock on the `(state, finished_at)` range of
        // running jobs would hold back every enqueue until that transaction ends.
        sql`UPDATE ${jobs} FORCE INDEX (PRIMARY) SET progress = ${progress}
            WHERE id = ${id} AND attempts = ${attempt} AND state = 'running'`.raw,
        (r: any) => Number(r.affectedRows) > 0
      ),
    jobProgressGet: (id) =>
      Effect.map(
        sql<{ progress: string | null }>`SELECT progress FROM ${jobs} WHERE id = ${id}`,
        (rows) => rows[0]?.progress ?? null
      ),
    jobPruneFinished: (state, cutoffUs, limit) =>
      // Two steps, so the delete takes record locks on primary keys only: a locking range scan of
      // the (state, finished_at) index would take gap locks that block jobs finishing meanwhile.
      Effect.gen(function*() {
        const rows = yield* pruneReadStatement(ctx)(state, cutoffUs, limit)
        if (rows.length === 0) return 0
        // The id list is padded to `limit` entries (repeating the last id), so the prepared
        // statement's text is the same for every batch.
        const ids = Array.from({ length: Math.floor(limit) }, (_, i) => String(rows[Math.min(i, rows.length - 1)].id))
        const result: any = yield* sql`DELETE FROM ${jobs}
          WHERE id IN ${sql.in(ids)} AND state = ${state} AND finished_at < ${ts(cutoffUs)}`.raw
        return Number(result.affectedRows)
      }),
    prunerLock: ({
      lock: ["SELECT GET_LOCK(?, 0)", [prunerLockName(prefix)]],
      unlock: ["SELECT RELEASE_LOCK(?)", [prunerLockName(prefix)]]
    })
  }
}
