/**
 * The soak's checks, over what the database holds after the drain: the jobs the driver enqueued
 * (`soak_enqueued`, written in the enqueue's transaction), the job rows, the ledger of handler runs
 * (`soak_ledger`) and the chaos driver's kill log.
 */
import { expected, type Kind } from "./jobs.js"

export interface EnqueuedRow {
  readonly seq: number
  readonly kind: Kind
  readonly jobId: string
}
export interface JobRow {
  readonly id: string
  readonly name: string
  readonly state: string
  readonly attempts: number
  readonly uniqueKey: string | null
  readonly finishedUs: number | null
  /** The job's error history (JSON), for the examples. */
  readonly errors: string | null
}
export interface LedgerRow {
  readonly jobId: string
  readonly attempt: number
  readonly workerPid: number
  readonly startedUs: number
  readonly finishedUs: number
  readonly mutexKey: string | null
}
export interface Kill {
  readonly pid: number
  readonly atUs: number
}

export interface Violations {
  /** Enqueued jobs that did not end as their kind must (missing, wrong state, wrong attempts, or completed without a run). */
  readonly lost: number
  /** Runs beyond a job's first whose previous run's worker was SIGKILLed between the start of that run and the start of this one. */
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
  /** Job rows beyond the first for one unique key (every state guarded). */
  readonly uniqueDuplicates: number
  /** Job rows left running or pending after the drain. */
  readonly stuck: number
  /** Job rows of soak names the driver never recorded enqueueing (an enqueue written twice). */
  readonly unaccounted: number
  /** Examples of each violation, for the report. */
  readonly examples: ReadonlyArray<string>
}

/**
 * Whether attempt `attempt` of a job failed because its handler's COMMIT failed (per its error history,
 * JSON): the soak's handlers record such a failure as "COMMIT failed: …". When that run's ledger row
 * exists, the COMMIT was applied and only its answer was lost (a connection killed during the COMMIT:
 * MariaDB then answers with an error although InnoDB committed).
 */
const lostCommit = (errors: string | null, attempt: number): boolean => {
  try {
    const history = JSON.parse(errors ?? "[]") as Array<{ attempt: number; kind: string; message: string }>
    return history.some((e) => e.attempt === attempt && e.kind === "defect" && /^(Error: )?COMMIT failed/.test(e.message))
  } catch {
    return false
  }
}

export const check = (
  enqueued: ReadonlyArray<EnqueuedRow>,
  jobs: ReadonlyArray<JobRow>,
  ledger: ReadonlyArray<LedgerRow>,
  kills: ReadonlyArray<Kill>
): Violations => {
  const examples: Array<string> = []
  const example = (s: string) => {
    if (examples.length < 20) examples.push(s)
  }
  const jobById = new Map(jobs.map((j) => [j.id, j]))
  const runs = new Map<string, Array<LedgerRow>>()
  for (const r of ledger) {
    const list = runs.get(r.jobId)
    if (list) list.push(r)
    else runs.set(r.jobId, [r])
  }

  let lost = 0
  const known = new Set<string>()
  for (const e of enqueued) {
    known.add(e.jobId)
    const job = jobById.get(e.jobId)
    const want = expected[e.kind]
    const ran = runs.get(e.jobId)?.length ?? 0
    const why = job === undefined
      ? "missing"
      : job.state !== want.state
      ? `state ${job.state}, expected ${want.state}`
      : want.attempts !== undefined && job.attempts !== want.attempts
      ? `${job.attempts} attempts, expected ${want.attempts}`
      : job.state === "completed" && ran === 0
      ? "completed without a run in the ledger"
      : undefined
    if (why !== undefined) {
      lost++
      example(`lost: job ${e.jobId} (${e.kind}, seq ${e.seq}): ${why}`)
    }
  }

  let unaccounted = 0
  for (const j of jobs) {
    if (!known.has(j.id)) {
      unaccounted++
      example(`unaccounted: job ${j.id} (${j.name}, ${j.state})`)
    }
  }

  let duplicatesAfterKill = 0
  let duplicatesUnexplained = 0
  let duplicatesAfterLostCommit = 0
  for (const [jobId, list] of runs) {
    if (list.length < 2) continue
    list.sort((a, b) => a.startedUs - b.startedUs)
    for (let i = 1; i < list.length; i++) {
      const prev = list[i - 1]
      const next = list[i]
      if (kills.some((k) => k.pid === prev.workerPid && k.atUs >= prev.startedUs && k.atUs <= next.startedUs)) {
        duplicatesAfterKill++
      } else if (lostCommit(jobById.get(jobId)?.errors ?? null, prev.attempt)) {
        duplicatesAfterLostCommit++
        example(`duplicate after a lost COMMIT answer: job ${jobId}, attempt ${prev.attempt}: ${
          jobById.get(jobId)?.errors
        }`)
      }
      else {
        duplicatesUnexplained++
        example(`duplicate: job ${jobId} ran in attempt ${prev.attempt} (pid ${prev.workerPid}) and again in attempt ${
          list[i].attempt
        } (pid ${list[i].workerPid}); pid ${prev.workerPid} was not killed after it started; errors: ${
          jobById.get(jobId)?.errors
        }`)
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
        example(`mutex overlap on ${key}: job ${list[i].jobId} (pid ${list[i].workerPid}, ${
          list[i].startedUs
        }..${list[i].finishedUs} µs) and job ${list[j].jobId} (pid ${list[j].workerPid}, from ${list[j].startedUs} µs)`)
      }
    }
  }

  let uniqueDuplicates = 0
  const byUnique = new Map<string, number>()
  for (const j of jobs) if (j.uniqueKey !== null) byUnique.set(j.uniqueKey, (byUnique.get(j.uniqueKey) ?? 0) + 1)
  for (const [key, n] of byUnique) {
    if (n > 1) {
      uniqueDuplicates += n - 1
      example(`unique duplicate: ${n} rows with key ${key}`)
    }
  }

  let stuck = 0
  for (const j of jobs) {
    if (j.state === "running" || j.state === "pending") {
      stuck++
      example(`stuck: job ${j.id} (${j.name}) is ${j.state} after the drain`)
    }
  }

  return { lost, duplicatesAfterKill, duplicatesAfterLostCommit, duplicatesUnexplained, mutexOverlaps, uniqueDuplicates, stuck, unaccounted, examples }
}
