/**
 * The soak's checks, over what the database holds after the drain: the jobs the driver enqueued
 * (`soak_enqueued`, written in the enqueue's transaction), the job rows, the ledger of handler runs
 * (`soak_ledger`) and the chaos driver's kill log.
 */
import { cappedLimits, expected, firstSucceedingAttempt, type Kind, limitedLimits, ratedRates } from "./jobs.js"

export interface EnqueuedRow {
  readonly seq: number
  readonly kind: Kind
  readonly jobId: string
  /**
   * For the `delayed` kind: the earliest time it may run, in µs of the machine's clock (`nowUs`) —
   * the driver's clock read before the enqueue, plus the delay. The queue reads its clock later, so
   * the job's `run_at` is at or after this. `null` for the other kinds.
   */
  readonly notBeforeUs: number | null
}
export interface JobRow {
  readonly id: string
  readonly name: string
  readonly state: string
  readonly attempts: number
  readonly uniqueKey: string | null
  readonly finishedUs: number | null
  /** The job's error history (JSON): one record per failed attempt, `{ attempt, kind, message, … }`. */
  readonly errors: string | null
}
export interface LedgerRow {
  readonly jobId: string
  readonly attempt: number
  readonly workerPid: number
  readonly startedUs: number
  readonly finishedUs: number
  readonly mutexKey: string | null
  /** The run's concurrency key (the `limited` kind), or null. */
  readonly limitKey?: string | null
  /** The run's concurrency key (the `rated` kind), or null. */
  readonly rateKey?: string | null
  /** The instant of the run's claim (the `rated` kind; null when its job row held another attempt), µs. */
  readonly claimedUs?: number | null
  /**
   * The `capped` kind (null for the others): whether its job row held a slot of the name's limit when
   * the run started (`unslotted`: it started in a slot an ended attempt passed on, before that end's
   * write reached the database).
   */
  readonly cappedStart?: "slotted" | "unslotted" | null
}
export interface Kill {
  readonly pid: number
  readonly atUs: number
}

export interface Violations {
  /** Enqueued jobs that did not end as their kind must (missing, wrong state, wrong attempts, or completed without a run). */
  readonly lost: number
  /**
   * Runs beyond a job's first whose previous run's worker was SIGKILLed after that run started and
   * before this one started, and whose previous attempt the job's error history records as
   * `worker lost` (a rescuer took the job back from the dead worker).
   */
  readonly duplicatesAfterKill: number
  /**
   * Runs beyond a job's first whose previous run committed its ledger row while the handler failed
   * with a connection error: the COMMIT's answer was lost to a cut connection or the server restart
   * (the handler's own transaction, which no queue can settle). Not counted as unexplained.
   */
  readonly duplicatesAfterLostCommit: number
  /** Runs beyond a job's first with neither explanation. */
  readonly duplicatesUnexplained: number
  /** Pairs of runs of one mutex key whose [started, finished] intervals overlap. */
  readonly mutexOverlaps: number
  /**
   * Starts of `limited` runs at which more runs of that kind (or of one key) were running than its
   * limits allow (`limitedLimits`), and of `capped` runs at which more than `cappedLimits.running`
   * `capped` runs were running, counting the recorded runs.
   */
  readonly limitOvershoots: number
  /**
   * Starts of `rated` runs beyond its rates (`ratedRates`) in one window: per fixed window of the
   * name's rate, and per key and window of its rate per key, the recorded runs whose claim
   * (`claimedUs`) fell in it, less the window's `starts` when more.
   */
  readonly rateOvershoots: number
  /** Job rows beyond the first for one unique key (every state guarded). */
  readonly uniqueDuplicates: number
  /** Job rows left running or pending after the drain. */
  readonly stuck: number
  /** Job rows of soak names the driver never recorded enqueueing (an enqueue written twice). */
  readonly unaccounted: number
  /** Ledger rows of attempts that must fail (see `failingAttempts` in soak/jobs.ts): timeout attempt 1. */
  readonly timeoutFirstAttemptRecorded: number
  /** Ledger rows of attempts that must fail: flaky attempts 1 and 2. */
  readonly flakyFailingAttemptRecorded: number
  /** Ledger rows of delayed jobs that started before their delay was over. */
  readonly delayedRanEarly: number
  /** Completed jobs with runs in the ledger, none of them of the attempt the job completed in. */
  readonly completedFinalAttemptUnrecorded: number
  /** The least time between a delayed job's earliest start and its first run (ms), for the report. */
  readonly delayedMinMarginMs: number | null
  /** The most `capped` runs recorded as running at once, for the report (its limit when reached). */
  readonly cappedMostRunning: number
  /** `capped` runs that started while their job row held no slot (`cappedStart`), for the report. */
  readonly cappedStartedUnslotted: number
  /** The most `rated` runs claimed in one window of its name's rate, for the report (the rate was reached when it equals its `starts`). */
  readonly rateBusiestWindow: number
  /** Examples of each violation, for the report. */
  readonly examples: ReadonlyArray<string>
}

