/**
 * MySQL/MariaDB: the probe, the claims (plain and keyed, each a locking read per group and an
 * update in one transaction), the ends of attempts (alone, or with a claim riding on them), and the
 * due count.
 *
 * @internal
 */
import type * as Statement from "@effect/sql/Statement"
import * as Effect from "effect/Effect"
import { isUniqueViolation } from "../errors.js"
import * as MysqlText from "../../mysqlText.js"
import type { Ahead, ClaimedRow, Finish, Group, JobsExplain, JobsOps, NameLimits } from "../Driver.js"
import { type HeldSlot, type Picked, pickWithSlots } from "../limitSlots.js"
import {
  byClaimOrder,
  keyedWindow,
  nameWindow,
  noLimits,
  noStaleEnds,
  notHeld,
  num,
  retryKeyed,
  toClaimed
} from "../shared.js"
import {
  allowance,
  heldAfter,
  isRated,
  ratedNames,
  startsTaken,
  takeStart,
  type WindowRow,
  windowsWanted
} from "../rateWindows.js"
import { keyOf, type MysqlContext } from "./context.js"
import * as FairKeys from "./fairShares.js"
import * as Ends from "./ends.js"
import * as Rates from "./rates.js"

export const make = (ctx: MysqlContext): JobsOps & JobsExplain => {
  const { claimedColumns, deleteCompleted, jobs, pendingIndex, prefix, run, runPlain, sql, ts, usOf } = ctx
  const windows = Rates.make(ctx)
  // With the index (state, name, priority, run_at, id) the probe is a loose index scan ("Using
  // index for group-by"): one index dive per (name, priority) with pending jobs, of any name; the
  // caller keeps its own names. A filter on the names in the statement (in WHERE, or in HAVING,
  // which MariaDB pushes into WHERE) makes MariaDB read every pending job of those names instead.
  // The index is forced: on fresh statistics MariaDB has been seen to pick another and sort.
  const probeStatement = () =>
    sql<{ name: string; priority: number; next_us: number }>`SELECT name, priority, ${
      sql.literal(usOf("MIN(run_at)"))
    } AS next_us FROM ${jobs} FORCE INDEX (${pendingIndex})
      WHERE state = 'pending' GROUP BY state, name, priority ORDER BY NULL`
  // One range of that index per group, read in claim order: no filesort, and only the rows
  // returned are locked.
  const claimSelect = (g: Group, limit: number, nowUs: number) =>
    sql`SELECT ${claimedColumns} FROM ${jobs} FORCE INDEX (${pendingIndex})
      WHERE state = 'pending' AND name = ${g.name} AND priority = ${g.priority} AND run_at <= ${ts(nowUs)}
        AND mutex_key IS NULL
      ORDER BY run_at, id LIMIT ${sql.literal(String(Math.floor(limit)))}
      FOR UPDATE SKIP LOCKED`
  /**
   * A group's window of the keyed claim: due jobs in claim order, leaving out jobs whose mutex key
   * has a running job, jobs whose concurrency key has no free slot, and every job of a name with no
   * free slot (each count a range of a slot index: the running slots only). Each job comes with the
   * slots its key's running attempts hold (`held_key_slots`). The choice among them, and the slots
   * they take, is `pickWithSlots`'s.
   */
  const claimKeyedSelect = (
    g: Group,
    limit: number,
    nowUs: number,
    limits: ReadonlyMap<string, NameLimits>,
    rated: boolean = false,
    /**
     * Fair shares: the jobs of one key only (null: those without a key), read through the index
     * `jobs_pending_key`, at most `window`; the key's slots and rate were checked when its keys were read.
     */
    only?: { readonly key: string | null; readonly window: number },
    /** Its jobs may be taken without a slot (`Ahead`): no slot check, a full window. */
    ahead = false
  ) => {
    const l = limits.get(g.name)
    const perKey = l?.runningPerKey
    const running = l?.running
    // Correlated subqueries, not derived tables: MariaDB has no outer references in a derived table.
    const keySlots = (what: string) =>
      sql`SELECT ${sql.literal(what)} FROM ${jobs} r FORCE INDEX (${sql(`${prefix}jobs_key_slot`)})
          WHERE r.name = j.name AND r.limit_key_running = j.limit_key`
    const heldKeySlots = perKey === undefined
      ? sql.literal("")
      : sql`, (${keySlots("GROUP_CONCAT(r.key_slot)")}) AS held_key_slots`
    const keyFree = perKey === undefined || only !== undefined
      ? sql.literal("")
      : sql`
        AND (limit_key IS NULL OR (${keySlots("COUNT(*)")}) < ${perKey})`
    const nameFree = running === undefined || ahead ? sql.literal("") : sql`
        AND (SELECT COUNT(*) FROM ${jobs} r FORCE INDEX (${sql(`${prefix}jobs_name_slot`)})
          WHERE r.name_slot_running IS NOT NULL AND r.name = ${g.name}) < ${running}`
    const index = only === undefined ? pendingIndex : sql(`${prefix}jobs_pending_key`)
    const ofKey = only === undefined
      ? sql.literal("")
      : only.key === null
      ? sql.literal(" AND limit_key IS NULL")
      : sql` AND limit_key = ${only.key}`
    return sql`SELECT ${claimedColumns}, mutex_key, limit_key${heldKeySlots} FROM ${jobs} j FORCE INDEX (${index})
      WHERE state = 'pending' AND name = ${g.name} AND priority = ${g.priority}${ofKey} AND run_at <= ${ts(nowUs)}
        AND (mutex_key IS NULL OR NOT EXISTS (SELECT 1 FROM ${jobs} r WHERE r.mutex_running = j.mutex_key))${keyFree}${nameFree}${
      rated && (only === undefined || only.key === null) ? windows.keyRateOpen(g.name, nowUs, limits) : sql.literal("")
    }
      ORDER BY run_at, id LIMIT ${
      sql.literal(only === undefined ? (ahead ? String(Math.max(1, Math.floor(limit))) : nameWindow(limit, limits.get(g.name))) : String(only.window))
    }
      FOR UPDATE SKIP LOCKED`
  }
  /**
   * The name slots running attempts of the limited names among `names` hold: one range of the name
   * slot index (its running slots), at the claim's READ COMMITTED (the newest committed rows). A
   * slot taken by a claim that commits after this read makes this claim's update fail on the index,
   * and the claim is tried again. (Key slots come with each candidate: `held_key_slots`.)
   */
  const heldSlotsStatement = (names: ReadonlyArray<string>) =>
    sql`SELECT name, name_slot_running AS slot FROM ${jobs} FORCE INDEX (${sql(`${prefix}jobs_name_slot`)})
        WHERE name_slot_running IS NOT NULL AND name IN ${sql.in(names)}`
  const { candidatesOf, explainable, readFairKeys, rotate } = FairKeys.make(ctx, windows.keyRateOpen)
  /**
   * A group's locking read in a keyed claim: its window (`claimKeyedSelect`), or with fair shares
   * (`keys`: the group's keys to read) each key's first due jobs, twice its equal share of the claim,
   * and the first due jobs without a key.
   */
  const keyedRead = (
    groups: ReadonlyArray<Group>,
    limit: number,
    nowUs: number,
    limits: ReadonlyMap<string, NameLimits>,
    fair: FairKeys.FairRead | undefined,
    rated: ReadonlyArray<string> = [],
    ahead?: Ahead
  ) =>
  (g: Group): readonly [string, ReadonlyArray<unknown>] => {
    const isRated = rated.includes(g.name)
    if (fair === undefined || limits.get(g.name)?.fair !== true) {
      return claimKeyedSelect(g, limit, nowUs, limits, isRated, undefined, ahead?.names.has(g.name) === true).compile(true)
    }
    const keys = fair.keys.get(groups.indexOf(g)) ?? []
    const share = Math.min(Math.floor(limit), Math.ceil((2 * limit) / Math.max(keys.length, 1)))
    const reads = [
      ...keys.map((k) => claimKeyedSelect(g, limit, nowUs, limits, isRated, { key: k.key, window: share })),
      claimKeyedSelect(g, limit, nowUs, limits, isRated, { key: null, window: Number(keyedWindow(limit)) })
    ]
    return sql`${sql.join(" UNION ALL ", false)(reads.map((r) => sql`(${r})`))}`.compile(true)
  }
  /**
   * The paused check of a claim: which of `names` (the claim's job names, `p0`, `p1`, … in their
   * order) are paused, as one read of the paused table's primary key (the table holds a row per
   * paused name: a few rows). Each row read says which names it equals, compared by SQL, so by the
   * table's collation (utf8mb4_bin, PAD SPACE: a pause of "name " holds "name" too).
   *
   * Why it runs as it does (InnoDB): a claim's locking reads (`FOR UPDATE SKIP LOCKED`) see the
   * newest committed jobs, while a plain read in the same statement reads a snapshot (its read
   * view) that may predate the pause — so a paused check inside the locking read could see a job
   * enqueued after the pause and miss the pause. This check is a statement of its own, run after
   * the locking reads in the same transaction (`claimInTransaction`), and a locking read itself
   * (`LOCK IN SHARE MODE`, which MySQL 8.0 and MariaDB both accept): it reads the newest committed
   * paused rows, whatever the isolation level. A job it locked and the claim takes was committed
   * before the locking read, so a pause that committed before that job's enqueue began is seen
   * here and the job is left out (its row lock is released at COMMIT). What a claim in flight when
   * the pause commits may still take is a job already locked before the commit: one enqueued before
   * the pause committed.
   *
   * Its cost and its locks: the claim runs at READ COMMITTED, where a locking read of a key that is
   * not there locks nothing (no gap locks), so when no name is paused it takes no lock; a paused
   * name's row gets a shared lock until the claim's COMMIT. `pausedInsert` (`INSERT IGNORE`: a new
   * row, or a shared lock on the existing one) and `pausedDelete` (one row) are one statement each
   * and lock no jobs, so they and a claim never wait for each other in a cycle: at worst one waits
   * for the other's short transaction. (A pause inside an app's longer transaction holds its row
   * until that commits: claims of that name wait for it.) No LIMIT in the read: MariaDB refuses one
   * inside `IN (subquery)`, and none is needed.
   */
  const pausedStatement = (names: ReadonlyArray<string>) =>
    sql`SELECT ${sql.join(", ", false)(names.map((n, i) => sql`name = ${n} AS ${sql(`p${i}`)}`))}
      FROM ${sql(`${prefix}paused`)} WHERE name IN ${sql.in(names)} LOCK IN SHARE MODE`
  /** The distinct job names of `groups`, in order. */
  const namesOf = (groups: ReadonlyArray<Group>) => Array.from(new Set(groups.map((g) => g.name)))
  const explain = (statement: Statement.Statement<unknown>) => {
    const [text, params] = statement.compile(true)
    return Effect.map(
      run(sql.unsafe<Record<string, unknown>>(`EXPLAIN ${text}`, params), "unprepared"),
      (rows) => rows.map((r) => JSON.stringify(r))
    )
  }
  /**
   * A claim: at READ COMMITTED, so the locking reads take no gap locks that would block (or
   * deadlock with) the app's transactions enqueueing jobs; in two round trips on one connection
   * (multi-statement): the locking reads (`select`, one per group) and the paused check
   * (`pausedStatement`, after them), then one update of the rows `pick` keeps from the result sets
   * of the groups whose name is not paused (a paused name's set is passed empty). Rows read but not
   * kept are unlocked at COMMIT. With `before` (a ride), the ends are written first; when fewer rows
   * changed than there were ends, the transaction is rolled back and the ends are written alone,
   * exactly (`finishExactly`), with nothing claimed.
   */
  const claimInTransaction = (
    groups: ReadonlyArray<Group>,
    select: (group: Group) => readonly [string, ReadonlyArray<unknown>],
    /** The rows to claim, from the result sets of the groups' reads and of `after`'s (last). */
    pick: (
      sets: ReadonlyArray<ReadonlyArray<any>>,
      after: ReadonlyArray<any>,
      windows: ReadonlyArray<any>
    ) => ReadonlyArray<ClaimedRow | Picked>,
    nowUs: number,
    workerId: string,
    /** The ends a claim rides on, written first in the same transaction. */
    before?: ReadonlyArray<Finish>,
    /** A read run after the paused check, in the same transaction. */
    after?: readonly [string, ReadonlyArray<unknown>],
    /**
     * Rate windows: statements run after the reads, in a round trip of their own, given the sets
     * the groups' reads kept (none: no round trip), whose last result set `pick` gets as its third
     * argument; and the statements that count what was picked, run with the update.
     */
    rated?: {
      readonly lock: (sets: ReadonlyArray<ReadonlyArray<any>>) => ReadonlyArray<readonly [string, ReadonlyArray<unknown>]>
      readonly count: (picked: ReadonlyArray<ClaimedRow | Picked>) => ReadonlyArray<readonly [string, ReadonlyArray<unknown>]>
    }
  ) =>
    Effect.gen(function*() {
      const names = namesOf(groups)
      const selects = groups.length === 0
        ? []
        : [...groups.map(select), pausedStatement(names).compile(true), ...(after === undefined ? [] : [after])]
      const conn = yield* sql.reserve
      const ends = before === undefined ? undefined : finishStatements(before)
      const statements = ends === undefined ? selects : [[ends.text, ends.params] as const, ...selects]
      return yield* Effect.gen(function*() {
        const results = yield* conn.executeUnprepared(
          `SET TRANSACTION ISOLATION LEVEL READ COMMITTED; START TRANSACTION; ${statements.map(([q]) => q).join("; ")}`,
          MysqlText.values(statements.flatMap(([, params]) => params)),
          undefined
        )
        const endsResults = ends === undefined ? [] : results.slice(results.length - selects.length - ends.statements, results.length - selects.length)
        if (ends !== undefined && ends.changed(endsResults) < before!.length) {
          yield* conn.executeUnprepared("ROLLBACK", [], undefined)
          return { claimed: [] as Array<ClaimedRow>, stale: yield* finishExactly(before!, conn) }
        }
        const stale = ends === undefined ? noStaleEnds : ends.report(endsResults, noStaleEnds)
        const read = results.slice(results.length - selects.length) as ReadonlyArray<ReadonlyArray<any>>
        const pausedRows = read.length === 0 ? [] : read[groups.length]
        const paused = new Set(names.filter((_, i) => pausedRows.some((r) => Number(r[`p${i}`]) === 1)))
        const sets = read.slice(0, groups.length).map((set, i) => (paused.has(groups[i].name) ? [] : set))
        const locks = rated === undefined ? [] : rated.lock(sets)
        const windows = locks.length === 0 ? [] : yield* Effect.map(
          conn.executeUnprepared(locks.map(([q]) => q).join("; "), MysqlText.values(locks.flatMap(([, p]) => p)), undefined),
          (results) => (results[results.length - 1] ?? []) as ReadonlyArray<any>
        )
        const picked = pick(sets, after === undefined || read.length === 0 ? [] : read[read.length - 1], windows)
        if (picked.length === 0) {
          yield* conn.executeUnprepared("COMMIT", [], undefined)
          return { claimed: [] as Array<ClaimedRow>, stale }
        }
        const updates = [
          sql`UPDATE ${jobs} SET state = 'running', attempts = LEAST(attempts, 2147483646) + 1,
              claimed_at = ${ts(nowUs)}, worker_id = ${workerId}, ${slotsSet(picked)}
            WHERE id IN ${sql.in(picked.map((r) => r.id))}`.compile(true),
          ...(rated === undefined ? [] : rated.count(picked))
        ]
        yield* conn.executeUnprepared(
          `${updates.map(([q]) => q).join("; ")}; COMMIT`,
          MysqlText.values(updates.flatMap(([, p]) => p)),
          undefined
        )
        return {
          claimed: picked.map((r): ClaimedRow => ({ ...toClaimedOnly(r), attempts: Math.min(r.attempts, 2147483646) + 1 })),
          stale
        }
      }).pipe(Effect.onError(() => Effect.ignore(conn.executeUnprepared("ROLLBACK", [], undefined))))
    }).pipe(Effect.scoped)
  /**
   * The slots held now, as the keyed claim read them: the name slots (`heldSlotsStatement`'s rows)
   * and, with each candidate, its key's (`held_key_slots`).
   */
  const heldSlotsOf = (sets: ReadonlyArray<ReadonlyArray<any>>, held: ReadonlyArray<any>): Array<HeldSlot> => {
    const slots: Array<HeldSlot> = held.map((h) => ({ name: String(h.name), key: null, slot: num(h.slot) }))
    for (const row of sets.flat()) {
      if (row.held_key_slots === null || row.held_key_slots === undefined) continue
      for (const slot of String(row.held_key_slots).split(",")) {
        slots.push({ name: String(row.name), key: keyOf(row.limit_key), slot: num(slot) })
      }
    }
    return slots
  }
  /** A claimed row without the key slot and key it took (its name slot kept, if any). */
  const toClaimedOnly = (r: ClaimedRow | Picked): ClaimedRow => {
    if (!("keySlot" in r)) return r
    const { keySlot: _keySlot, limitKey: _limitKey, nameSlot, ...row } = r
    return nameSlot === null ? row : { ...row, nameSlot }
  }
  /** The slot columns of claimed rows: each picked job's slots (`Picked`), or none. */
  const slotsSet = (picked: ReadonlyArray<ClaimedRow | Picked>) => {
    const slotted = picked.filter((r): r is Picked => "keySlot" in r && (r.nameSlot !== null || r.keySlot !== null))
    if (slotted.length === 0) return sql.literal("name_slot = NULL, key_slot = NULL")
    const column = (slot: (r: Picked) => number | null) =>
      sql`CASE id ${sql.join(" ", false)(slotted.map((r) => sql`WHEN ${r.id} THEN ${slot(r)}`))} ELSE NULL END`
    return sql`name_slot = ${column((r) => r.nameSlot)}, key_slot = ${column((r) => r.keySlot)}`
  }
  const { endsRead, finishExactly, finishStatements } = Ends.make(ctx)
  // In a transaction of its own: as a multi-statement, the driver returns the rows each statement
  // changed; when fewer rows changed than there were ends, it is rolled back and the ends are
  // written exactly (`finishExactly`).
  const finishMany = (finishes: ReadonlyArray<Finish>) =>
    Effect.gen(function*() {
      const ends = finishStatements(finishes)
      const conn = yield* sql.reserve
      return yield* Effect.gen(function*() {
        const results = yield* conn.executeUnprepared(`START TRANSACTION; ${ends.text}`, MysqlText.values(ends.params), undefined)
        const endsResults = results.slice(1)
        if (ends.changed(endsResults) >= finishes.length) {
          yield* conn.executeUnprepared("COMMIT", [], undefined)
          return ends.report(endsResults, noStaleEnds)
        }
        yield* conn.executeUnprepared("ROLLBACK", [], undefined)
        return yield* finishExactly(finishes, conn)
      }).pipe(Effect.onError(() => Effect.ignore(conn.executeUnprepared("ROLLBACK", [], undefined))))
    }).pipe(Effect.scoped)
  /**
   * The keyed claim, with the ends it rides on (`before`) first in its transaction. As `jobClaim`;
   * each group's locking read skips jobs whose mutex key has a running job (the unique index on
   * `mutex_running` answers that) or whose limits have no free slot; the slots held are read after
   * the locking reads (and after the ends, so the slots they free are free); `pickWithSlots`
   * chooses. A job the ends just put back to pending is left for a later claim.
   */
  const claimKeyed = (
    groups: ReadonlyArray<Group>,
    limit: number,
    nowUs: number,
    workerId: string,
    limits: ReadonlyMap<string, NameLimits>,
    before?: ReadonlyArray<Finish>,
    ahead?: Ahead
  ) => {
    const limited = namesOf(groups).filter((n) => limits.has(n))
    const ended = new Set(before?.map((f) => String(f.id)))
    // The keys are read before the transaction: the slots the ends free count as free there.
    return Effect.flatMap(readFairKeys(groups, limit, nowUs, limits, [], Array.from(ended)), (fair) =>
      claimInTransaction(
        groups,
        keyedRead(groups, limit, nowUs, limits, fair, [], fair === undefined ? ahead : undefined),
        (sets, held) => {
          const candidates = candidatesOf(groups, sets, limits, fair).filter((c) => !ended.has(c.claimed.id))
          const picked = pickWithSlots(candidates, limit, limits, heldSlotsOf(sets, held), undefined, fair === undefined ? ahead : undefined)
          if (fair !== undefined) rotate(groups, fair, candidates, picked)
          return picked
        },
        nowUs,
        workerId,
        before,
        limited.length === 0 ? undefined : heldSlotsStatement(limited).compile(true)
      ))
  }
  return {
    jobPendingGroups: () =>
      Effect.map(
        run(probeStatement(), "unprepared"),
        (rows) => rows.map((r) => ({ name: r.name, priority: num(r.priority), nextUs: num(r.next_us) }))
      ),
    jobProbe: (names) =>
      Effect.map(
        run(probeStatement(), "unprepared"),
        (rows) => {
          const wanted = new Set(names)
          return rows.filter((r) => wanted.has(r.name)).map((r) => ({
            name: r.name,
            priority: num(r.priority),
            nextUs: num(r.next_us)
          }))
        }
      ),
    /** The plan of any statement of this driver (for the plans of other areas' statements). */
    explainStatement: explain,
    explainProbe: () => explain(probeStatement()),
    explainClaim: (groups, limit, nowUs) =>
      Effect.map(
        Effect.forEach([...groups.map((g) => claimSelect(g, limit, nowUs)), pausedStatement(namesOf(groups))], explain),
        (plans) => plans.flat()
      ),
    jobClaim: (groups, limit, nowUs, workerId) =>
      // One locking read per group (an index range in claim order, no filesort), then the first
      // `limit` rows in claim order.
      Effect.map(
        claimInTransaction(
          groups,
          (g) => claimSelect(g, limit, nowUs).compile(true),
          (sets) => sets.flat().map(toClaimed).sort(byClaimOrder).slice(0, Math.floor(limit)),
          nowUs,
          workerId
        ),
        (r) => r.claimed
      ),
    explainClaimKeyed: (groups, limit, nowUs, limits = noLimits) =>
      Effect.map(
        Effect.forEach(
          [
            ...groups.flatMap((g) =>
              limits.get(g.name)?.fair === true
                ? [
                  claimKeyedSelect(g, limit, nowUs, limits, false, { key: "", window: 2 }),
                  claimKeyedSelect(g, limit, nowUs, limits, false, { key: null, window: Number(keyedWindow(limit)) })
                ]
                : [claimKeyedSelect(g, limit, nowUs, limits)]
            ),
            ...explainable(groups, groups.flatMap((g, i) => (limits.get(g.name)?.fair === true ? [i] : [])), limit, nowUs, limits),
            pausedStatement(namesOf(groups)),
            ...(limits.size === 0 ? [] : [heldSlotsStatement(Array.from(limits.keys()))])
          ],
          explain
        ),
        (plans) => plans.flat()
      ),
    jobClaimKeyed: (groups, limit, nowUs, workerId, limits = noLimits, ahead) =>
      retryKeyed(Effect.map(claimKeyed(groups, limit, nowUs, workerId, limits, undefined, ahead), (r) => r.claimed)),
    /**
     * As `jobClaimKeyed`, in its transaction: the locking reads leave out keys whose window is used
     * up or held (`keyRateOpen`); then, in a round trip of their own, the windows of the rated names
     * and of their candidates' keys are locked and read (`rateLock`); `pickWithSlots` takes no more
     * than each has left (`takeStart`); the windows are counted with the claim's update. A claim
     * that loses a race for a slot or a key rolls back, counting nothing, and is tried again.
     */
    jobClaimRated: (groups, limit, nowUs, workerId, limits) => {
      const limited = namesOf(groups).filter((n) => limits.has(n))
      const rated = ratedNames(groups, limits)
      let allowed = allowance([], limits, nowUs)
      let taken: ReturnType<typeof startsTaken> = []
      const once = Effect.flatMap(readFairKeys(groups, limit, nowUs, limits, rated), (fair) => {
        allowed = allowance([], limits, nowUs)
        taken = []
        return claimInTransaction(
          groups,
          keyedRead(groups, limit, nowUs, limits, fair, rated),
          (sets, held, locked) => {
            allowed = allowance(locked.map(windows.toWindowRow) as ReadonlyArray<WindowRow>, limits, nowUs)
            const left = new Map(allowed.left)
            const candidates = candidatesOf(groups, sets, limits, fair)
            const picked = pickWithSlots(
              candidates,
              limit,
              limits,
              heldSlotsOf(sets, held),
              (c) => takeStart(left, limits, c.claimed.name, c.limitKey)
            )
            if (fair !== undefined) rotate(groups, fair, candidates, picked)
            taken = startsTaken(picked.map((p) => ({ name: p.name, key: p.limitKey })), limits)
            return picked
          },
          nowUs,
          workerId,
          undefined,
          limited.length === 0 ? undefined : heldSlotsStatement(limited).compile(true),
          {
            lock: (sets) =>
              windows.rateLock(windowsWanted(
                rated,
                sets.flat().flatMap((row) => {
                  const key = keyOf(row.limit_key)
                  return key === null || !isRated(limits.get(row.name)) ? [] : [{ name: String(row.name), key }]
                }),
                limits,
                nowUs
              ), nowUs),
            count: () => (taken.length === 0 ? [] : [windows.rateCount(taken)])
          }
        )
      })
      const go = (tries: number): ReturnType<JobsOps["jobClaimRated"]> =>
        Effect.catchIf(
          Effect.map(once, (r) => ({ claimed: r.claimed, ...heldAfter(allowed, taken, limits, nowUs, rated) })),
          isUniqueViolation,
          () => tries >= 5 ? Effect.succeed({ claimed: [], heldUntilUs: new Map(), keyWakeUs: undefined, keyAdmitsUs: undefined }) : go(tries + 1)
        )
      return go(1)
    },
    rateHold: (name, key, untilUs) => Effect.asVoid(run(windows.rateHold(name, key, untilUs))),
    jobCountDue: (names, nowUs, cap) =>
      names.length === 0 ? Effect.succeed([]) : Effect.map(
        run(sql<{ name: string; due: number }>`${
          sql.join(" UNION ALL ", false)(names.map((name) =>
            sql`SELECT ${name} AS name, (SELECT COUNT(*) FROM (
                SELECT 1 FROM ${jobs} FORCE INDEX (${pendingIndex})
                WHERE state = 'pending' AND name = ${name} AND run_at <= ${ts(nowUs)}
                LIMIT ${sql.literal(String(Math.floor(cap)))}) x) AS due`
          ))
        }`, "unprepared"),
        (rows) => rows.map((r) => ({ name: r.name, due: num(r.due) }))
      ),
    jobFinishMany: finishMany,
    jobEndsNotHeld: (finishes) =>
      Effect.map(
        Effect.flatMap(Effect.sync(() => endsRead(finishes)), ([text, params]) =>
          runPlain(sql.unsafe(text, MysqlText.values(params)), "unprepared")),
        (rows) => notHeld(finishes, rows, deleteCompleted)
      ),
    // The ends touch running rows and the claim pending ones. The ends' row locks are held while
    // the claim reads (SKIP LOCKED: it waits for no lock), and one COMMIT ends both. Unlike
    // PostgreSQL's one statement (one snapshot), the locking reads see the ends just written: a job
    // they put back to pending (released, or retried at once) is left for a later claim, as there.
    jobFinishManyAndClaim: (finishes, groups, limit, nowUs, workerId, keyed) => {
      if (keyed !== undefined) {
        // A claim that lost a race for a slot or a key rolled back with the ends: tried again, and
        // after 5 tries the ends are written alone.
        const go = (tries: number): ReturnType<NonNullable<JobsOps["jobFinishManyAndClaim"]>> =>
          Effect.catchIf(claimKeyed(groups, limit, nowUs, workerId, keyed.limits, finishes, keyed.ahead), isUniqueViolation, () =>
            tries >= 5
              ? Effect.map(finishMany(finishes), (stale) => ({ claimed: [], stale }))
              : go(tries + 1))
        return go(1)
      }
      const ended = new Set(finishes.map((f) => String(f.id)))
      return claimInTransaction(
        groups,
        (g) => claimSelect(g, limit, nowUs).compile(true),
        (sets) =>
          sets.flat().map(toClaimed).filter((r) => !ended.has(r.id)).sort(byClaimOrder).slice(0, Math.floor(limit)),
        nowUs,
        workerId,
        finishes
      )
    }
  }
}
