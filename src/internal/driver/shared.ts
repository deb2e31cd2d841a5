/**
 * What both drivers share: the job states' bits and the checks the schema holds (`stateBits`,
 * `uniqueGuard`), reading rows (`num`, `toClaimed`…), the stale ends of a write, the keyed claim's
 * window and retry. (The workers' rows and lock names: `workerRows.ts`.)
 *
 * @internal
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type * as Statement from "@effect/sql/Statement"
import * as Effect from "effect/Effect"
import type { SqlError } from "@effect/sql/SqlError"
import { UniqueKeyContended } from "../../schema/Errors.js"
import type {
  ClaimedRow,
  Finish,
  JobListFilter,
  JobRow,
  JobSummaryRow,
  LimitRow,
  LimitUseRow,
  NameLimits,
  OrphanedRow,
  RateWindow,
  ScheduleRow,
  StaleEnds,
  StatsMinuteRow,
  StatsRow,
  UniqueInsertResult
} from "./Driver.js"
import { lostRace } from "./errors.js"
import type { Run } from "./run.js"

/**
 * The bit of each job state in a row's `unique_states` mask: the states in which the row holds its
 * unique key (pending and running always).
 */
export const stateBits = { pending: 1, running: 2, completed: 4, dead: 8, cancelled: 16 } as const

/**
 * Whether a row holds its unique key in its current state: its `unique_states` mask has the bit
 * of its state ({@link stateBits}). The same text (both dialects) is used by the index and by the
 * statements that read the holder of a key; shipped indexes hold it, so it never changes.
 * `alias` qualifies the columns, e.g. `"o."`.
 */
export const uniqueGuard = (alias = "") =>
  `(${alias}unique_states & CASE ${alias}state ${
    Object.entries(stateBits).map(([state, bit]) => `WHEN '${state}' THEN ${bit}`).join(" ")
  } ELSE 0 END) <> 0`

/** The states a job row may hold (migration 8): the database refuses any other. */
export const stateCheck = "state IN ('pending', 'running', 'completed', 'dead', 'cancelled')"
/** Attempt counts are never negative (migration 8). */
export const attemptsCheck = "attempts >= 0 AND attempt_base >= 0"

export const num = (u: unknown): number => (typeof u === "number" ? u : Number(u))
export const numOrNull = (u: unknown): number | null => (u === null || u === undefined ? null : num(u))

/** A rate of `<prefix>limits` from its two columns (null unless both are set). */
const rateOrNull = (starts: unknown, perMs: unknown): RateWindow | null =>
  starts === null || starts === undefined || perMs === null || perMs === undefined
    ? null
    : { starts: num(starts), perMs: num(perMs) }

/** The columns of `<prefix>limits` every read of it selects (`updated_at` is read by each driver as µs). */
export const limitColumns =
  "name, running, running_per_key, rate_starts, rate_per_ms, rate_per_key_starts, rate_per_key_per_ms"

/** A row of `<prefix>limits` as both drivers read it. */
export const toLimitRow = (r: any): LimitRow => ({
  name: r.name,
  running: numOrNull(r.running),
  runningPerKey: numOrNull(r.running_per_key),
  rate: rateOrNull(r.rate_starts, r.rate_per_ms),
  ratePerKey: rateOrNull(r.rate_per_key_starts, r.rate_per_key_per_ms),
  updatedAtUs: num(r.updated_at_us)
})

/** Whether a row of `<prefix>limits` still sets something (a row that sets nothing is deleted). */
export const limitRowSetsAny = (r: LimitRow): boolean =>
  r.running !== null || r.runningPerKey !== null || r.rate !== null || r.ratePerKey !== null

/** A row of `limitUse` as both drivers read it. */
export const toLimitUse = (r: any): LimitUseRow => ({
  name: r.name,
  running: num(r.running),
  runningKeyed: num(r.running_keyed),
  keys: num(r.keys),
  busiestKey: r.busiest_key === null || r.busiest_key === undefined ? undefined : String(r.busiest_key),
  busiestKeyRunning: num(r.busiest_key_running)
})

/**
 * The ends whose rows are deleted (completed, not `keep`, when completed rows are deleted at once)
 * and the rest, which are updated.
 */