interface AttemptRecord {
  readonly attempt: number
  readonly kind: string
  readonly message: string
}

const history = (errors: string | null): ReadonlyArray<AttemptRecord> => {
  try {
    const parsed = JSON.parse(errors ?? "[]")
    return Array.isArray(parsed) ? parsed : []
  } catch {
    return []
  }
}

/**
 * Whether attempt `attempt` of a job failed because its handler's COMMIT failed (per its error
 * history): the soak's handlers record such a failure as a defect "COMMIT failed: …". When that
 * run's ledger row exists, the COMMIT was applied and only its answer was lost (a connection killed
 * during the COMMIT: MariaDB then answers with an error although InnoDB committed).
 */
export const lostCommit = (errors: ReadonlyArray<AttemptRecord>, attempt: number): boolean =>
  errors.some((e) => e.attempt === attempt && e.kind === "defect" && /^(Error: )?COMMIT failed/.test(e.message))

/**
 * Whether attempt `attempt` of a job was ended by a rescuer because its worker was lost: the record
 * src/services/Worker.ts writes (`failure(row, …, "lost", undefined, "worker lost")`) when another
 * worker finds the job running under a worker whose session lock is free or whose heartbeat expired.
 * It is the only record of an attempt whose worker died: the dead worker writes nothing, and a
 * release (graceful shutdown) writes no record and does not count the attempt.
 */
export const workerLost = (errors: ReadonlyArray<AttemptRecord>, attempt: number): boolean =>
  errors.some((e) => e.attempt === attempt && e.kind === "lost" && e.message === "worker lost")

export interface CheckOptions {
  /**
   * How much earlier than its `notBeforeUs` a delayed job's run may start, in µs: clock skew between
   * the driver and the worker processes. 0 here: every process reads the same machine clock.
   */
  readonly skewUs?: number
}

