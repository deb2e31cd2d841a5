/**
 * Finds and claims due jobs.
 *
 * The *probe* finds which (job name, priority) groups of a worker's names have pending jobs and
 * when each is next due; its cost grows with the number of groups that have pending jobs, not
 * with finished jobs (a loose index scan over the pending-jobs index `(name, priority, run_at, id)`:
 * a recursive CTE on PostgreSQL, `GROUP BY` on MySQL/MariaDB). On PostgreSQL the scan starts from
 * the worker's names when they are few (≤ 32) or when, by the last probe of the same names, that
 * costs less than walking every group of any name (which it does otherwise).
 * The *claim* takes up to `limit` due jobs of the due groups, ordered by priority, `run_at`, id,
 * with `FOR UPDATE SKIP LOCKED`, marks them running and counts the attempt: one `UPDATE …
 * RETURNING` on PostgreSQL, one locking read per group and one update on MySQL/MariaDB. Each
 * group is one index range read in claim order, so no claim sorts the backlog.
 *
 * Jobs with a mutex key are left to the *keyed claim*, used only when one of the due names is
 * keyed (its definition has a `mutexKey`): it claims the due jobs of all the due names, those
 * without a key and, for every key with no running job, the first due job of that key — in one
 * order (priority, `run_at`, id), so keyed and unkeyed names share slots by priority. A unique
 * index over the keys of running jobs makes two running jobs of one key impossible; a claim that
 * loses a race for a key is retried.
 *
 * While a worker has a backlog, most of its claims do not go through this service: they ride on
 * the write of its ends (`Completer.Rider`: on PostgreSQL the same claim statement inside the
 * write's statement, on MySQL/MariaDB the same locking reads and update in the write's transaction).
 *
 * @since 0.1.0
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { Database } from "../internal/Database.js"
import type { ClaimedRow, Group, ProbeRow } from "../internal/driver/Driver.js"

export type { Group } from "../internal/driver/Driver.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface Probe {
  /**
   * The (name, priority) groups with at least one job due at `now`, best first: by priority,
   * then by their earliest `run_at` (so the group waiting longest comes first: no starvation).
   */
  readonly due: ReadonlyArray<Group>
  /** The earliest `run_at` (µs since the epoch) among pending jobs not yet due, if any. */
  readonly nextUs: number | undefined
}

/**
 * A claimed job as the worker sees it. Times are µs since the epoch; `payload` is the stored JSON.
 *
 * @since 0.1.0
 * @category models
 */
export type ClaimedJob = ClaimedRow

/**
 * @since 0.1.0
 * @category models
 */
export interface ClaimerShape {
  /** Which of `names` have due jobs at `nowUs` (µs since the epoch), and when the next one is due. */
  readonly probe: (names: ReadonlyArray<string>, nowUs: number) => Effect.Effect<Probe, SqlError>
  /**
   * Claims up to `limit` due jobs of `groups` for `workerId`, in claim order. When `keyed` (the
   * names whose jobs may carry mutex keys) meets the groups' names, the keyed claim is used.
   */
  readonly claim: (
    groups: ReadonlyArray<Group>,
    limit: number,
    nowUs: number,
    workerId: string,
    keyed?: ReadonlySet<string>
  ) => Effect.Effect<ReadonlyArray<ClaimedJob>, SqlError>
}

/**
 * @since 0.1.0
 * @category tags
 */
export class Claimer extends Context.Tag("sqlane/Claimer")<Claimer, ClaimerShape>() {}

/**
 * The groups one claim of up to `limit` jobs reads: each group read may lock up to `limit` rows,
 * so at most about 500 rows are locked by one claim. The groups are best first, and those left out
 * are claimed next time.
 *
 * @since 0.2.0
 */
export const claimGroups = (groups: ReadonlyArray<Group>, limit: number): ReadonlyArray<Group> =>
  groups.slice(0, Math.max(1, Math.floor(500 / limit)))

/**
 * @since 0.1.0
 * @category constructors
 */
export const make: Effect.Effect<ClaimerShape, never, Database> = Effect.map(Database, ({ statements }) => ({
  probe: (names, nowUs) =>
    names.length === 0
      ? Effect.succeed({ due: [], nextUs: undefined })
      : Effect.map(statements.jobProbe(names), (rows) => {
        const due: Array<ProbeRow> = []
        let nextUs: number | undefined
        for (const row of rows) {
          if (row.nextUs <= nowUs) due.push(row)
          else if (nextUs === undefined || row.nextUs < nextUs) nextUs = row.nextUs
        }
        due.sort((a, b) => a.priority - b.priority || a.nextUs - b.nextUs)
        return { due, nextUs }
      }),
  claim: (groups, limit, nowUs, workerId, keyed) => {
    if (groups.length === 0 || limit <= 0) return Effect.succeed([])
    if (keyed !== undefined && keyed.size > 0 && groups.some((g) => keyed.has(g.name))) {
      return statements.jobClaimKeyed(claimGroups(groups, limit), limit, nowUs, workerId)
    }
    return statements.jobClaim(claimGroups(groups, limit), limit, nowUs, workerId)
  }
}))

export const layer: Layer.Layer<Claimer, never, Database> = Layer.effect(Claimer, make)
