/**
 * Query plans of the probe and the claim at scale: 1,000 job names with 100 finished jobs each
 * (100,000 rows) and a backlog of 20,000 pending jobs in 10 names. The probe must be a loose index scan of the
 * pending-jobs index (reading only names with pending jobs), and the claim one index range per
 * (name, priority) group: no full scan of the jobs table and no sort of the backlog, before and
 * after the table's statistics are gathered. The dashboard's counts by state read at most their cap
 * of rows, each through its state's index; its job lists (by name, state, both, unique key, id, a
 * created-time range, each with a keyset page) read one range of the index of their filter; its
 * read of the last hour of the per-minute stats is one range of their primary key, with a day of
 * minutes of 100 names in the table.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import type { JobListFilter } from "../../src/internal/driver/Driver.js"
import { Database } from "../../src/internal/Database.js"
import { nowMicros } from "../../src/internal/time.js"
import { explainer } from "../support/explain.js"
import type { Target } from "../support/targets.js"
import { withQueue } from "../support/helpers.js"

const names = Array.from({ length: 1000 }, (_, i) => `plan.name.${String(i).padStart(4, "0")}`)

/** 100,000 completed jobs over 1,000 names, and 2,000 pending jobs in each of 10 names, by SQL. */
const fill = (target: Target, prefix: string) =>
  Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    const jobs = sql(`${prefix}jobs`)
    if (target.dialect === "pg") {
      yield* sql`INSERT INTO ${jobs} (name, state, payload, run_at, created_at, finished_at, attempts)
        SELECT 'plan.name.' || lpad((i % 1000)::text, 4, '0'), 'completed', '{}', now(), now(), now(), 1
        FROM generate_series(0, 99999) AS i`
      yield* sql`INSERT INTO ${jobs} (name, payload, run_at, created_at)
        SELECT 'plan.name.' || lpad((i % 10 * 100)::text, 4, '0'), '{}', now() - interval '1 minute', now()
        FROM generate_series(0, 19999) AS i`
    } else {
      yield* sql`INSERT INTO ${jobs} (name, state, payload, run_at, created_at, finished_at, attempts)
        WITH RECURSIVE seq (i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM seq WHERE i < 999)
        SELECT CONCAT('plan.name.', LPAD(a.i, 4, '0')), 'completed', '{}', UTC_TIMESTAMP(6),
          UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), 1
        FROM seq a CROSS JOIN seq b WHERE b.i < 100`.unprepared
      yield* sql`INSERT INTO ${jobs} (name, payload, run_at, created_at)
        WITH RECURSIVE seq (i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM seq WHERE i < 999)
        SELECT CONCAT('plan.name.', LPAD(a.i % 10 * 100, 4, '0')), '{}', UTC_TIMESTAMP(6) - INTERVAL 1 MINUTE,
          UTC_TIMESTAMP(6)
        FROM seq a CROSS JOIN seq b WHERE b.i < 20`.unprepared
    }
    // A name with fair shares: one key's backlog of 20,000 jobs, then 100 jobs over 50 other keys.
    if (target.dialect === "pg") {
      yield* sql`INSERT INTO ${jobs} (name, payload, run_at, created_at, limit_key)
        SELECT 'plan.fair', '{}', now() - interval '2 minutes', now(), CASE WHEN i < 20000 THEN 'hot' ELSE 'k' || (i % 50) END
        FROM generate_series(0, 20099) AS i`
    } else {
      yield* sql`INSERT INTO ${jobs} (name, payload, run_at, created_at, limit_key)
        WITH RECURSIVE seq (i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM seq WHERE i < 999)
        SELECT 'plan.fair', '{}', UTC_TIMESTAMP(6) - INTERVAL 2 MINUTE, UTC_TIMESTAMP(6),
          CASE WHEN a.i * 21 + b.i < 20000 THEN 'hot' ELSE CONCAT('k', (a.i * 21 + b.i) % 50) END
        FROM seq a CROSS JOIN seq b WHERE b.i < 21 AND a.i * 21 + b.i < 20100`.unprepared
    }
  })