export const check = (
  enqueued: ReadonlyArray<EnqueuedRow>,
  jobs: ReadonlyArray<JobRow>,
  ledger: ReadonlyArray<LedgerRow>,
  kills: ReadonlyArray<Kill>,
  options: CheckOptions = {}
): Violations => {
  const skewUs = options.skewUs ?? 0
  const examples: Array<string> = []
  const seen = new Map<string, number>()
  /** Up to 20 examples, at most 5 of each category, so one category cannot hide the others. */
  const example = (category: string, s: string) => {
    const n = seen.get(category) ?? 0
    seen.set(category, n + 1)
    if (examples.length < 20 && n < 5) examples.push(`${category}: ${s}`)
  }
  const jobById = new Map(jobs.map((j) => [j.id, j]))
  const kindById = new Map(enqueued.map((e) => [e.jobId, e.kind]))
  const runs = new Map<string, Array<LedgerRow>>()
  for (const r of ledger) {
    const list = runs.get(r.jobId)
    if (list) list.push(r)
    else runs.set(r.jobId, [r])
  }

  let lost = 0
  let completedFinalAttemptUnrecorded = 0
  let delayedRanEarly = 0
  let delayedMinMarginUs: number | null = null
  const known = new Set<string>()
  for (const e of enqueued) {
    known.add(e.jobId)
    const job = jobById.get(e.jobId)
    const want = expected[e.kind]
    const ran = runs.get(e.jobId) ?? []
    const why = job === undefined
      ? "missing"
      : job.state !== want.state
      ? `state ${job.state}, expected ${want.state}`
      : want.attempts !== undefined && job.attempts !== want.attempts
      ? `${job.attempts} attempts, expected ${want.attempts}`
      : job.state === "completed" && ran.length === 0
      ? "completed without a run in the ledger"
      : undefined
    if (why !== undefined) {
      lost++
      example("lost", `job ${e.jobId} (${e.kind}, seq ${e.seq}): ${why}`)
    } else if (job!.state === "completed" && !ran.some((r) => r.attempt === job!.attempts)) {
      completedFinalAttemptUnrecorded++
      example(
        "completed, final attempt not in the ledger",
        `job ${e.jobId} (${e.kind}) completed in attempt ${job!.attempts}; the ledger has attempts ${
          ran.map((r) => r.attempt).join(", ")
        }`
      )
    }
    if (e.kind === "delayed" && e.notBeforeUs !== null) {
      for (const r of ran) {
        const margin = r.startedUs - e.notBeforeUs
        if (delayedMinMarginUs === null || margin < delayedMinMarginUs) delayedMinMarginUs = margin
        if (margin < -skewUs) {
          delayedRanEarly++
          example("delayed ran early", `job ${e.jobId} attempt ${r.attempt} started ${-margin} µs before its delay was over`)
        }
      }
    }
  }

  let timeoutFirstAttemptRecorded = 0
  let flakyFailingAttemptRecorded = 0
  for (const r of ledger) {
    const kind = kindById.get(r.jobId)
    const first = kind === undefined ? undefined : firstSucceedingAttempt[kind]
    if (first === undefined || r.attempt >= first) continue
    if (kind === "timeout") timeoutFirstAttemptRecorded++
    else flakyFailingAttemptRecorded++
    example(`${kind} attempt that must fail recorded a run`, `job ${r.jobId} attempt ${r.attempt} (pid ${r.workerPid})`)
  }

  let unaccounted = 0
  for (const j of jobs) {
    if (!known.has(j.id)) {
      unaccounted++
      example("unaccounted", `job ${j.id} (${j.name}, ${j.state})`)
    }
  }

  let duplicatesAfterKill = 0
  let duplicatesUnexplained = 0
  let duplicatesAfterLostCommit = 0
  for (const [jobId, list] of runs) {
    if (list.length < 2) continue
    list.sort((a, b) => a.startedUs - b.startedUs)
    const errors = jobById.get(jobId)?.errors ?? null
    const records = history(errors)
    for (let i = 1; i < list.length; i++) {
      const prev = list[i - 1]
      const next = list[i]
      // The lost COMMIT answer first: its worker may well have been killed later, before the next run.
      if (lostCommit(records, prev.attempt)) {
        duplicatesAfterLostCommit++
        example("duplicate after a lost COMMIT answer", `job ${jobId}, attempt ${prev.attempt}: ${errors}`)
      } else if (
        workerLost(records, prev.attempt) &&
        kills.some((k) => k.pid === prev.workerPid && k.atUs >= prev.startedUs && k.atUs <= next.startedUs)
      ) {
        duplicatesAfterKill++
      } else {
        duplicatesUnexplained++
        const killed = kills.filter((k) => k.pid === prev.workerPid).map((k) => k.atUs)
        example(
          "duplicate",
          `job ${jobId} ran in attempt ${prev.attempt} (pid ${prev.workerPid}, from ${prev.startedUs} µs) and again in attempt ${next.attempt} (pid ${next.workerPid}, from ${next.startedUs} µs); pid ${prev.workerPid} ${
            killed.length === 0 ? "was never killed" : `was killed at ${killed.join(", ")} µs`
          }; errors: ${errors}`
        )
      }
    }
  }

  let mutexOverlaps = 0
  const byKey = new Map<string, Array<LedgerRow>>()
  for (const r of ledger) {
    if (r.mutexKey === null) continue
    const list = byKey.get(r.mutexKey)
    if (list) list.push(r)
    else byKey.set(r.mutexKey, [r])
  }
  for (const [key, list] of byKey) {
    list.sort((a, b) => a.startedUs - b.startedUs)
    for (let i = 0; i < list.length; i++) {
      for (let j = i + 1; j < list.length && list[j].startedUs < list[i].finishedUs; j++) {
        mutexOverlaps++
        example("mutex overlap", `${key}: job ${list[i].jobId} (pid ${list[i].workerPid}, ${
          list[i].startedUs
        }..${list[i].finishedUs} µs) and job ${list[j].jobId} (pid ${list[j].workerPid}, from ${list[j].startedUs} µs)`)
      }
    }
  }

  // The recorded runs of the limited and capped kinds as [start, finish) intervals: at each start, how
  // many run. Returns the most seen at a start.
  let limitOvershoots = 0
  const overshoots = (runs: ReadonlyArray<LedgerRow>, most: number, what: string) => {
    const events: Array<readonly [number, number, LedgerRow]> = []
    for (const r of runs) events.push([r.startedUs, 1, r], [r.finishedUs, -1, r])
    events.sort((a, b) => a[0] - b[0] || a[1] - b[1])
    let open = 0
    let busiest = 0
    for (const [at, d, r] of events) {
      open += d
      if (d === 1) busiest = Math.max(busiest, open)
      if (d === 1 && open > most) {
        limitOvershoots++
        example("limit overshoot", `${what}: ${open} running at ${at} µs (limit ${most}), job ${r.jobId} (pid ${r.workerPid})`)
      }
    }
    return busiest
  }
  const limitedRuns = ledger.filter((r) => r.limitKey !== null && r.limitKey !== undefined)
  overshoots(limitedRuns, limitedLimits.running, "limited, all keys")
  const byLimitKey = new Map<string, Array<LedgerRow>>()
  for (const r of limitedRuns) byLimitKey.set(r.limitKey!, [...(byLimitKey.get(r.limitKey!) ?? []), r])
  for (const [key, runs] of byLimitKey) overshoots(runs, limitedLimits.runningPerKey, `limited, key ${key}`)
  const cappedRuns = ledger.filter((r) => r.cappedStart !== null && r.cappedStart !== undefined)
  const cappedMostRunning = overshoots(cappedRuns, cappedLimits.running, "capped")
  const cappedStartedUnslotted = cappedRuns.filter((r) => r.cappedStart === "unslotted").length

  // The recorded runs of the rated kind by the window of their claim: no window may have more
  // starts than its rate (a run whose job row held another attempt has no claim instant, and is left out).
  let rateOvershoots = 0
  let rateBusiestWindow = 0
  const perWindow = new Map<string, { readonly what: string; readonly starts: number; runs: Array<LedgerRow> }>()
  const count = (id: string, what: string, starts: number, r: LedgerRow) => {
    const w = perWindow.get(id)
    if (w === undefined) perWindow.set(id, { what, starts, runs: [r] })
    else w.runs.push(r)
  }
  for (const r of ledger) {
    if (r.rateKey === null || r.rateKey === undefined || r.claimedUs === null || r.claimedUs === undefined) continue
    const nameWindow = Math.floor(r.claimedUs / ratedRates.rate.perUs) * ratedRates.rate.perUs
    const keyWindow = Math.floor(r.claimedUs / ratedRates.ratePerKey.perUs) * ratedRates.ratePerKey.perUs
    count(`name ${nameWindow}`, `the window from ${nameWindow} µs`, ratedRates.rate.starts, r)
    count(`key ${r.rateKey} ${keyWindow}`, `key ${r.rateKey}, the window from ${keyWindow} µs`, ratedRates.ratePerKey.starts, r)
  }
  for (const [id, w] of perWindow) {
    if (id.startsWith("name ")) rateBusiestWindow = Math.max(rateBusiestWindow, w.runs.length)
    if (w.runs.length <= w.starts) continue
    rateOvershoots += w.runs.length - w.starts
    example("rate overshoot", `${w.what}: ${w.runs.length} starts (rate ${w.starts}), jobs ${w.runs.map((r) => r.jobId).join(", ")}`)
  }

  let uniqueDuplicates = 0
  const byUnique = new Map<string, number>()
  for (const j of jobs) if (j.uniqueKey !== null) byUnique.set(j.uniqueKey, (byUnique.get(j.uniqueKey) ?? 0) + 1)
  for (const [key, n] of byUnique) {
    if (n > 1) {
      uniqueDuplicates += n - 1
      example("unique duplicate", `${n} rows with key ${key}`)
    }
  }

  let stuck = 0
  for (const j of jobs) {
    if (j.state === "running" || j.state === "pending") {
      stuck++
      example("stuck", `job ${j.id} (${j.name}) is ${j.state} after the drain`)
    }
  }

  return {
    lost,
    duplicatesAfterKill,
    duplicatesAfterLostCommit,
    duplicatesUnexplained,
    mutexOverlaps,
    limitOvershoots,
    rateOvershoots,
    uniqueDuplicates,
    stuck,
    unaccounted,
    timeoutFirstAttemptRecorded,
    flakyFailingAttemptRecorded,
    delayedRanEarly,
    completedFinalAttemptUnrecorded,
    delayedMinMarginMs: delayedMinMarginUs === null ? null : Math.round(delayedMinMarginUs / 100) / 10,
    cappedMostRunning,
    cappedStartedUnslotted,
    rateBusiestWindow,
    examples
  }
}
