/**
 * PostgreSQL: workers' rows, heartbeats and session locks, and the jobs of lost workers (rescue).
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import type { WorkersOps } from "../Driver.js"
import { num, staleAttempts, toOrphaned, workerRows } from "../shared.js"
import { numbers, type PgContext, pgLockSpace, usText } from "./context.js"

export const make = (ctx: PgContext): WorkersOps => {
  const { claimedColumnsJ, jobs, lockPrefix, sql, ts, workers } = ctx
  return {
    jobStaleAttempts: (attempts) =>
      attempts.length === 0 ? Effect.succeed([]) : Effect.map(
        sql`SELECT id, attempts, state FROM ${jobs} WHERE id = ANY(${numbers(attempts.map((a) => a.id))}::bigint[])`,
        (rows) => staleAttempts(attempts, rows)
      ),
    jobListOrphaned: (names, leaseCutoffUs, selfId, limit) =>
      Effect.map(
        sql`SELECT ${claimedColumnsJ}, j.worker_id,
              ${sql.literal(usText("j.claimed_at"))} AS claimed_at_us,
              (w.id IS NULL OR w.heartbeat_at < ${ts(leaseCutoffUs)}) AS expired,
              COALESCE(w.relocking, false) AS relocking, COALESCE(w.relocks, 0) AS relocks
            FROM ${jobs} j
            LEFT JOIN ${workers} w ON w.id = j.worker_id
            WHERE j.state = 'running' AND j.name = ANY(${names}::text[])
              AND (w.id IS NULL OR j.worker_id = ${selfId} OR w.heartbeat_at < ${ts(leaseCutoffUs)} OR NOT EXISTS (
                SELECT 1 FROM pg_locks l
                WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
                  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
                  AND l.classid::bigint = ${pgLockSpace}
                  AND l.objid::bigint = (hashtext(${lockPrefix}::text || j.worker_id)::bigint & 4294967295)))
            LIMIT ${sql.literal(String(Math.min(Math.floor(limit), 2147483647)))}`,
        (rows) => rows.map(toOrphaned)
      ),
    ...workerRows(
      ctx,
      "ON CONFLICT (id) DO UPDATE SET heartbeat_at = EXCLUDED.heartbeat_at, relocking = false, job_names = EXCLUDED.job_names"
    ),
    workerPrune: (cutoffUs) =>
      sql`DELETE FROM ${workers} w WHERE w.heartbeat_at < ${ts(cutoffUs)}
          AND NOT EXISTS (SELECT 1 FROM ${jobs} j WHERE j.state = 'running' AND j.worker_id = w.id)`.pipe(Effect.asVoid),
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
