/**
 * The dashboard's JSON API, as an `HttpApi` of @effect/platform: every endpoint, its request and
 * response schemas and its errors. `Dashboard` serves it (mounted in an app's HTTP server, or by
 * `sqlane dashboard`); a client can be derived from it with `HttpApiClient.make(DashboardApi.api)`,
 * and `OpenApi.fromApi(DashboardApi.api)` describes it (served beside it as `openapi.json`).
 *
 * Every path is below `/api` (itself below the base path the dashboard is mounted at). Times are
 * ISO 8601 strings (UTC); ages and durations are milliseconds; job ids are decimal strings. Payloads,
 * results and error texts are JSON data, never markup.
 *
 * ```text
 * GET  /api/session                    → Session (the CSRF token for actions, the access granted)
 * GET  /api/overview                   → Overview (per job name: counts by state, paused, limits)
 * GET  /api/jobs?name&state&…&cursor   → JobPage (newest first)
 * GET  /api/jobs/:id                   → JobDetail
 * GET  /api/dead-letters?name&cursor   → JobPage (jobs in state dead)
 * GET  /api/periodic-jobs              → PeriodicJobList
 * GET  /api/workers                    → WorkerList
 * GET  /api/stats                      → StatsView (per job name: completed and failed per minute, pickup percentiles)
 * POST /api/jobs/:id/retry|cancel|delete    → ActionOutcome
 * POST /api/names/pause|resume { name }      → ActionOutcome
 * POST /api/bulk/retry|cancel|delete         → BulkOutcome (first the count, then the action)
 * ```
 *
 * @since 0.4.0
 */
import * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import * as Schema from "effect/Schema"
import { JobNotFound } from "../schema/Errors.js"
import { ActionAccess, BadRequest, ConfirmationMismatch, DatabaseError, ReadAccess } from "./ApiErrors.js"
import {
  ActionOutcome,
  BulkOutcome,
  BulkRequest,
  JobDetail,
  JobFilter,
  JobId,
  JobPage,
  Overview,
  PageParams,
  PeriodicJobList,
  KeyText,
  Session,
  StatsView,
  WorkerList
} from "./ApiSchemas.js"

export * from "./ApiErrors.js"
export * from "./ApiSchemas.js"

const idPath = Schema.Struct({ id: JobId })
/** A job name in a request's body: names of up to 255 characters do not fit a path parameter. */
const nameBody = Schema.Struct({ name: KeyText })

/**
 * The read endpoints.
 *
 * @example
 * ```ts
 * const client = yield* HttpApiClient.make(DashboardApi.api, { baseUrl: "http://127.0.0.1:7070" })
 * const page = yield* client.reads.jobs({ urlParams: { state: "dead", limit: 20 } })
 * ```
 *
 * @since 0.4.0
 * @category api
 */
export class Reads extends HttpApiGroup.make("reads")
  .add(HttpApiEndpoint.get("session", "/session").addSuccess(Session))
  .add(HttpApiEndpoint.get("overview", "/overview").addSuccess(Overview))
  .add(
    HttpApiEndpoint.get("jobs", "/jobs").setUrlParams(Schema.Struct({ ...JobFilter.fields, ...PageParams }))
      .addSuccess(JobPage)
  )
  .add(HttpApiEndpoint.get("job", "/jobs/:id").setPath(idPath).addSuccess(JobDetail).addError(JobNotFound, { status: 404 }))
  .add(
    HttpApiEndpoint.get("deadLetters", "/dead-letters").setUrlParams(
      Schema.Struct({ name: Schema.optional(KeyText), ...PageParams })
    ).addSuccess(JobPage)
  )
  .add(HttpApiEndpoint.get("periodicJobs", "/periodic-jobs").addSuccess(PeriodicJobList))
  .add(HttpApiEndpoint.get("workers", "/workers").addSuccess(WorkerList))
  .add(HttpApiEndpoint.get("stats", "/stats").addSuccess(StatsView))
  .addError(BadRequest, { status: 400 })
  .addError(DatabaseError, { status: 503 })
  .middleware(ReadAccess)
  .prefix("/api")
{}

/**
 * The actions (POST): on one job, on one job name, and in bulk.
 *
 * @example
 * ```ts
 * const client = yield* HttpApiClient.make(DashboardApi.api, {
 *   baseUrl: "http://127.0.0.1:7070",
 *   transformClient: HttpClient.mapRequest(HttpClientRequest.setHeader("x-sqlane-csrf", token))
 * })
 * yield* client.actions.pause({ payload: { name: "send-email" } })
 * ```
 *
 * @since 0.4.0
 * @category api
 */
export class Actions extends HttpApiGroup.make("actions")
  .add(HttpApiEndpoint.post("retry", "/jobs/:id/retry").setPath(idPath).addSuccess(ActionOutcome))
  .add(HttpApiEndpoint.post("cancel", "/jobs/:id/cancel").setPath(idPath).addSuccess(ActionOutcome))
  .add(HttpApiEndpoint.post("delete", "/jobs/:id/delete").setPath(idPath).addSuccess(ActionOutcome))
  .add(HttpApiEndpoint.post("pause", "/names/pause").setPayload(nameBody).addSuccess(ActionOutcome))
  .add(HttpApiEndpoint.post("resume", "/names/resume").setPayload(nameBody).addSuccess(ActionOutcome))
  .add(
    HttpApiEndpoint.post("bulk", "/bulk/:action")
      .setPath(Schema.Struct({ action: Schema.Literal("retry", "cancel", "delete") }))
      .setPayload(BulkRequest)
      .addSuccess(BulkOutcome)
      .addError(ConfirmationMismatch, { status: 409 })
  )
  .addError(JobNotFound, { status: 404 })
  .addError(BadRequest, { status: 400 })
  .addError(DatabaseError, { status: 503 })
  .middleware(ActionAccess)
  .prefix("/api")
{}

/**
 * The dashboard's API: `Reads` and `Actions`.
 *
 * @example
 * ```ts
 * import { OpenApi } from "@effect/platform"
 * const spec = OpenApi.fromApi(DashboardApi.api) // what the dashboard serves as openapi.json
 * ```
 *
 * @since 0.4.0
 * @category api
 */
export const api = HttpApi.make("sqlane-dashboard")
  .add(Reads)
  .add(Actions)
  .annotate(OpenApi.Title, "sqlane dashboard")