export const splitEnds = (finishes: ReadonlyArray<Finish>, deleteCompleted: boolean) => {
  if (!deleteCompleted) return { removed: [], rest: finishes }
  const removed: Array<Finish> = []
  const rest: Array<Finish> = []
  for (const f of finishes) (f.state === "completed" && f.keep !== true ? removed : rest).push(f)
  return { removed, rest }
}

/** The key of an attempt's end among the stale ends of a write (`StaleEnds`). */
export const endKey = (id: string, attempt: number): string => `${id}:${attempt}`

/** The key of an end whose name slot did not pass to its `Finish.handTo`, among a write's `StaleEnds`. */
export const handKey = (id: string, attempt: number): string => `${id}:${attempt}>`

/**
 * A name slot passing in a write: from the attempt whose row holds it (`giver`, ended by the write)
 * to a running attempt claimed ahead without one (`receiver`); `ends`: the ends of the chain (the
 * giver's, and those of receivers ended by the same write, which passed the slot on).
 */
export interface Handover {
  readonly giverId: string
  readonly giverAttempt: number
  readonly receiverId: string
  readonly receiverAttempt: number
  readonly slot: number
  readonly ends: ReadonlyArray<Finish>
}

/**
 * The slots that pass in a write of `finishes` (`Finish.handTo`): a receiver whose own end is in
 * the write passes the slot on to its own receiver, or, without one, frees it with its end; so each
 * chain becomes one handover from its first giver to its last receiver still running, and a chain
 * that ends in the write passes nothing (the write frees its slot with its last end).
 */
export const handoversOf = (finishes: ReadonlyArray<Finish>): ReadonlyArray<Handover> => {
  const handing = finishes.filter((f) => f.handTo !== undefined)
  if (handing.length === 0) return []
  const byAttempt = new Map(finishes.map((f) => [endKey(f.id, f.attempt), f]))
  const received = new Set(handing.map((f) => endKey(f.handTo!.id, f.handTo!.attempt)))
  const handovers: Array<Handover> = []
  for (const giver of handing) {
    // A chain starts at a giver that received nothing in this write.
    if (received.has(endKey(giver.id, giver.attempt))) continue
    const ends: Array<Finish> = [giver]
    let to: Finish["handTo"] = giver.handTo
    let next: Finish | undefined
    while (to !== undefined && (next = byAttempt.get(endKey(to.id, to.attempt))) !== undefined && ends.length <= finishes.length) {
      ends.push(next)
      to = next.handTo
    }
    if (to !== undefined && next === undefined) {
      handovers.push({
        giverId: giver.id,
        giverAttempt: giver.attempt,
        receiverId: to.id,
        receiverAttempt: to.attempt,
        slot: giver.handTo!.slot,
        ends
      })
    }
  }
  return handovers
}

/**
 * `stale` with the `handKey` of every end whose slot did not pass: the ends of handovers not in
 * `passed` (by the giver's `endKey`), and `unwritten` (ends a failed or partial write did not pass).
 * The ends of a chain that ended in the write (see `handoversOf`) are not among them: their
 * slot passed here from attempt to attempt, and the write frees it with the chain's last end, as it
 * frees the slot of an end that passes nothing.
 */
export const withUnhanded = (
  stale: StaleEnds,
  handovers: ReadonlyArray<Handover>,
  unwritten: ReadonlyArray<Finish>,
  passed: ReadonlySet<string>
): StaleEnds => {
  const unhanded = [
    ...unwritten,
    ...handovers.filter((h) => !passed.has(endKey(h.giverId, h.giverAttempt))).flatMap((h) => h.ends)
  ].filter((f) => f.handTo !== undefined)
  if (unhanded.length === 0) return stale
  const all = new Set(stale)
  for (const f of unhanded) all.add(handKey(f.id, f.attempt))
  return all
}

export const noStaleEnds: StaleEnds = new Set()

/**
 * The ends of `finishes` that changed nothing, from the ends written (`id:attempt,…`), or none
 * when `written` is null (every end was written).
 */
export const staleEnds = (finishes: ReadonlyArray<Finish>, written: string | null): StaleEnds => {
  if (written === null) return noStaleEnds
  const applied = new Set(written === "" ? [] : written.split(","))
  const stale = new Set<string>()
  for (const f of finishes) {
    const key = endKey(f.id, f.attempt)
    if (!applied.has(key)) stale.add(key)
  }
  return stale
}

