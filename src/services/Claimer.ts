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
 * While a worker has a backlog, most of its claims are made with the write of its ends
 * (`finishAndClaim`, called by the Completer's batch): the ends free slots and the claim fills them
 * in one commit — on PostgreSQL the claim statement inside the ends' statement, on MySQL/MariaDB
 * the same locking reads and update in the ends' transaction.
 *
 * Every claim that commits is told to the facts hub (`internal/facts.ts`), which `Events` turns
 * into `Claimed` events.
 *
 * @since 0.1.0
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { Database } from "../internal/Database.js"
import type { Ahead, ClaimedRow, Finish, Group, KeyedClaim, NameLimits, ProbeRow, RatedClaim, StaleEnds } from "../internal/driver/Driver.js"
import { isRated } from "../internal/driver/rateWindows.js"
import { Facts } from "../internal/facts.js"

export type { Group } from "../internal/driver/Driver.js"

/**
 * What a probe found: the (name, priority) groups with due jobs, best first, and when the next
 * pending job not yet due is due.
 *
 * @example
 * ```ts
 * const claimer = yield* Claimer.Claimer
 * const probe = yield* claimer.probe(["send-email"], Date.now() * 1000)
 * if (probe.due.length === 0 && probe.nextUs !== undefined) yield* Effect.log(`next job due at ${new Date(probe.nextUs / 1000).toISOString()}`)
 * ```
 *
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
 * @example
 * ```ts
 * const jobs: ReadonlyArray<Claimer.ClaimedJob> = yield* claimer.claim(probe.due, 10, Date.now() * 1000, "worker-1")
 * for (const job of jobs) yield* Effect.log(`claimed ${job.name} ${job.id}, attempt ${job.attempt}`)
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export type ClaimedJob = ClaimedRow

/**
 * What `finishAndClaim` did: the jobs it claimed, in claim order, and the ends that changed nothing
 * (by `<id>:<attempt>`: their attempt was stale — the job was cancelled, or rescued from a worker
 * taken for lost, while it ran).
 *
 * @example
 * ```ts
 * const { claimed, stale } = yield* claimer.finishAndClaim(ends, groups, 10, Date.now() * 1000, "worker-1")
 * yield* Effect.log(`${claimed.length} claimed, ${stale.size} stale end(s)`)
 * ```
 *
 * @since 0.2.0
 * @category models
 */
export interface FinishedAndClaimed {
  readonly claimed: ReadonlyArray<ClaimedJob>
  readonly stale: ReadonlySet<string>
}

/**
 * What the `Claimer` service does: probe for due jobs, claim them for a worker, and write ends and
 * a claim together. Workers use it; an app rarely does.
 *
 * @example
 * ```ts
 * const claimer = yield* Claimer.Claimer
 * const probe = yield* claimer.probe(["send-email"], Date.now() * 1000)
 * const jobs = yield* claimer.claim(probe.due, 10, Date.now() * 1000, "worker-1")
 * ```
 *
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
    keyed?: ReadonlySet<string>,
    /** The concurrency limits of the names under one: a job of such a name is claimed only with a free slot. */
    limits?: ReadonlyMap<string, NameLimits>
  ) => Effect.Effect<ReadonlyArray<ClaimedJob>, SqlError>
  /**
   * `claim`, and what rate limits held back: the names that may start no job before an instant
   * (µs since the epoch) and the earliest instant a concurrency key left out may start again. A
   * name under a rate limit (`rate`, `ratePerKey` of `limits`) is claimed within its windows.
   */
  readonly claimWithHolds: (
    groups: ReadonlyArray<Group>,
    limit: number,
    nowUs: number,
    workerId: string,
    keyed?: ReadonlySet<string>,
    limits?: ReadonlyMap<string, NameLimits>,
    /** Jobs of limited names it may take without a slot, to wait for one handed over (not with rate limits). */
    ahead?: Ahead
  ) => Effect.Effect<RatedClaim, SqlError>
  /**
   * Whether `finishAndClaim` writes the ends and the claim in one commit (the driver's
   * `claimsRideOnEnds`): one statement on PostgreSQL, one transaction on MySQL/MariaDB. When not,
   * it writes the ends, then claims.
   */
  readonly claimsOnEnds: boolean
  /**
   * Writes the ends of attempts (each guarded by its id, attempt and `state = 'running'`, as the
   * Completer writes them) and claims up to `limit` due jobs of `groups` for `workerId`, as `claim`
   * does for names without mutex keys — or, with `keyed`, as `claim` does for keyed names (mutex
   * keys, concurrency limits, fair shares; not rate limits), after the ends in the same
   * transaction, so that the slots and keys the ends free are taken in the same commit. Used by the
   * Completer's batch for the worker whose ends free the slots the claim fills.
   */
  readonly finishAndClaim: (
    ends: ReadonlyArray<Finish>,
    groups: ReadonlyArray<Group>,
    limit: number,
    nowUs: number,
    workerId: string,
    keyed?: KeyedClaim
  ) => Effect.Effect<FinishedAndClaimed, SqlError>
}