const analyze = (target: Target, prefix: string) =>
  Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    if (target.dialect === "pg") yield* sql`ANALYZE ${sql(`${prefix}jobs`)}`
    else yield* sql`ANALYZE TABLE ${sql(`${prefix}jobs`)}`.unprepared
  })

/** Asserts a plan reads the jobs table only through the pending-jobs index, and sorts nothing of it. */
const checkPlans = (target: Target, prefix: string, when: "before ANALYZE" | "after ANALYZE") =>
  Effect.gen(function*() {
    const statements = yield* explainer(target, prefix)
    const probe = yield* statements.explainProbe(names)
    const claim = yield* statements.explainClaim([{ name: "plan.name.0100", priority: 0 }], 50, (yield* nowMicros))
    // The keyed claim over two groups (names whose jobs may carry mutex keys).
    const keyed = yield* statements.explainClaimKeyed(
      [{ name: "plan.name.0100", priority: 0 }, { name: "plan.name.0200", priority: 0 }],
      50,
      (yield* nowMicros)
    )
    // The keyed claim with concurrency limits: the slots are read from the slot indexes.
    const limited = yield* statements.explainClaimKeyed(
      [{ name: "plan.name.0100", priority: 0 }, { name: "plan.name.0200", priority: 0 }],
      50,
      (yield* nowMicros),
      new Map([["plan.name.0100", { running: 40, runningPerKey: 3 }], ["plan.name.0200", { running: 5, runningPerKey: undefined }]])
    )
    // The keyed claim of a name with fair shares (a per-key limit of 3) and of a name without.
    const fair = yield* statements.explainClaimKeyed(
      [{ name: "plan.fair", priority: 0 }, { name: "plan.name.0200", priority: 0 }],
      50,
      (yield* nowMicros),
      new Map([["plan.fair", { running: undefined, runningPerKey: 3, fair: true }]])
    )
    const show = (plan: ReadonlyArray<string>) => `\n${plan.join("\n")}`
    // The dashboard's counts by state read at most their cap of rows, through the state's index
    // (before the statistics are gathered, PostgreSQL may read the state's whole range of it and
    // sort it: still no scan of the table).
    for (const state of ["pending", "running", "completed", "dead", "cancelled"] as const) {
      const plan = yield* statements.explainCountByState(state, 10_000)
      const text = plan.join("\n")
      if (target.dialect === "pg") {
        assert.include(text, "Limit", `count of ${state} (${when}) is not bounded:${show(plan)}`)
        assert.notMatch(text, new RegExp(`Seq Scan on ${prefix}jobs`), `count of ${state} (${when}) scans the table:${show(plan)}`)
        assert.include(text, `${prefix}jobs_`, `count of ${state} (${when}) uses no index:${show(plan)}`)
        // What is sorted is at most the cap of rows read (for the count per name), never the range below the Limit.
        const read = text.slice(text.indexOf("Limit"))
        if (when === "after ANALYZE") assert.notInclude(read, "Sort", `count of ${state} (${when}) sorts the range it reads:${show(plan)}`)
      } else {
        for (const r of plan.map((r) => JSON.parse(r) as Record<string, unknown>)) {
          if (r.table !== `${prefix}jobs`) continue
          assert.notStrictEqual(r.type, "ALL", `count of ${state} (${when}) scans the table:${show(plan)}`)
          assert.include([`${prefix}jobs_pending`, `${prefix}jobs_finished`], r.key, `count of ${state} (${when}):${show(plan)}`)
          // Both indexes hold the name: the count reads no row.
          assert.include(String(r.Extra ?? ""), "Using index", `count of ${state} (${when}) reads the rows:${show(plan)}`)
        }
      }
    }
    // The pruner's reads: a range of an index, sorting none of it (completed jobs on PostgreSQL: in
    // id order, below the ids created after the cutoff; else by finished_at), never the table.
    for (const state of ["completed", "dead", "cancelled"] as const) {
      const plan = yield* statements.explainPrune(state, (yield* nowMicros) - 3_600_000_000, 1000)
      const text = plan.join("\n")
      if (target.dialect === "pg") {
        assert.notMatch(text, new RegExp(`Seq Scan on ${prefix}jobs`), `prune of ${state} (${when}) scans the table:${show(plan)}`)
        if (state === "completed") {
          assert.match(text, new RegExp(`${prefix}jobs_(state|pkey) `), `prune of completed (${when}):${show(plan)}`)
          assert.match(text, /Index Cond: .*\bid < /, `prune of completed (${when}) is not bounded by id:${show(plan)}`)
        } else assert.include(text, `${prefix}jobs_finished`, `prune of ${state} (${when}):${show(plan)}`)
        if (when === "after ANALYZE") assert.notInclude(text, "Sort Key:", `prune of ${state} (${when}) sorts:${show(plan)}`)
      } else {
        for (const r of plan.map((r) => JSON.parse(r) as Record<string, unknown>)) {
          if (r.table !== `${prefix}jobs`) continue
          assert.notStrictEqual(r.type, "ALL", `prune of ${state} (${when}) scans the table:${show(plan)}`)
          assert.strictEqual(r.key, `${prefix}jobs_finished`, `prune of ${state} (${when}):${show(plan)}`)
        }
      }
    }
    if (target.dialect === "pg") {
      for (const [what, plan] of [["probe", probe], ["claim", claim], ["keyed claim", keyed], ["limited claim", limited], ["fair claim", fair]] as const) {
        const text = plan.join("\n")
        assert.notMatch(text, new RegExp(`Seq Scan on ${prefix}jobs`), `${what} (${when}) scans the table:${show(plan)}`)
        assert.include(text, `${prefix}jobs_pending`, `${what} (${when}) does not use the pending index:${show(plan)}`)
        assert.notInclude(text, "Bitmap Heap Scan", `${what} (${when}) reads the heap by bitmap:${show(plan)}`)
      }
      // Fair shares read the keys, and each key's jobs, from the index on (name, priority, key).
      assert.include(fair.join("\n"), `${prefix}jobs_pending_key`, `fair claim (${when}) does not use the key index:${show(fair)}`)
      // The paused check of each arm: one read of the paused table's primary key, before the arm
      // reads any job (a one-time filter), not a filter on every job row.
      for (const slotIndex of ["jobs_name_slot", "jobs_key_slot"]) {
        assert.include(limited.join("\n"), `${prefix}${slotIndex}`, `limited claim (${when}) does not read ${slotIndex}:${show(limited)}`)
      }
      for (const [what, plan] of [["claim", claim], ["keyed claim", keyed], ["limited claim", limited], ["fair claim", fair]] as const) {
        const text = plan.join("\n")
        assert.include(text, `${prefix}paused_pkey`, `${what} (${when}) does not check paused names by key:${show(plan)}`)
        assert.notMatch(text, new RegExp(`Seq Scan on ${prefix}paused`), `${what} (${when}) scans the paused table:${show(plan)}`)
        assert.match(text, /One-Time Filter: .*\bNOT\b/, `${what} (${when}) checks paused names per row:${show(plan)}`)
      }
      // The probe sorts nothing; the claim sorts only the rows it picked (by the group's key).
      assert.notInclude(probe.join("\n"), "Sort", `probe (${when}) sorts:${show(probe)}`)
      // Not even the probe of all 1,000 names is compiled by JIT (which would add ~100 ms to each).
      for (const [what, plan] of [["probe", probe], ["claim", claim], ["keyed claim", keyed], ["limited claim", limited], ["fair claim", fair]] as const) {
        assert.notInclude(plan.join("\n"), "JIT", `${what} (${when}) is compiled by JIT:${show(plan)}`)
      }
      for (const [what, plan] of [["claim", claim], ["keyed claim", keyed], ["limited claim", limited], ["fair claim", fair]] as const) {
        const sortKeys = plan.filter((l) => l.includes("Sort Key:"))
        for (const key of sortKeys) assert.notMatch(key, /\bj\./, `${what} (${when}) sorts the table's rows:${show(plan)}`)
      }
    } else {
      const slotIndexes = [`${prefix}jobs_name_slot`, `${prefix}jobs_key_slot`]
      // Fair shares: every read of the jobs through an index (the key index for the name with
      // fair shares), none a scan; the walk over the keys one index entry per step.
      const fairRows = fair.map((r) => JSON.parse(r) as Record<string, unknown>)
      const fairJobs = fairRows.filter((r) => r.table === `${prefix}jobs` || r.table === "j" || r.table === "d" || r.table === "r")
      assert.isAbove(fairRows.filter((r) => r.key === `${prefix}jobs_pending_key`).length, 2, `fair claim (${when}):${show(fair)}`)
      for (const r of fairJobs) {
        assert.notStrictEqual(r.type, "ALL", `fair claim (${when}) scans the table:${show(fair)}`)
        assert.notStrictEqual(r.key, null, `fair claim (${when}) reads the table without an index:${show(fair)}`)
        if (when === "after ANALYZE") assert.notInclude(String(r.Extra ?? ""), "filesort", `fair claim (${when}) sorts:${show(fair)}`)
      }
      for (const [what, plan] of [["probe", probe], ["claim", claim], ["keyed claim", keyed], ["limited claim", limited]] as const) {
        const rows = plan.map((r) => JSON.parse(r) as Record<string, unknown>)
        // The keyed claim names the jobs table `j` (the running keys and slots it checks, `r`, come
        // from the unique indexes on running keys and slots); the limited claim's read of the slots
        // held names it by its name and reads the slot indexes.
        const slotReads = rows.filter((r) => r.table === `${prefix}jobs` && slotIndexes.includes(String(r.key)))
        if (what === "limited claim") assert.strictEqual(slotReads.length, 1, `${what} (${when}) reads the name slots held:${show(plan)}`)
        const jobsRows = rows.filter((r) => (r.table === `${prefix}jobs` || r.table === "j") && !slotReads.includes(r))
        for (const r of rows.filter((r) => r.table === "r")) {
          assert.include([`${prefix}jobs_mutex`, ...slotIndexes], r.key, `${what} (${when}) checks running keys without their index:${show(plan)}`)
          assert.notStrictEqual(r.type, "ALL", `${what} (${when}) scans for running keys:${show(plan)}`)
        }
        for (const r of slotReads) assert.notStrictEqual(r.type, "ALL", `${what} (${when}) scans for slots:${show(plan)}`)
        assert.isAbove(jobsRows.length, 0, `${what} (${when}):${show(plan)}`)
        // The paused check (a statement of its own after the locking reads): its primary key.
        if (what !== "probe") {
          const pausedRows = rows.filter((r) => r.table === `${prefix}paused`)
          assert.isAbove(pausedRows.length, 0, `${what} (${when}) has no paused check:${show(plan)}`)
          for (const r of pausedRows) {
            assert.strictEqual(r.key, "PRIMARY", `${what} (${when}) checks paused names without their key:${show(plan)}`)
            assert.notStrictEqual(r.type, "ALL", `${what} (${when}) scans the paused table:${show(plan)}`)
          }
        }
        for (const r of jobsRows) {
          assert.notStrictEqual(r.type, "ALL", `${what} (${when}) scans the table:${show(plan)}`)
          assert.strictEqual(r.key, `${prefix}jobs_pending`, `${what} (${when}) does not use the pending index:${show(plan)}`)
          if (what === "claim" || when === "after ANALYZE") {
            assert.notInclude(String(r.Extra ?? ""), "filesort", `${what} (${when}) sorts:${show(plan)}`)
          }
        }
      }
      // MariaDB chooses the loose index scan from the index statistics, which InnoDB gathers by
      // itself once a tenth of the table changed; right after a bulk load it may read the pending
      // range of the index instead (still no table scan).
      if (when === "before ANALYZE") return
      const probeRows = probe.map((r) => JSON.parse(r) as Record<string, unknown>)
      assert.isTrue(
        probeRows.some((r) => String(r.Extra ?? "").includes("Using index for group-by")),
        `probe (${when}) is not a loose index scan:${show(probe)}`
      )
    }
  })

