/**
 * A worker's options checked before it touches the database (`optionsProblem`), and the defaults
 * that depend on other options (`defaultPrefetch`).
 */
import { durationMillis } from "../options.js"
import { checkIdentifier } from "../sanitize.js"
import { InvalidWorkerOptions } from "../../schema/Errors.js"
import type { WorkerOptions } from "../../services/Worker.js"

/**
 * The default `prefetch`: 20 × the jobs the worker runs at once, and at least 200. A bound for short
 * jobs only: how many wait is measured (see `WorkerOptions.prefetch`). Measured: docs/performance.md,
 * "Prefetch".
 */
export const defaultPrefetch = (concurrency: number) => Math.max(20 * concurrency, 200)

/** The longest worker id: MySQL refuses a GET_LOCK name over 64 characters (error 3057); the lock is `sqw<scope>:<id>`. */
const maxWorkerIdLength = 55

/** Why the options cannot be used, or `undefined`: checked before the worker touches the database. */
export const optionsProblem = <R>(options: WorkerOptions<R>): InvalidWorkerOptions | undefined => {
  const concurrency = options.concurrency ?? 10
  if (!Number.isSafeInteger(concurrency) || concurrency < 1) {
    return new InvalidWorkerOptions({
      option: "concurrency",
      reason: typeof concurrency === "number" ? "range" : "type",
      message: `concurrency must be a positive integer, got ${options.concurrency}`
    })
  }
  const prefetch = options.prefetch
  if (prefetch !== undefined && (!Number.isSafeInteger(prefetch) || prefetch < 0)) {
    return new InvalidWorkerOptions({
      option: "prefetch",
      reason: typeof prefetch === "number" ? "range" : "type",
      message: `prefetch must be a whole number of jobs, 0 or more, got ${String(prefetch)}`
    })
  }
  if (options.id !== undefined) {
    const problem = typeof options.id === "string" && options.id.length > maxWorkerIdLength
      ? `is ${options.id.length} characters long; a worker id is at most ${maxWorkerIdLength} characters`
      : checkIdentifier(options.id)
    if (problem !== undefined) {
      return new InvalidWorkerOptions({
        option: "id",
        reason: typeof options.id !== "string"
          ? "type"
          : options.id.length === 0 || options.id.length > maxWorkerIdLength
          ? "range"
          : "characters",
        message: `the worker id ${problem}`
      })
    }
  }
  if (options.shutdownTimeout !== undefined) {
    const timeout = durationMillis(options.shutdownTimeout)
    if ("problem" in timeout) {
      return new InvalidWorkerOptions({ option: "shutdownTimeout", reason: timeout.reason, message: `shutdownTimeout ${timeout.problem}` })
    }
  }
  if (options.logs !== undefined && options.logs !== "default" && options.logs !== "quiet") {
    return new InvalidWorkerOptions({
      option: "logs",
      reason: "type",
      message: `logs must be "default" or "quiet", got ${String(options.logs)}`
    })
  }
  if (!Array.isArray(options.handlers)) {
    return new InvalidWorkerOptions({ option: "handlers", reason: "type", message: "handlers must be an array of Job.handler(…)" })
  }
  const names = new Set<string>()
  for (const h of options.handlers) {
    if (names.has(h.job.name)) {
      return new InvalidWorkerOptions({
        option: "handlers",
        reason: "conflict",
        message: `two handlers for job name "${h.job.name}"`
      })
    }
    names.add(h.job.name)
  }
  return undefined
}