/**
 * The claim service: finds due jobs and claims them with `FOR UPDATE SKIP LOCKED`. Provided by
 * `QueueLive`.
 *
 * @example
 * ```ts
 * // Provided by QueueLive; workers claim through it
 * const due = Effect.flatMap(Claimer.Claimer, (claimer) => claimer.probe(["send-email"], Date.now() * 1000))
 * ```
 *
 * @since 0.1.0
 * @category tags
 */
export class Claimer extends Context.Tag("sqlane/Claimer")<Claimer, ClaimerShape>() {}

/**
 * The groups one claim of up to `limit` jobs reads: each group read may lock up to `limit` rows,
 * so at most about 500 rows are locked by one claim. The groups are best first, and those left out
 * are claimed next time.
 *
 * @example
 * ```ts
 * const groups = Claimer.claimGroups(probe.due, 50) // at most 10 groups for a claim of 50 jobs
 * ```
 *
 * @since 0.2.0
 */
export const claimGroups = (groups: ReadonlyArray<Group>, limit: number): ReadonlyArray<Group> =>
  groups.slice(0, Math.max(1, Math.floor(500 / limit)))

/**
 * Builds the `Claimer` service on sqlane's internal `Database` (used by {@link layer}).
 *
 * @example
 * ```ts
 * // QueueLive provides Claimer; this is how it builds it
 * const ClaimerLive = Layer.effect(Claimer.Claimer, Claimer.make)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make: Effect.Effect<ClaimerShape, never, Database | Facts> = Effect.gen(function*() {
  const { driver } = yield* Database
  const facts = yield* Facts
  /** Tells the hub what a claim that committed took. */
  const told = (workerId: string, nowUs: number) => (rows: ReadonlyArray<ClaimedRow>) => {
    if (rows.length > 0 && facts.wanted()) facts.claimed(rows, workerId, nowUs)
  }
  const finishAndClaim = driver.capabilities.claimsRideOnEnds ? driver.jobFinishManyAndClaim : undefined
  const claimsOnEnds = finishAndClaim !== undefined
  const noHolds = (claimed: ReadonlyArray<ClaimedRow>): RatedClaim => ({ claimed, heldUntilUs: new Map(), keyWakeUs: undefined, keyAdmitsUs: undefined })
  const claimWithHolds: ClaimerShape["claimWithHolds"] = (groups, limit, nowUs, workerId, keyed, limits, ahead) => {
    if (groups.length === 0 || limit <= 0) return Effect.succeed(noHolds([]))
    const some = claimGroups(groups, limit)
    const claimed = limits !== undefined && some.some((g) => isRated(limits.get(g.name)))
      ? driver.jobClaimRated(some, limit, nowUs, workerId, limits)
      : keyed !== undefined && keyed.size > 0 && groups.some((g) => keyed.has(g.name))
      ? Effect.map(driver.jobClaimKeyed(some, limit, nowUs, workerId, limits, ahead), noHolds)
      : Effect.map(driver.jobClaim(some, limit, nowUs, workerId), noHolds)
    return Effect.tap(claimed, (r) => told(workerId, nowUs)(r.claimed))
  }
  return {
    probe: (names, nowUs) =>
      names.length === 0
        ? Effect.succeed({ due: [], nextUs: undefined })
        : Effect.map(driver.jobProbe(names), (rows) => {
          const due: Array<ProbeRow> = []
          let nextUs: number | undefined
          for (const row of rows) {
            if (row.nextUs <= nowUs) due.push(row)
            else if (nextUs === undefined || row.nextUs < nextUs) nextUs = row.nextUs
          }
          due.sort((a, b) => a.priority - b.priority || a.nextUs - b.nextUs)
          return { due, nextUs }
        }),
    claim: (groups, limit, nowUs, workerId, keyed, limits) => Effect.map(claimWithHolds(groups, limit, nowUs, workerId, keyed, limits), (r) => r.claimed),
    claimWithHolds,
    claimsOnEnds,
    finishAndClaim: (ends, groups, limit, nowUs, workerId, keyed) => {
      const claimed = finishAndClaim !== undefined && groups.length > 0 && limit > 0
        ? finishAndClaim(ends, claimGroups(groups, limit), limit, nowUs, workerId, keyed)
        : Effect.flatMap(driver.jobFinishMany(ends), (stale: StaleEnds) =>
          groups.length === 0 || limit <= 0
            ? Effect.succeed({ claimed: [], stale })
            : Effect.map(
              keyed === undefined
                ? driver.jobClaim(claimGroups(groups, limit), limit, nowUs, workerId)
                : driver.jobClaimKeyed(claimGroups(groups, limit), limit, nowUs, workerId, keyed.limits, keyed.ahead),
              (claimed) => ({ claimed, stale })
            ))
      return Effect.tap(claimed, ({ claimed }) => told(workerId, nowUs)(claimed))
    }
  }
})

/**
 * The `Claimer` service as a layer; `QueueLive` includes it.
 *
 * @example
 * ```ts
 * // Part of QueueLive; an app provides QueueLive instead
 * const AppLive = QueueLive().pipe(Layer.provideMerge(ClientLive))
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<Claimer, never, Database | Facts> = Layer.effect(Claimer, make)
