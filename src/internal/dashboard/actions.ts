/**
 * The dashboard's actions: retry, cancel and delete a job; pause and resume a job name; and the
 * same on every job a filter selects (at most `Api.maxBulk`), which first returns the count and
 * acts only when that count is sent back. Each action runs in a span (`sqlane.dashboard.<action>`)
 * and logs one line (at Info) with what it did: the audit trail.
 *
 * @internal
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Effect from "effect/Effect"
import * as Api from "../../dashboard/Api.js"
import { JobNotFound } from "../../schema/Errors.js"
import * as Admin from "../../services/Admin.js"
import { Queue } from "../../services/Queue.js"
import { Database } from "../Database.js"
import { databaseError, listOptions } from "./reads.js"

/** Runs an action in its span and logs one line with its target and outcome. */
const audited = <A, E, R>(
  action: string,
  target: Record<string, string>,
  outcome: (a: A) => Record<string, unknown>,
  body: Effect.Effect<A, E, R>
) =>
  body.pipe(
    Effect.tap((a) =>
      Effect.logInfo(`sqlane dashboard: ${action}`).pipe(Effect.annotateLogs({ action, ...target, ...outcome(a) }))
    ),
    Effect.tapError((e) =>
      Effect.logInfo(`sqlane dashboard: ${action} refused`).pipe(
        Effect.annotateLogs({ action, ...target, error: (e as { _tag?: string })._tag ?? String(e) })
      )
    ),
    Effect.withSpan(`sqlane.dashboard.${action}`, { attributes: { "sqlane.dashboard.action": action, ...target } })
  )

export const layer = HttpApiBuilder.group(Api.api, "actions", (handlers) =>
  Effect.gen(function*() {
    const admin = yield* Admin.Admin
    const queue = yield* Queue
    const { driver } = yield* Database

    const one = (results: ReadonlyArray<Admin.ActionResult>) =>
      new Api.ActionOutcome({ changed: results[0]?.changed ?? false, state: results[0]?.state ?? null })

    const deleteJob = (id: string) =>
      Effect.gen(function*() {
        const job = yield* queue.get(id)
        return new Api.ActionOutcome({ changed: yield* driver.jobDelete(id), state: job.state })
      })

    /**
     * The ids a filter selects, newest first; `BadRequest` past `maxBulk`. One read of up to
     * `maxBulk` jobs (a range of the filter's index) and, when it is full, one of the next job.
     */
    const select = (filter: typeof Api.JobFilter.Type) =>
      Effect.gen(function*() {
        const options = yield* listOptions(filter)
        const ids = (yield* admin.list({ ...options, limit: Api.maxBulk })).map((r) => r.id)
        if (ids.length === Api.maxBulk && (yield* admin.list({ ...options, beforeId: ids[ids.length - 1], limit: 1 })).length > 0) {
          return yield* new Api.BadRequest({
            message: `the filter selects more than ${Api.maxBulk} jobs: narrow it (a job name, a state, a time range)`
          })
        }
        return ids
      })

    /** One job of a bulk action: whether it changed (a job gone meanwhile did not). */
    const actOn = (action: "retry" | "cancel" | "delete", id: string) =>
      (action === "retry" ? queue.retry(id) : action === "cancel" ? queue.cancel(id) : driver.jobDelete(id)).pipe(
        Effect.catchIf((e): e is JobNotFound => e instanceof JobNotFound, () => Effect.succeed(false))
      )

    const bulk = (action: "retry" | "cancel" | "delete", request: Api.BulkRequest) =>
      Effect.gen(function*() {
        const f = request.filter
        if (f.name === undefined && f.state === undefined && f.id === undefined && f.uniqueKey === undefined) {
          return yield* new Api.BadRequest({ message: "a bulk action's filter needs a job name, a state, an id or a unique key" })
        }
        const ids = yield* select(request.filter)
        if (request.confirm === undefined) return new Api.BulkOutcome({ count: ids.length, done: false, changed: 0 })
        if (request.confirm !== ids.length) {
          return yield* new Api.ConfirmationMismatch({ count: ids.length, confirm: request.confirm })
        }
        let changed = 0
        for (const id of ids) if (yield* actOn(action, id)) changed++
        return new Api.BulkOutcome({ count: ids.length, done: true, changed })
      })

    const outcome = (o: Api.ActionOutcome) => ({ changed: o.changed, before: o.state })
    return handlers
      .handle("retry", ({ path }) =>
        audited("retry", { id: path.id }, outcome, Effect.map(admin.retry([path.id]), one)).pipe(
          Effect.catchTag("SqlError", databaseError)
        ))
      .handle("cancel", ({ path }) =>
        audited("cancel", { id: path.id }, outcome, Effect.map(admin.cancel([path.id]), one)).pipe(
          Effect.catchTag("SqlError", databaseError)
        ))
      .handle("delete", ({ path }) =>
        audited("delete", { id: path.id }, outcome, deleteJob(path.id)).pipe(Effect.catchTag("SqlError", databaseError)))
      .handle("pause", ({ payload }) =>
        audited(
          "pause",
          { name: payload.name },
          outcome,
          Effect.map(admin.pause(payload.name), (changed) => new Api.ActionOutcome({ changed, state: null }))
        ).pipe(Effect.catchTag("SqlError", databaseError)))
      .handle("resume", ({ payload }) =>
        audited(
          "resume",
          { name: payload.name },
          outcome,
          Effect.map(admin.resume(payload.name), (changed) => new Api.ActionOutcome({ changed, state: null }))
        ).pipe(Effect.catchTag("SqlError", databaseError)))
      .handle("bulk", ({ path, payload }) =>
        audited(
          `bulk-${path.action}`,
          { filter: JSON.stringify(payload.filter) },
          (o: Api.BulkOutcome) => ({ count: o.count, done: o.done, changed: o.changed }),
          bulk(path.action, payload)
        ).pipe(
          Effect.catchTag("SqlError", databaseError),
          // A client that goes away (a proxy's timeout) does not cut the action short, nor its audit line.
          Effect.uninterruptible
        ))
  }))
