/**
 * What a worker logs of its jobs' ends, through Effect's logger (so the app's logger gets them):
 * a failed attempt that will be retried at `Warning`, a dead letter at `Error`, an end that changed
 * nothing (the job was cancelled, or taken back as a lost worker's, while the attempt ran) at
 * `Warning`, and the jobs of lost workers a rescue pass took back at `Warning`. One line each, with
 * the job's id, name and attempt as log annotations and in the message. `quiet` (the worker's
 * `logs: "quiet"`) turns them all off.
 *
 * Each end is logged once, after its write: an end the Completer could not write logs its own
 * warning, and one it dead-lettered in place of a refused end its own error.
 *
 * @internal
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import { type Handler, maxAttemptsOf } from "../../schema/Job.js"
import type { Outcome } from "../../services/Completer.js"
import type { ClaimedRow, OrphanedRow } from "../driver/Driver.js"
import { idList } from "../outage.js"

/** The longest error text in a line (its whitespace folded): the full text is in the job's record. */
const maxErrorChars = 300

/** What an end that changed nothing would have written. */
const ends = { pending: "retry", dead: "dead letter", completed: "completion" } as const

/** An error text on one line, at most {@link maxErrorChars} characters. */
const short = (text: string | null): string => {
  const line = (text ?? "").replace(/\s+/g, " ").trim()
  return line.length > maxErrorChars ? `${line.slice(0, maxErrorChars)}…` : line
}

export interface EndLogs {
  /**
   * The line for an attempt's end once written (`changed`: whether the write changed the job), or
   * `undefined` when there is none (a completion, a release, or `quiet`).
   */
  readonly ended: (row: ClaimedRow, end: Outcome, changed: boolean) => Effect.Effect<void> | undefined
  /** The line for the jobs of lost workers one rescue pass took back (not those it dead-lettered). */
  readonly rescued: (rows: ReadonlyArray<OrphanedRow>) => Effect.Effect<void>
}

/** The end logs of a worker with these handlers. */
export const make = (handlers: ReadonlyMap<string, Handler<any>>, quiet: boolean): EndLogs => {
  /** Attempts each job name's retry schedule allows, when it says (`Job.attempts`, `Job.defaultRetry`). */
  const maxAttempts = new Map(Array.from(handlers, ([name, h]) => [name, maxAttemptsOf(h.job)] as const))

  const annotated = (row: ClaimedRow, max: number | undefined, line: Effect.Effect<void>) =>
    Effect.annotateLogs(line, {
      package: "sqlane",
      module: "Worker",
      "sqlane.job.id": row.id,
      "sqlane.job.name": row.name,
      "sqlane.job.attempt": row.attempts,
      ...(max === undefined ? {} : { "sqlane.job.max_attempts": max })
    })

  const ended = (row: ClaimedRow, end: Outcome, changed: boolean): Effect.Effect<void> | undefined => {
    if (quiet || end.state === "released" || (changed && end.state === "completed")) return undefined
    const perSchedule = maxAttempts.get(row.name)
    // A manual retry gives a fresh set of attempts, counted on from the attempts made before it.
    const max = perSchedule === undefined ? undefined : row.attemptBase + perSchedule
    const attempt = `attempt ${row.attempts}${max === undefined ? "" : ` of ${max}`}`
    const job = `job ${row.id} (${row.name})`
    if (!changed) {
      return annotated(
        row,
        max,
        Effect.logWarning(
          `sqlane: the end of ${job} ${attempt} changed nothing: the job was cancelled, or taken back as a lost ` +
            `worker's, while the attempt ran (its ${ends[end.state]} was not written)`
        )
      )
    }
    if (end.state === "dead") {
      return annotated(row, max, Effect.logError(`sqlane: ${job} is dead after ${attempt}: ${short(end.lastError)}`))
    }
    const delayMs = end.runAtUs === null || end.endedAtUs === undefined ? 0 : (end.runAtUs - end.endedAtUs) / 1000
    const retry = delayMs <= 0 ? "retrying now" : `retrying in ${Duration.format(Duration.millis(Math.round(delayMs)))}`
    return annotated(row, max, Effect.logWarning(`sqlane: ${job} ${attempt} failed; ${retry}: ${short(end.lastError)}`))
  }

  const rescued = (rows: ReadonlyArray<OrphanedRow>): Effect.Effect<void> => {
    if (quiet || rows.length === 0) return Effect.void
    const workers = Array.from(new Set(rows.map((r) => r.workerId ?? "unknown")))
    return Effect.logWarning(
      `sqlane: took back ${rows.length} job(s) of lost worker(s) ${idList(workers)}: ${idList(rows.map((r) => r.id))}`
    ).pipe(Effect.annotateLogs({ package: "sqlane", module: "Worker", "sqlane.job.ids": rows.map((r) => r.id).join(",") }))
  }

  return { ended, rescued }
}