/**
 * Of `finishes`, the ends their rows (`rows`: id, attempts, state, free — worker_id IS NULL —,
 * run_at_us, finished_at_us) do not hold: a row holds an end when it has what the end wrote; a
 * deleted row's end (see `splitEnds`), when the row is gone.
 */
export const notHeld = (finishes: ReadonlyArray<Finish>, rows: ReadonlyArray<any>, deleteCompleted: boolean): StaleEnds => {
  const now = new Map(rows.map((r) => [String(r.id), r]))
  const deleted = new Set(splitEnds(finishes, deleteCompleted).removed)
  const stale = new Set<string>()
  for (const f of finishes) {
    const r = now.get(f.id)
    const held = deleted.has(f)
      ? r === undefined
      : r !== undefined && (r.free === true || Number(r.free) === 1) && (f.state === "released"
        ? r.state === "pending" && num(r.attempts) === f.attempt - 1
        : r.state === f.state && num(r.attempts) === f.attempt &&
          (f.runAtUs === null || numOrNull(r.run_at_us) === f.runAtUs) &&
          numOrNull(r.finished_at_us) === f.finishedAtUs)
    if (!held) stale.add(endKey(f.id, f.attempt))
  }
  return stale
}

/** Of `attempts`, those whose row (id, attempts, state) is gone, not running, or at another attempt. */
export const staleAttempts = (
  attempts: ReadonlyArray<{ readonly id: string; readonly attempt: number }>,
  rows: ReadonlyArray<any>
) => {
  const now = new Map(rows.map((r) => [String(r.id), r]))
  return attempts.filter((a) => {
    const r = now.get(a.id)
    return r === undefined || r.state !== "running" || num(r.attempts) !== a.attempt
  })
}

export const toClaimed = (r: any): ClaimedRow => ({
  id: String(r.id),
  name: r.name,
  payload: r.payload,
  attempts: num(r.attempts),
  attemptBase: num(r.attempt_base ?? 0),
  priority: num(r.priority),
  runAtUs: num(r.run_at_us),
  createdAtUs: num(r.created_at_us),
  errors: r.errors ?? null,
  traceContext: r.trace_context ?? null,
  keepsKey: r.unique_states !== null && r.unique_states !== undefined && (num(r.unique_states) & stateBits.completed) !== 0,
  ...(r.name_slot === null || r.name_slot === undefined ? {} : { nameSlot: num(r.name_slot) }),
  // A claim with fair shares (PostgreSQL) gives each job its key and the key's turn (0: none).
  ...(r.fair_key === null || r.fair_key === undefined || !(num(r.fair_ord) > 0) ? {} : { fairKey: String(r.fair_key) })
})

/** A row of `jobListOrphaned` (both dialects select the same columns; booleans may come as 0/1). */
export const toOrphaned = (r: any): OrphanedRow => ({
  ...toClaimed(r),
  workerId: r.worker_id ?? null,
  claimedAtUs: num(r.claimed_at_us),
  expired: r.expired === true || Number(r.expired) === 1,
  relocking: r.relocking === true || Number(r.relocking) === 1,
  relocks: num(r.relocks)
})

export const toJobRow = (r: any): JobRow => ({
  ...toClaimed(r),
  state: r.state,
  claimedAtUs: numOrNull(r.claimed_at_us),
  finishedAtUs: numOrNull(r.finished_at_us),
  lastError: r.last_error ?? null,
  result: r.result ?? null
})

/** No concurrency limits (a keyed claim of names without any). */
export const noLimits: ReadonlyMap<string, NameLimits> = new Map()

/** Rows a keyed claim locks to find `limit` jobs: some jobs of the window may share a key. */
export const keyedWindow = (limit: number) => String(Math.floor(limit) * 2 + 16)

/**
 * Rows a keyed claim's arm locks for a name limited by its limits `l`: `keyedWindow`, and no more
 * than the name's limit when nothing else limits it (no per-key limit, no fair shares): no claim
 * can start more of its jobs than that.
 */
export const nameWindow = (limit: number, l: NameLimits | undefined): string =>
  l?.running !== undefined && l.runningPerKey === undefined && l.fair !== true
    ? String(Math.max(1, Math.min(Number(keyedWindow(limit)), l.running)))
    : keyedWindow(limit)