/**
 * Makes the filled table a dashboard's: every 100th completed job dead (and every one of
 * plan.name.0007), every 200th cancelled, every 1000th running; a unique key on every 10th (held
 * while pending or running).
 */
const varyStates = (target: Target, prefix: string) =>
  Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    const jobs = sql(`${prefix}jobs`)
    yield* sql`UPDATE ${jobs} SET state = 'dead' WHERE state = 'completed' AND (id % 100 = 7 OR name = 'plan.name.0007')`
    yield* sql`UPDATE ${jobs} SET state = 'cancelled' WHERE state = 'completed' AND id % 200 = 11`
    yield* sql`UPDATE ${jobs} SET state = 'running', finished_at = NULL, worker_id = 'plan-worker'
      WHERE state = 'completed' AND id % 1000 = 13`
    if (target.dialect === "pg") yield* sql`UPDATE ${jobs} SET unique_key = 'key-' || id, unique_states = 3 WHERE id % 10 = 3`
    else yield* sql`UPDATE ${jobs} SET unique_key = CONCAT('key-', id), unique_states = 3 WHERE id % 10 = 3`
  })

/** The index each list filter is to read (null: the primary key), by the filter's label. */
const listFilters = (newestId: string, createdFromUs: number): ReadonlyArray<[string, JobListFilter, string]> => [
  ["all", { limit: 51 }, "jobs_pkey"],
  ["all, next page", { limit: 51, beforeId: newestId }, "jobs_pkey"],
  ["by id", { id: newestId, limit: 51 }, "jobs_pkey"],
  ["by name", { name: "plan.name.0100", limit: 51 }, "jobs_name_state"],
  ["by name, next page", { name: "plan.name.0100", beforeId: newestId, limit: 51 }, "jobs_name_state"],
  ["by name and state", { name: "plan.name.0100", state: "dead", limit: 51 }, "jobs_name_state"],
  ["by name and state completed", { name: "plan.name.0100", state: "completed", limit: 51 }, "jobs_name_state"],
  ["by unique key", { uniqueKey: "key-13", limit: 51 }, "jobs_unique_key"],
  ["created from a time", { createdFromUs, limit: 51 }, "jobs_pkey"],
  ["created in a range, by name", { createdFromUs, createdBeforeUs: createdFromUs + 7_200_000_000, name: "plan.name.0100", limit: 51 }, "jobs_name_state"],
  ...(["pending", "running", "completed", "dead", "cancelled"] as const).flatMap((state): Array<[string, JobListFilter, string]> => [
    [`by state ${state}`, { state, limit: 51 }, "jobs_state"],
    [`by state ${state}, next page`, { state, beforeId: newestId, limit: 51 }, "jobs_state"],
    [`by state ${state}, created from a time`, { state, createdFromUs, limit: 51 }, "jobs_state"]
  ])
]

