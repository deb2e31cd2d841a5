/**
 * The soak's checker (soak/check.ts) on small hand-made inputs: each violation category, and how a
 * job's second run is explained — a lost COMMIT answer before a kill, a kill only when the earlier
 * attempt is recorded as `worker lost`. Pure: no database.
 */
import { assert, describe, it } from "vitest"
import { check, type EnqueuedRow, type JobRow, type Kill, type LedgerRow } from "../soak/check.js"
import type { Kind } from "../soak/jobs.js"

const enq = (jobId: string, kind: Kind, notBeforeUs: number | null = null): EnqueuedRow => ({
  seq: Number(jobId),
  kind,
  jobId,
  notBeforeUs
})
const job = (id: string, attempts: number, errors: ReadonlyArray<object> = [], state = "completed"): JobRow => ({
  id,
  name: "soak-quick",
  state,
  attempts,
  uniqueKey: null,
  finishedUs: 1,
  errors: errors.length === 0 ? null : JSON.stringify(errors)
})
const run = (jobId: string, attempt: number, workerPid: number, startedUs: number, mutexKey: string | null = null): LedgerRow => ({
  jobId,
  attempt,
  workerPid,
  startedUs,
  finishedUs: startedUs + 100,
  mutexKey
})
const lost = (attempt: number) => ({ attempt, at: "", kind: "lost", message: "worker lost" })
const commitFailed = (attempt: number) => ({
  attempt,
  at: "",
  kind: "defect",
  message: "Error: COMMIT failed: Failed to execute statement: Connection lost: The server closed the connection."
})
const designed = (attempt: number) => ({ attempt, at: "", kind: "failure", message: `Designed: designed failure of attempt ${attempt}` })
const timedOut = (attempt: number) => ({ attempt, at: "", kind: "timeout", message: "JobTimeout" })

/** The counts of a check, without the examples. */
const counts = (...args: Parameters<typeof check>) => {
  const { examples: _, delayedMinMarginMs: __, rateBusiestWindow: ___, cappedMostRunning: _m, cappedStartedUnslotted: _u, ...rest } =
    check(...args)
  return rest
}
const zero = {
  lost: 0,
  duplicatesAfterKill: 0,
  duplicatesAfterLostCommit: 0,
  duplicatesUnexplained: 0,
  mutexOverlaps: 0,
  limitOvershoots: 0,
  rateOvershoots: 0,
  uniqueDuplicates: 0,
  stuck: 0,
  unaccounted: 0,
  timeoutFirstAttemptRecorded: 0,
  flakyFailingAttemptRecorded: 0,
  delayedRanEarly: 0,
  completedFinalAttemptUnrecorded: 0
}