/** Tries a keyed claim again when it lost a race for a slot or a key (`lostRace`), up to 5 times. */
export const retryKeyed = <A>(claim: Effect.Effect<ReadonlyArray<A>, SqlError>): Effect.Effect<ReadonlyArray<A>, SqlError> => {
  const go = (tries: number): Effect.Effect<ReadonlyArray<A>, SqlError> =>
    Effect.catchIf(claim, lostRace, () => (tries >= 5 ? Effect.succeed([]) : go(tries + 1)))
  return go(1)
}

export const byClaimOrder = (a: ClaimedRow, b: ClaimedRow) =>
  a.priority - b.priority || a.runAtUs - b.runAtUs || (BigInt(a.id) < BigInt(b.id) ? -1 : 1)

/**
 * `jobInsertUnique`'s loop, alike on both databases: `write` inserts the job (or, with a mode that
 * replaces, gives a pending holder of the same name its values) and says what it did, or gives
 * `undefined` when another job holds the key and was left as it is; then `holder` reads that job's id
 * (in a statement of its own, which sees a holder that committed while the write waited for it). When
 * the holder left its guarded states in between (`undefined`), the write is tried again, up to 10 times.
 */
export const insertUnique = (
  jobName: string,
  uniqueKey: string,
  write: Effect.Effect<UniqueInsertResult | undefined, SqlError>,
  holder: Effect.Effect<string | undefined, SqlError>
): Effect.Effect<UniqueInsertResult, SqlError | UniqueKeyContended> => {
  const go = (tries: number): Effect.Effect<UniqueInsertResult, SqlError | UniqueKeyContended> =>
    Effect.flatMap(write, (written) =>
      written !== undefined
        ? Effect.succeed(written)
        : Effect.flatMap(holder, (held) =>
          held !== undefined
            ? Effect.succeed({ id: held, inserted: false, replaced: false })
            : tries >= 10
            ? Effect.fail(new UniqueKeyContended({ job: jobName, key: uniqueKey }))
            : go(tries + 1)))
  return go(1)
}

/** The first row's `id` as a string, or `undefined` when there is no row. */
export const firstId = (rows: ReadonlyArray<{ readonly id: unknown }>): string | undefined =>
  rows.length > 0 ? String(rows[0].id) : undefined

/** The five job states. */
export const jobStates = ["pending", "running", "completed", "dead", "cancelled"] as const

/**
 * Whether the job list reads one index range per state and merges them (newest first): a job
 * name's jobs of every state, where the (name, state, id) index holds each state as its own range.
 * An id or a unique key selects through its own index instead.
 */
export const listByStates = (filter: JobListFilter): boolean =>
  filter.name !== undefined && filter.state === undefined && filter.id === undefined && filter.uniqueKey === undefined

/** A job state as an SQL literal's text: only the five states pass (anything else is a defect). */
export const stateLiteral = (state: string): string => {
  if (!["pending", "running", "completed", "dead", "cancelled"].includes(state)) throw new Error(`not a job state: ${state}`)
  return state
}

/**
 * `migrationList`, alike on both databases but for the expression of the current schema
 * (`current_schema()`, `DATABASE()`).
 */
export const migrationList = (sql: SqlClient.SqlClient, prefix: string, currentSchema: string) => () =>
  Effect.gen(function*() {
    const [exists] = yield* sql<{ n: string }>`SELECT COUNT(*) AS n FROM information_schema.tables
      WHERE table_schema = ${sql.literal(currentSchema)} AND table_name = ${`${prefix}migrations`}`
    if (num(exists?.n ?? 0) === 0) return undefined
    const rows = yield* sql<{ id: number }>`SELECT migration_id AS id FROM ${sql(`${prefix}migrations`)}
      ORDER BY migration_id`
    return rows.map((r) => num(r.id))
  })

/** The tables sqlane's migrations create for a prefix (its migrations table last). */
export const tableNames = ["jobs", "workers", "schedules", "paused", "limits", "rates", "stats", "migrations"] as const

/** `migrationDropAll`, the same statements on both databases. */
export const migrationDropAll = (sql: SqlClient.SqlClient, prefix: string) => () =>
  Effect.forEach(tableNames, (table) => sql`DROP TABLE IF EXISTS ${sql(`${prefix}${table}`)}`, { discard: true })

