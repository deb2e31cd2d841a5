/**
 * MySQL/MariaDB: workers' rows, heartbeats and session locks (`GET_LOCK`), and the jobs of lost
 * workers (rescue).
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import type { WorkersOps } from "../Driver.js"
import { num, staleAttempts, toOrphaned } from "../shared.js"
import { toWorker, workerRows } from "../workerRows.js"
import type { MysqlContext } from "./context.js"

export const make = (ctx: MysqlContext): WorkersOps => {
  const { claimedColumnsJ, jobs, lockPrefix, run, sql, ts, usOf, workers } = ctx
  const workerPrune = (cutoffUs: number) =>
    // Plain reads first, then a delete by id: in a DELETE, InnoDB reads the jobs subquery with
    // shared locks on every row it scans (REPEATABLE READ), so the prune waited for every claim,
    // ride and enqueue in flight, and blocked them while it scanned. A plain SELECT locks nothing.
    // Without stale workers (the common case) the jobs table is not read at all.
    Effect.gen(function*() {
      const stale = yield* sql<{ id: string }>`SELECT id FROM ${workers} WHERE heartbeat_at < ${ts(cutoffUs)}`
      if (stale.length === 0) return
      const ids = stale.map((r) => String(r.id))
      const busy = yield* sql<{ worker_id: string }>`SELECT DISTINCT worker_id FROM ${jobs}
        WHERE state = 'running' AND worker_id IN ${sql.in(ids)}`
      const running = new Set(busy.map((r) => String(r.worker_id)))
      const idle = ids.filter((id) => !running.has(id))
      if (idle.length === 0) return
      yield* sql`DELETE FROM ${workers} WHERE heartbeat_at < ${ts(cutoffUs)} AND id IN ${sql.in(idle)}`
    })
  return {
    jobStaleAttempts: (attempts) =>
      attempts.length === 0 ? Effect.succeed([]) : Effect.map(
        run(sql`SELECT id, attempts, state FROM ${jobs} WHERE id IN ${sql.in(attempts.map((a) => a.id))}`, "unprepared"),
        (rows) => staleAttempts(attempts, rows)
      ),
    // Running jobs are read from the range state = 'running' of jobs_finished, whatever the scope:
    // InnoDB purges the old versions of rows, so the range holds the running jobs only. A job whose
    // worker has no row (deleted by hand; or pruned while the worker was stopped and claimed for
    // since, until its next heartbeat writes the row again) is lost when its worker's lock is free
    // or it was claimed longer than a lease ago, as if the worker's heartbeat had stopped at the claim.
    jobListOrphaned: (names, leaseCutoffUs, selfId, limit, scope = "all") =>
      Effect.map(
        run(sql`SELECT ${claimedColumnsJ}, j.worker_id, ${sql.literal(usOf("j.claimed_at"))} AS claimed_at_us,
              (COALESCE(w.heartbeat_at, j.claimed_at) < ${ts(leaseCutoffUs)}) AS expired,
              COALESCE(w.relocking, 0) AS relocking, COALESCE(w.relocks, 0) AS relocks
            FROM ${jobs} j
            LEFT JOIN ${workers} w ON w.id = j.worker_id
            WHERE j.state = 'running' AND j.name IN ${sql.in(names)}
              AND (${scope === "all" ? sql`j.worker_id = ${selfId} OR ` : sql.literal("")}COALESCE(w.heartbeat_at, j.claimed_at) < ${
          ts(leaseCutoffUs)
        }
                   OR j.worker_id IS NULL OR IS_FREE_LOCK(CONCAT(${lockPrefix}, j.worker_id)) = 1)
            LIMIT ${sql.literal(String(Math.min(Math.floor(limit), 2147483647)))}`, "unprepared"),
        (rows) => rows.map(toOrphaned)
      ),
    ...workerRows(
      ctx,
      "ON DUPLICATE KEY UPDATE heartbeat_at = VALUES(heartbeat_at), relocking = FALSE, job_names = VALUES(job_names), job_limits = VALUES(job_limits)",
      "ON DUPLICATE KEY UPDATE heartbeat_at = VALUES(heartbeat_at)"
    ),
    // As on PostgreSQL: the row at the epoch, then the prune of rows at the epoch.
    workerRemove: (id) =>
      Effect.zipRight(sql`UPDATE ${workers} SET heartbeat_at = ${ts(0)} WHERE id = ${id}`, workerPrune(1)),
    workerPrune,
    workerList: (limit) =>
      Effect.map(
        sql`SELECT id, host, pid, ${sql.literal(usOf("started_at"))} AS started_at_us,
              ${sql.literal(usOf("heartbeat_at"))} AS heartbeat_at_us, job_names
            FROM ${workers} ORDER BY id LIMIT ${sql.literal(String(Math.max(0, Math.floor(limit))))}`,
        (rows) => rows.map(toWorker)
      ),
    workerLockStatement: (id) => ["SELECT GET_LOCK(?, 0)", [lockPrefix + id]],
    workerUnlockSql: "SELECT RELEASE_LOCK(?)",
    workerLockName: (id) => lockPrefix + id,
    connectionIdStatement: "SELECT CONNECTION_ID()",
    connectionCheckStatement: "SELECT 1",
    workerLockHolder: (id) =>
      Effect.map(
        sql<{ conn: number | null }>`SELECT IS_USED_LOCK(${lockPrefix + id}) AS conn`,
        (rows) => (rows[0]?.conn === null || rows[0]?.conn === undefined ? null : num(rows[0].conn))
      ),
    endConnection: (connectionId) => Effect.asVoid(sql.unsafe(`KILL CONNECTION ${Math.trunc(connectionId)}`))
  }
}
