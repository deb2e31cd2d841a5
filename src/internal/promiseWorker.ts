/**
 * The workers of `sqlane/promise`: an `async` handler as an Effect handler, the Effect `Worker`
 * started in the queue's runtime on a scope of its own, and the handle that stops or drains it.
 *
 * @internal
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type * as ManagedRuntime from "effect/ManagedRuntime"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import type { Services } from "../layers/QueueLive.js"
import type { HandlerContext, WorkerHandle, WorkOptions } from "../promise.js"
import * as Job from "../schema/Job.js"
import * as Worker from "../services/Worker.js"
import { Database } from "./Database.js"
import { nowMicros } from "./time.js"

/** The value of a successful exit; the error itself (not a `FiberFailure`) of a failed one. */
export const settle = <A>(exit: Exit.Exit<A, unknown>): A => {
  if (Exit.isSuccess(exit)) return exit.value
  throw Cause.squash(exit.cause)
}

/** Records an attempt's progress; never rejects. */
export type Progress = (context: Job.JobContext, value: number, message?: string) => Promise<void>

/**
 * `handler` as an Effect handler. It runs on the attempt's fiber, with an `AbortSignal` aborted when
 * that fiber is interrupted; a throw is a typed failure when it is a value of the job's `failure`
 * schema, else a defect.
 */
const effectHandler = (
  job: Job.Job.Any,
  handler: (payload: any, context: HandlerContext) => unknown,
  progress: Progress
): Job.Handler<never> => {
  const isFailure = Schema.is(Job.schemasOf(job).failure)
  return Job.handler(job, (payload, context) =>
    Effect.tryPromise({
      try: async (signal) =>
        handler(payload, { ...context, signal, progress: (value, message) => progress(context, value, message) }),
      catch: (thrown) => thrown
    }).pipe(Effect.catchAll((thrown) => isFailure(thrown) ? Effect.fail(thrown) : Effect.die(thrown))) as any)
}

/**
 * Waits until the worker is `idle` (no job held, no claim statement in flight) and no job of `names`
 * is due (paused names left out), or the worker is `stopped`, looking every 50 ms. `idle` is read
 * before and after the due jobs are counted: a claim that took a job before the count is still in
 * flight at the second read, or its jobs are held.
 */
const drain = (names: ReadonlyArray<string>, idle: Effect.Effect<boolean>, stopped: () => boolean) =>
  Effect.gen(function*() {
    const { driver } = yield* Database
    while (!stopped()) {
      if (yield* idle) {
        const paused = new Set((yield* driver.pausedList()).map((p) => p.name))
        const active = names.filter((n) => !paused.has(n))
        const due = active.length === 0 ? [] : yield* driver.jobCountDue(active, yield* nowMicros, 1)
        if (due.every((d) => d.due === 0) && (yield* idle)) return
      }
      yield* Effect.sleep("50 millis")
    }
  })

/**
 * Starts an Effect `Worker` of `job` in `runtime`, on a scope of its own that `stop` closes (its
 * graceful shutdown). Resolves once the worker holds its lock; rejects with what stopped it from
 * starting (its scope closed).
 */
export const start = async (
  runtime: ManagedRuntime.ManagedRuntime<Services | SqlClient.SqlClient, unknown>,
  job: Job.Job.Any,
  handler: (payload: any, context: HandlerContext) => unknown,
  options: WorkOptions,
  progress: Progress,
  stopped: (handle: WorkerHandle) => void
): Promise<WorkerHandle> => {
  const scope = Effect.runSync(Scope.make())
  const started = await runtime.runPromiseExit(Scope.extend(
    Worker.make({
      handlers: [effectHandler(job, handler, progress)],
      concurrency: options.concurrency,
      prefetch: options.prefetch,
      id: options.id,
      shutdownTimeout: options.shutdownTimeout,
      logs: options.logs
    }),
    scope
  ))
  if (Exit.isFailure(started)) await runtime.runPromise(Scope.close(scope, started))
  const worker = settle(started)
  let stopping: Promise<void> | undefined
  const handle: WorkerHandle = {
    id: worker.id,
    running: () => Effect.runPromise(worker.running),
    drain: () => runtime.runPromiseExit(drain([job.name], worker.idle, () => stopping !== undefined)).then(settle),
    stop: () => {
      stopping ??= runtime.runPromise(Scope.close(scope, Exit.void)).finally(() => stopped(handle))
      return stopping
    }
  }
  return handle
}