/** `jobNewestId`, the same SQL on both dialects. */
export const newestId = (run: Run, sql: SqlClient.SqlClient, jobs: Statement.Identifier) =>
  Effect.map(
    run(sql<{ id: string | null }>`SELECT MAX(id) AS id FROM ${jobs}`),
    (rows) => (rows[0]?.id === null || rows[0]?.id === undefined ? null : String(rows[0].id))
  )

export const toSummary = (r: any): JobSummaryRow => ({
  id: String(r.id),
  name: r.name,
  state: r.state,
  attempts: num(r.attempts),
  priority: num(r.priority),
  runAtUs: num(r.run_at_us),
  createdAtUs: num(r.created_at_us),
  claimedAtUs: numOrNull(r.claimed_at_us),
  finishedAtUs: numOrNull(r.finished_at_us),
  workerId: r.worker_id ?? null,
  lastError: r.last_error ?? null,
  progress: r.progress ?? null
})

export const toStats = (r: any): StatsRow => ({
  name: r.name,
  state: r.state,
  count: num(r.n),
  due: num(r.due ?? 0),
  oldestDueUs: numOrNull(r.oldest_due_us),
  recent: num(r.recent ?? 0)
})

/**
 * The upper bounds (ms) of the pickup-latency buckets of `<prefix>stats`, in order; one bucket more
 * counts what is above the last. Fixed: each bucket is a column (migration 14), and processes add
 * their counts bucket by bucket.
 */
export const pickupBoundsMs: ReadonlyArray<number> = [
  1, 2, 5, 10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 30_000, 60_000, 300_000, 900_000, 3_600_000
]

/** The columns of the pickup buckets (`pickup_le_<bound>`, then `pickup_more`), in bucket order. */
export const pickupColumns: ReadonlyArray<string> = [...pickupBoundsMs.map((b) => `pickup_le_${b}`), "pickup_more"]

/** A row of `<prefix>stats` as both drivers read it. */
/**
 * `statsAdd` of either dialect: the rows in primary-key order (minute, name), so that concurrent
 * upserts lock shared rows in one order, written by `upsert` in statements of at most `chunk` rows;
 * several in one transaction, so a failed flush adds nothing and its counts are kept for the next.
 */
export const statsAddChunked = (
  sql: SqlClient.SqlClient,
  rows: ReadonlyArray<StatsMinuteRow>,
  chunk: number,
  upsert: (rows: ReadonlyArray<StatsMinuteRow>) => Effect.Effect<unknown, SqlError>
): Effect.Effect<void, SqlError> => {
  if (rows.length === 0) return Effect.void
  const sorted = [...rows].sort((a, b) => a.minuteUs - b.minuteUs || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
  const statements: Array<Effect.Effect<unknown, SqlError>> = []
  for (let i = 0; i < sorted.length; i += chunk) statements.push(upsert(sorted.slice(i, i + chunk)))
  return statements.length === 1
    ? Effect.asVoid(statements[0])
    : sql.withTransaction(Effect.forEach(statements, (s) => s, { discard: true }))
}

/**
 * Whether a schedule row's `last_tick_at` is the placeholder of a row without a tick (-infinity on
 * PostgreSQL, year 1000 on MySQL/MariaDB): a row described before its first tick, or a first tick's
 * row being written.
 */
export const noTick = (lastTickUs: number): boolean => lastTickUs < -2208988800000000

/** A row of `scheduleList` (both dialects select the same columns; times as µs). */
export const toScheduleRow = (r: any): ScheduleRow => {
  const last = num(r.last_tick_us)
  return {
    name: String(r.name),
    lastTickUs: noTick(last) ? null : last,
    updatedAtUs: num(r.updated_at_us),
    jobName: r.job_name == null ? null : String(r.job_name),
    expression: r.expression == null ? null : String(r.expression),
    timeZone: r.time_zone == null ? null : String(r.time_zone),
    nextTickUs: r.next_tick_us == null ? null : num(r.next_tick_us)
  }
}

export const toStatsMinuteRow = (r: any): StatsMinuteRow => ({
  name: r.name,
  minuteUs: num(r.minute_us),
  completed: num(r.completed),
  failed: num(r.failed),
  pickup: pickupColumns.map((c) => num(r[c]))
})

/** The pruner's lock name for a table prefix (at most 53 characters: MySQL allows 64). */
export const prunerLockName = (prefix: string) => `sqlane:prune:${prefix}`