/** Asserts each job list reads the jobs table only through the index of its filter, sorting none of it. */
const checkListPlans = (target: Target, prefix: string, when: "before ANALYZE" | "after ANALYZE") =>
  Effect.gen(function*() {
    const statements = yield* explainer(target, prefix)
    const { driver } = yield* Database
    const newestId = (yield* driver.jobNewestId())!
    const show = (plan: ReadonlyArray<string>) => `\n${plan.join("\n")}`
    for (const [label, filter, index] of listFilters(newestId, (yield* nowMicros) - 3_600_000_000)) {
      const plan = yield* statements.explainJobList(filter)
      const what = `list ${label} (${when})`
      if (target.dialect === "pg") {
        const text = plan.join("\n")
        assert.notMatch(text, new RegExp(`Seq Scan on ${prefix}jobs`), `${what} scans the table:${show(plan)}`)
        // Before the statistics are gathered, PostgreSQL may read a small state's partial index
        // (pending, running) whole and sort it: still no scan of the table.
        if (when === "before ANALYZE") {
          assert.match(text, new RegExp(`${prefix}jobs_`), `${what} uses no index:${show(plan)}`)
          continue
        }
        assert.notInclude(text, "Bitmap Heap Scan", `${what} reads the heap by bitmap:${show(plan)}`)
        // A list by name or state never walks the primary key (every newer job of other names or states).
        if (index !== "jobs_pkey") assert.notInclude(text, `${prefix}jobs_pkey`, `${what} walks the primary key:${show(plan)}`)
        // Running jobs (as many as the workers run at once) may be read whole from their partial
        // index and sorted, in a name's merge of its states too; every other read is its index's
        // range in id order, and only the merge of a name's states sorts (the first rows of each).
        const runningOnly = filter.state === "running" && text.includes(`${prefix}jobs_running`)
        if (!runningOnly) assert.include(text, `${prefix}${index}`, `${what} does not read ${index}:${show(plan)}`)
        if (plan.some((l) => l.includes("Sort Key:"))) {
          assert.isTrue(runningOnly || (filter.name !== undefined && filter.state === undefined), `${what} sorts:${show(plan)}`)
        }
      } else {
        const rows = plan.map((r) => JSON.parse(r) as Record<string, unknown>)
        const jobsRows = rows.filter((r) => r.table === `${prefix}jobs`)
        assert.isAbove(jobsRows.length, 0, `${what}:${show(plan)}`)
        for (const r of jobsRows) {
          assert.notStrictEqual(r.type, "ALL", `${what} scans the table:${show(plan)}`)
          assert.strictEqual(r.key, index === "jobs_pkey" ? "PRIMARY" : `${prefix}${index}`, `${what} does not read ${index}:${show(plan)}`)
          assert.notInclude(String(r.Extra ?? ""), "filesort", `${what} sorts the table's rows:${show(plan)}`)
        }
      }
    }
  })