describe("soak check", () => {
  it("a clean run: every count 0", () => {
    const result = check(
      [enq("1", "quick"), enq("2", "flaky"), enq("3", "timeout"), enq("4", "delayed", 5_000), enq("5", "poison")],
      [
        job("1", 1),
        job("2", 3, [designed(1), designed(2)]),
        job("3", 2, [timedOut(1)]),
        job("4", 1),
        job("5", 3, [designed(1), designed(2), designed(3)], "dead")
      ],
      [run("1", 1, 10, 1_000), run("2", 3, 10, 2_000), run("3", 2, 11, 3_000), run("4", 1, 11, 7_000)],
      []
    )
    const { examples, delayedMinMarginMs, rateBusiestWindow, cappedMostRunning, cappedStartedUnslotted, ...rest } = result
    assert.deepStrictEqual(rest, zero)
    assert.deepStrictEqual(examples, [])
    assert.strictEqual(delayedMinMarginMs, 2)
    assert.strictEqual(rateBusiestWindow, 0)
    assert.strictEqual(cappedMostRunning, 0)
    assert.strictEqual(cappedStartedUnslotted, 0)
  })

  it("rated runs: more than 10 claims in one 1 s window, or 2 of one key in one 0.5 s window, overshoot; windows are fixed, counted by the claims' instants", () => {
    const rated = (id: string, claimedUs: number | null, key: string): LedgerRow => ({
      ...run(id, 1, 10, (claimedUs ?? 0) + 5_000),
      rateKey: key,
      claimedUs
    })
    // 10 claims in the window 1 s–2 s over 5 keys, 2 a key (key k0 at 1.0 and 1.4 s, in the key window 1.0–1.5 s);
    // 10 more in 2 s–3 s: 20 in 1.5 s–2.5 s, which spans two windows.
    const ok = [
      ...Array.from({ length: 10 }, (_, i) => rated(`a${i}`, 1_000_000 + (i % 2) * 400_000 + Math.floor(i / 2), `k${Math.floor(i / 2)}`)),
      ...Array.from({ length: 10 }, (_, i) => rated(`b${i}`, 2_000_000 + (i % 2) * 400_000 + Math.floor(i / 2), `k${Math.floor(i / 2)}`))
    ]
    const ids = (rows: ReadonlyArray<LedgerRow>) => rows.map((r) => r.jobId)
    const all = (rows: ReadonlyArray<LedgerRow>) =>
      check(ids(rows).map((id) => enq(id, "rated")), ids(rows).map((id) => job(id, 1)), rows, [])
    assert.deepStrictEqual(counts(ids(ok).map((id) => enq(id, "rated")), ids(ok).map((id) => job(id, 1)), ok, []), zero)
    assert.strictEqual(all(ok).rateBusiestWindow, 10)
    // An 11th claim in 1 s–2 s, of a key of its own: one overshoot of the name's window.
    const eleven = [...ok, rated("c", 1_999_999, "k9")]
    assert.strictEqual(all(eleven).rateOvershoots, 1)
    assert.strictEqual(all(eleven).rateBusiestWindow, 11)
    // A third claim of k0 in 1.0–1.5 s in place of one of k4: the name's window keeps 10, k0's has 3.
    const thirdOfKey = [...ok.filter((r) => r.jobId !== "a9"), rated("c", 1_100_000, "k0")]
    assert.deepStrictEqual(
      counts(ids(thirdOfKey).map((id) => enq(id, "rated")), ids(thirdOfKey).map((id) => job(id, 1)), thirdOfKey, []),
      { ...zero, rateOvershoots: 1 }
    )
    // A run whose claim instant is unknown (its job row held another attempt) is left out.
    const unknown = [...ok, rated("d", null, "k0")]
    assert.strictEqual(all(unknown).rateOvershoots, 0)
  })

  it("limited runs: a start with 4 of one key running is an overshoot (limit 3), 3 is not; an end at a start's instant does not overlap it", () => {
    const limited = (id: string, startedUs: number, key: string): LedgerRow => ({ ...run(id, 1, 10, startedUs), limitKey: key })
    const ids = ["1", "2", "3", "4", "5"]
    const enqueued = ids.map((id) => enq(id, "limited"))
    const jobs = ids.map((id) => job(id, 1))
    // Runs last 100 µs: 1, 2, 3 overlap (3 at once); 4 starts as 1 ends. 5 starts while 1, 2, 3 run,
    // and 4 starts while 2, 3, 5 run: two starts with 4 running.
    const within = [limited("1", 1_000, "a"), limited("2", 1_010, "a"), limited("3", 1_020, "a"), limited("4", 1_100, "a")]
    assert.deepStrictEqual(counts(enqueued.slice(0, 4), jobs.slice(0, 4), within, []), zero)
    const over = [...within, limited("5", 1_050, "a")]
    assert.deepStrictEqual(counts(enqueued, jobs, over, []), { ...zero, limitOvershoots: 2 })
    // Across keys the name's limit of 8 holds: 9 at once, 3 keys of 3.
    const nine = Array.from({ length: 9 }, (_, i) => limited(String(i + 1), 1_000 + i, `k${i % 3}`))
    const nineIds = nine.map((r) => r.jobId)
    assert.deepStrictEqual(
      counts(nineIds.map((id) => enq(id, "limited")), nineIds.map((id) => job(id, 1)), nine, []),
      { ...zero, limitOvershoots: 1 }
    )
  })

  it("capped runs: a start with 5 running is an overshoot (limit 4), 4 is not; runs of other kinds do not count; unslotted starts are counted", () => {
    const capped = (id: string, startedUs: number, start: "slotted" | "unslotted" = "slotted"): LedgerRow => ({
      ...run(id, 1, 10, startedUs),
      cappedStart: start
    })
    const all = (rows: ReadonlyArray<LedgerRow>) =>
      check(
        rows.map((r) => enq(r.jobId, r.cappedStart === undefined ? "limited" : "capped")),
        rows.map((r) => job(r.jobId, 1)),
        rows,
        []
      )
    // Runs last 100 µs: 1–4 overlap (4 at once); 5 starts as 1 ends (in the slot 1 passed on, before
    // the write of 1's end), 6 as 2 ends. A limited run alongside is not a capped one.
    const within = [
      capped("1", 1_000),
      capped("2", 1_010),
      capped("3", 1_020),
      capped("4", 1_030),
      capped("5", 1_100, "unslotted"),
      capped("6", 1_110, "unslotted"),
      { ...run("7", 1, 11, 1_040), limitKey: "l0" }
    ]
    const ok = all(within)
    assert.deepStrictEqual({ ...ok, examples: [], delayedMinMarginMs: null }, {
      ...zero,
      examples: [],
      delayedMinMarginMs: null,
      rateBusiestWindow: 0,
      cappedMostRunning: 4,
      cappedStartedUnslotted: 2
    })
    // A fifth capped run while 1–4 run (a slot passed on while its giver still ran, or taken twice):
    // an overshoot at its start, and at the starts of 5 and 6 (it still runs as each takes the slot
    // of the run that ended).
    const over = all([...within, capped("8", 1_050, "unslotted")])
    assert.strictEqual(over.limitOvershoots, 3)
    assert.strictEqual(over.cappedMostRunning, 5)
    assert.include(over.examples, "limit overshoot: capped: 5 running at 1050 µs (limit 4), job 8 (pid 10)")
  })

  it("a run again after the worker was killed and the attempt recorded as worker lost: after a kill", () => {
    const kills: Array<Kill> = [{ pid: 10, atUs: 1_500 }]
    assert.deepStrictEqual(
      counts([enq("1", "quick")], [job("1", 2, [lost(1)])], [run("1", 1, 10, 1_000), run("1", 2, 11, 3_000)], kills),
      { ...zero, duplicatesAfterKill: 1 }
    )
  })

  it("a kill of the worker, but the attempt is not recorded as worker lost: unexplained", () => {
    const kills: Array<Kill> = [{ pid: 10, atUs: 1_500 }]
    // The attempt ended otherwise (a typed failure: the handler's run and its failure both happened).
    const result = check(
      [enq("1", "quick")],
      [job("1", 2, [designed(1)])],
      [run("1", 1, 10, 1_000), run("1", 2, 11, 3_000)],
      kills
    )
    assert.strictEqual(result.duplicatesUnexplained, 1)
    assert.strictEqual(result.duplicatesAfterKill, 0)
    assert.match(result.examples[0], /^duplicate: job 1 ran in attempt 1 \(pid 10.*was killed at 1500 µs/)
    // No error history at all: unexplained too.
    assert.strictEqual(
      check([enq("1", "quick")], [job("1", 2)], [run("1", 1, 10, 1_000), run("1", 2, 11, 3_000)], kills).duplicatesUnexplained,
      1
    )
  })

  it("worker lost, but the kill of its worker fell outside the two runs: unexplained", () => {
    const errors = [lost(1)]
    const ledger = [run("1", 1, 10, 1_000), run("1", 2, 11, 3_000)]
    // Killed before the first run started (an earlier life of a reused pid), after the second started, or another pid.
    for (const kill of [{ pid: 10, atUs: 900 }, { pid: 10, atUs: 3_001 }, { pid: 12, atUs: 1_500 }]) {
      assert.deepStrictEqual(
        counts([enq("1", "quick")], [job("1", 2, errors)], ledger, [kill]),
        { ...zero, duplicatesUnexplained: 1 },
        JSON.stringify(kill)
      )
    }
    // Never killed: a rescuer took the job from a live worker.
    assert.deepStrictEqual(counts([enq("1", "quick")], [job("1", 2, errors)], ledger, []), { ...zero, duplicatesUnexplained: 1 })
  })

  it("a lost COMMIT answer is checked before the kill: a worker killed after its COMMIT failed counts as a lost COMMIT", () => {
    // Attempt 1's COMMIT was applied, its answer lost; the same worker was killed before attempt 2 started.
    const kills: Array<Kill> = [{ pid: 10, atUs: 1_500 }]
    const result = check(
      [enq("1", "quick")],
      [job("1", 2, [commitFailed(1)])],
      [run("1", 1, 10, 1_000), run("1", 2, 11, 3_000)],
      kills
    )
    assert.deepStrictEqual({ ...result, examples: [], delayedMinMarginMs: null }, {
      ...zero,
      duplicatesAfterLostCommit: 1,
      examples: [],
      delayedMinMarginMs: null,
      rateBusiestWindow: 0,
      cappedMostRunning: 0,
      cappedStartedUnslotted: 0
    })
    assert.match(result.examples[0], /^duplicate after a lost COMMIT answer: job 1, attempt 1/)
    // A COMMIT failure recorded for another attempt explains nothing.
    assert.strictEqual(
      check([enq("1", "quick")], [job("1", 3, [commitFailed(2)])], [run("1", 1, 10, 1_000), run("1", 3, 11, 3_000)], [])
        .duplicatesUnexplained,
      1
    )
  })

  it("three runs: each pair explained on its own", () => {
    const kills: Array<Kill> = [{ pid: 10, atUs: 1_500 }]
    assert.deepStrictEqual(
      counts(
        [enq("1", "quick")],
        [job("1", 3, [lost(1), commitFailed(2)])],
        [run("1", 3, 12, 5_000), run("1", 1, 10, 1_000), run("1", 2, 11, 3_000)],
        kills
      ),
      { ...zero, duplicatesAfterKill: 1, duplicatesAfterLostCommit: 1 }
    )
  })

  it("a timeout job's first attempt in the ledger: a violation", () => {
    const result = check(
      [enq("1", "timeout")],
      [job("1", 2, [lost(1)])],
      [run("1", 1, 10, 1_000), run("1", 2, 11, 3_000)],
      [{ pid: 10, atUs: 1_500 }]
    )
    assert.strictEqual(result.timeoutFirstAttemptRecorded, 1)
    assert.strictEqual(result.flakyFailingAttemptRecorded, 0)
    assert.include(result.examples, "timeout attempt that must fail recorded a run: job 1 attempt 1 (pid 10)")
  })

  it("a flaky job's attempt 1 or 2 in the ledger: a violation", () => {
    const result = check(
      [enq("1", "flaky"), enq("2", "flaky")],
      [job("1", 3, [designed(1), designed(2)]), job("2", 3, [designed(1), designed(2)])],
      [run("1", 2, 10, 1_000), run("1", 3, 10, 2_000), run("2", 3, 10, 2_000)],
      []
    )
    assert.strictEqual(result.flakyFailingAttemptRecorded, 1)
    assert.strictEqual(result.timeoutFirstAttemptRecorded, 0)
    // The run of attempt 2 is a run again too, with no explanation.
    assert.strictEqual(result.duplicatesUnexplained, 1)
  })

  it("a delayed job that started before its delay was over: a violation; the skew allowed is an option", () => {
    const input = [
      [enq("1", "delayed", 10_000), enq("2", "delayed", 10_000)],
      [job("1", 1), job("2", 1)],
      [run("1", 1, 10, 9_999), run("2", 1, 10, 10_000)],
      []
    ] as const
    const result = check(...input)
    assert.strictEqual(result.delayedRanEarly, 1)
    assert.strictEqual(result.delayedMinMarginMs, -0)
    assert.include(result.examples, "delayed ran early: job 1 attempt 1 started 1 µs before its delay was over")
    assert.strictEqual(check(...input, { skewUs: 1 }).delayedRanEarly, 0)
  })

  it("a completed job whose final attempt has no run in the ledger: a violation; no run at all: lost", () => {
    const result = check(
      [enq("1", "quick"), enq("2", "quick")],
      [job("1", 2, [lost(1)]), job("2", 1)],
      [run("1", 1, 10, 1_000)],
      []
    )
    assert.strictEqual(result.completedFinalAttemptUnrecorded, 1)
    assert.strictEqual(result.lost, 1)
    assert.include(result.examples, "lost: job 2 (quick, seq 2): completed without a run in the ledger")
    assert.include(
      result.examples,
      "completed, final attempt not in the ledger: job 1 (quick) completed in attempt 2; the ledger has attempts 1"
    )
  })

  it("lost, unaccounted, stuck, mutex overlaps and unique duplicates", () => {
    const result = check(
      [enq("1", "poison"), enq("2", "quick"), enq("3", "mutex"), enq("4", "mutex"), enq("5", "unique"), enq("7", "quick")],
      [
        job("1", 2, [designed(1), designed(2)], "dead"),
        job("2", 0, [], "pending"),
        job("3", 1),
        job("4", 1),
        { ...job("5", 1), uniqueKey: "soak:u:5" },
        { ...job("6", 1), uniqueKey: "soak:u:5" }
      ],
      [run("3", 1, 10, 1_000, "m1"), run("4", 1, 11, 1_050, "m1"), run("5", 1, 10, 1_000), run("6", 1, 10, 1_000)],
      []
    )
    assert.deepStrictEqual(
      { ...result, examples: [], delayedMinMarginMs: null },
      {
        ...zero,
        // 1: 2 attempts instead of 3; 2: pending; 7: missing.
        lost: 3,
        unaccounted: 1,
        stuck: 1,
        mutexOverlaps: 1,
        uniqueDuplicates: 1,
        examples: [],
        delayedMinMarginMs: null,
        rateBusiestWindow: 0,
        cappedMostRunning: 0,
        cappedStartedUnslotted: 0
      }
    )
  })

  it("examples: at most 5 per category, 20 in all", () => {
    const n = 30
    const ids = Array.from({ length: n }, (_, i) => String(i + 1))
    const result = check(
      ids.map((id) => enq(id, "quick")),
      ids.map((id) => job(id, 2, [lost(1)])),
      ids.flatMap((id) => [run(id, 1, 10, 1_000), run(id, 2, 11, 3_000)]),
      []
    )
    assert.strictEqual(result.duplicatesUnexplained, n)
    assert.strictEqual(result.examples.length, 5)
  })
})
