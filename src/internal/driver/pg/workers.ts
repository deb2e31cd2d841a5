/**
 * PostgreSQL: workers' rows, heartbeats and session locks, and the jobs of lost workers (rescue).
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import type { WorkersOps } from "../Driver.js"
import { num, staleAttempts, toOrphaned } from "../shared.js"
import { toWorker, workerRows } from "../workerRows.js"
import { numbers, type PgContext, pgLockSpace, usText } from "./context.js"

export const make = (ctx: PgContext): WorkersOps => {
  const { claimedColumnsJ, jobs, lockPrefix, sql, ts, workers } = ctx
  const workerPrune = (cutoffUs: number) =>
    sql`DELETE FROM ${workers} w WHERE w.heartbeat_at < ${ts(cutoffUs)}
        AND NOT EXISTS (SELECT 1 FROM ${jobs} j WHERE j.state = 'running' AND j.worker_id = w.id)`.pipe(Effect.asVoid)
  return {
    jobStaleAttempts: (attempts) =>
      attempts.length === 0 ? Effect.succeed([]) : Effect.map(
        sql`SELECT id, attempts, state FROM ${jobs} WHERE id = ANY(${numbers(attempts.map((a) => a.id))}::bigint[])`,
        (rows) => staleAttempts(attempts, rows)
      ),
    jobListOrphaned: (names, leaseCutoffUs, selfId, limit, scope = "all") => {
      const n = sql.literal(String(Math.min(Math.floor(limit), 2147483647)))
      // The workers found lost (or the caller, with "all"), from their rows and the session locks:
      // a read of the workers table and of pg_locks, whatever the number of running jobs. Their running
      // jobs are then read from jobs_running by worker id, so that a pass without a lost worker reads
      // no job: the index's range of running jobs holds the entries of every job that ran since the
      // last vacuum, and reading all of them twice a second per worker grew with the table.
      const suspects = sql`SELECT w.id, (w.heartbeat_at < ${ts(leaseCutoffUs)}) AS expired, w.relocking, w.relocks
          FROM ${workers} w
          WHERE ${scope === "all" ? sql`w.id = ${selfId} OR ` : sql.literal("")}w.heartbeat_at < ${ts(leaseCutoffUs)}
            OR NOT EXISTS (
              SELECT 1 FROM pg_locks l
              WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
                AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
                AND l.classid::bigint = ${pgLockSpace}
                AND l.objid::bigint = (hashtext(${lockPrefix}::text || w.id)::bigint & 4294967295))`
      const ofSuspects = sql`SELECT ${claimedColumnsJ}, j.worker_id,
            ${sql.literal(usText("j.claimed_at"))} AS claimed_at_us, s.expired, s.relocking, s.relocks
          FROM (${suspects}) s CROSS JOIN LATERAL (
            SELECT * FROM ${jobs} r
            WHERE r.state = 'running' AND r.worker_id = s.id AND r.name = ANY(${names}::text[])
            LIMIT ${n}) j`
      // Running jobs whose worker has no row (deleted by hand; or pruned while the worker was stopped
      // and claimed for since, until its next heartbeat writes the row again), claimed longer than a
      // lease ago: the worker has not written its row since, as a worker whose heartbeat stopped at
      // the claim. Every running job is read.
      const unregistered = sql`SELECT ${claimedColumnsJ}, j.worker_id,
            ${sql.literal(usText("j.claimed_at"))} AS claimed_at_us, true AS expired, false AS relocking, 0 AS relocks
          FROM ${jobs} j
          WHERE j.state = 'running' AND j.name = ANY(${names}::text[]) AND j.claimed_at < ${ts(leaseCutoffUs)}
            AND NOT EXISTS (SELECT 1 FROM ${workers} w WHERE w.id = j.worker_id)`
      return Effect.map(
        scope === "all"
          ? sql`SELECT * FROM (${ofSuspects}) a UNION ALL SELECT * FROM (${unregistered}) b LIMIT ${n}`
          : sql`${ofSuspects} LIMIT ${n}`,
        (rows) => rows.map(toOrphaned)
      )
    },
    ...workerRows(
      ctx,
      "ON CONFLICT (id) DO UPDATE SET heartbeat_at = EXCLUDED.heartbeat_at, relocking = false, job_names = EXCLUDED.job_names, job_limits = EXCLUDED.job_limits",
      "ON CONFLICT (id) DO UPDATE SET heartbeat_at = EXCLUDED.heartbeat_at"
    ),
    // The row says the worker is lost (its heartbeat at the epoch) before it goes, so that a job left
    // running (a handler that did not stop) is rescued at once; the prune of rows at the epoch deletes
    // it unless a job of it is running.
    workerRemove: (id) =>
      Effect.zipRight(sql`UPDATE ${workers} SET heartbeat_at = ${ts(0)} WHERE id = ${id}`, workerPrune(1)),
    workerPrune,
    workerList: (limit) =>
      Effect.map(
        sql`SELECT id, host, pid, ${sql.literal(usText("started_at"))} AS started_at_us,
              ${sql.literal(usText("heartbeat_at"))} AS heartbeat_at_us, job_names
            FROM ${workers} ORDER BY id LIMIT ${sql.literal(String(Math.max(0, Math.floor(limit))))}`,
        (rows) => rows.map(toWorker)
      ),
    workerLockStatement: (id) => ["SELECT pg_try_advisory_lock($1, hashtext($2))", [pgLockSpace, lockPrefix + id]],
    workerUnlockSql: "SELECT pg_advisory_unlock($1, hashtext($2))",
    workerLockName: (id) => lockPrefix + id,
    connectionIdStatement: "SELECT pg_backend_pid()",
    connectionCheckStatement: "SELECT 1",
    workerLockHolder: (id) =>
      Effect.map(
        sql<{ pid: number }>`SELECT pid FROM pg_locks
          WHERE locktype = 'advisory' AND granted AND objsubid = 2 AND classid::bigint = ${pgLockSpace}
            AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
            AND objid::bigint = (hashtext(${lockPrefix + id})::bigint & 4294967295)`,
        (rows) => (rows.length === 0 ? null : num(rows[0].pid))
      ),
    endConnection: (connectionId) => Effect.asVoid(sql`SELECT pg_terminate_backend(${connectionId})`)
  }
}