export const plans = (target: Target) => {
  const name = (title: string) => `[${target.id}] ${title}`

  describe(`plans [${target.id}]`, () => {
    it.live(
      name("probe and claim read only the pending index, with 100,000 finished jobs in 1,000 names"),
      () =>
        withQueue(target, (prefix) =>
          Effect.gen(function*() {
            yield* fill(target, prefix)
            // The claimed names paused, so that MySQL/MariaDB's EXPLAIN of the paused check reads
            // the table (a key that is not there is answered from the index before the plan).
            const { driver } = yield* Database
            for (const paused of ["plan.name.0100", "plan.name.0200"]) yield* driver.pausedInsert(paused, (yield* nowMicros))
            yield* checkPlans(target, prefix, "before ANALYZE")
            yield* analyze(target, prefix)
            yield* checkPlans(target, prefix, "after ANALYZE")
            // And the probe answers: the 10 names with pending jobs, nothing else.
            const rows = yield* driver.jobProbe(names)
            assert.deepStrictEqual(
              rows.map((r) => r.name).sort(),
              Array.from({ length: 10 }, (_, i) => `plan.name.${String(i * 100).padStart(4, "0")}`)
            )
          })),
      120_000
    )

    it.live(name("the last hour of the per-minute stats is one range of their primary key, with a day of 100 names"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const sql = (yield* SqlClient.SqlClient).withoutTransforms()
          const stats = sql(`${prefix}stats`)
          const minuteUs = 60_000_000
          const currentUs = Math.floor((yield* nowMicros) / minuteUs) * minuteUs
          // 1,440 minutes of 100 names: 144,000 rows.
          if (target.dialect === "pg") {
            yield* sql`INSERT INTO ${stats} (minute_us, name, completed)
              SELECT ${currentUs}::bigint - m * ${minuteUs}::bigint, 'plan.stats.' || n, 1
              FROM generate_series(0, 1439) AS m, generate_series(0, 99) AS n`
            yield* sql`ANALYZE ${stats}`
          } else {
            yield* sql`INSERT INTO ${stats} (minute_us, name, completed)
              WITH RECURSIVE seq (i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM seq WHERE i < 999)
              SELECT ${currentUs} - ((a.i * 144 + b.i) DIV 100) * ${minuteUs}, CONCAT('plan.stats.', (a.i * 144 + b.i) MOD 100), 1
              FROM seq a CROSS JOIN seq b WHERE b.i < 144`.unprepared
            yield* sql`ANALYZE TABLE ${stats}`.unprepared
          }
          const statements = yield* explainer(target, prefix)
          const plan = yield* statements.explainStatsRead(currentUs - 59 * minuteUs, 120_000)
          const show = `\n${plan.join("\n")}`
          if (target.dialect === "pg") {
            const text = plan.join("\n")
            // An index scan of the range, or a bitmap of it (then the hour's rows alone are sorted).
            assert.match(text, new RegExp(`Index Scan (Backward )?(using|on) ${prefix}stats_pkey`), `the stats read does not use the primary key:${show}`)
            assert.match(text, /Index Cond: \(minute_us >= /, `the stats read is not a range of the minutes:${show}`)
            assert.notInclude(text, "Seq Scan", `the stats read scans the table:${show}`)
          } else {
            const rows = plan.map((r) => JSON.parse(r) as Record<string, unknown>).filter((r) => r.table === `${prefix}stats`)
            assert.strictEqual(rows.length, 1, show)
            assert.strictEqual(rows[0].key, "PRIMARY", `the stats read does not use the primary key:${show}`)
            assert.strictEqual(rows[0].type, "range", `the stats read is not one range:${show}`)
            assert.notInclude(String(rows[0].Extra ?? ""), "filesort", `the stats read sorts:${show}`)
          }
          // And the read answers: 60 minutes of 100 names.
          const { driver } = yield* Database
          assert.strictEqual((yield* driver.statsRead(currentUs - 59 * minuteUs, 120_000)).length, 6_000)
        })), 120_000)

    it.live(
      name("job lists read the index range of their filter, with 140,000 jobs"),
      () =>
        withQueue(target, (prefix) =>
          Effect.gen(function*() {
            yield* fill(target, prefix)
            yield* varyStates(target, prefix)
            yield* checkListPlans(target, prefix, "before ANALYZE")
            yield* analyze(target, prefix)
            yield* checkListPlans(target, prefix, "after ANALYZE")
            // And the lists answer as a plain read of the table does: the newest jobs of a name
            // (merged over its states), of a name and a state, of a state, and of a created range.
            const { driver } = yield* Database
            const sql = (yield* SqlClient.SqlClient).withoutTransforms()
            const jobs = sql(`${prefix}jobs`)
            const ids = (rows: ReadonlyArray<{ readonly id: unknown }>) => rows.map((r) => String(r.id))
            const listed = (filter: JobListFilter) => Effect.map(driver.jobList(filter), ids)
            const fromUs = (yield* nowMicros) - 3_600_000_000
            const from = target.dialect === "pg"
              ? sql`(TIMESTAMPTZ 'epoch' + ${fromUs}::bigint * INTERVAL '1 microsecond')`
              : sql`TIMESTAMPADD(MICROSECOND, ${fromUs}, '1970-01-01 00:00:00')`
            for (
              const [filter, where] of [
                [{ name: "plan.name.0100", limit: 60 }, sql`name = 'plan.name.0100'`],
                [{ name: "plan.name.0007", state: "dead", limit: 60 }, sql`name = 'plan.name.0007' AND state = 'dead'`],
                [{ state: "running", limit: 60 }, sql`state = 'running'`],
                [{ state: "pending", createdFromUs: fromUs, limit: 60 }, sql`state = 'pending' AND created_at >= ${from}`]
              ] as const
            ) {
              const expected = ids(yield* sql<{ id: unknown }>`SELECT id FROM ${jobs} WHERE ${where} ORDER BY id DESC LIMIT 60`)
              assert.isAbove(expected.length, 10)
              assert.deepStrictEqual(yield* listed(filter), expected, JSON.stringify(filter))
              // The next page starts after the first's last job.
              const next = ids(yield* sql<{ id: unknown }>`SELECT id FROM ${jobs} WHERE ${where} AND id < ${expected[9]} ORDER BY id DESC LIMIT 5`)
              assert.deepStrictEqual(yield* listed({ ...filter, beforeId: expected[9], limit: 5 }), next, JSON.stringify(filter))
            }
          })),
      180_000
    )
  })
}
