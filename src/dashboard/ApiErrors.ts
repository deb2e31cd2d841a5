/**
 * The errors of the dashboard's API (`DashboardApi`), each with its HTTP status, and the access
 * checks (middlewares) that raise `Forbidden`.
 *
 * @since 0.4.0
 */
import * as HttpApiMiddleware from "@effect/platform/HttpApiMiddleware"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as Schema from "effect/Schema"

/**
 * Refused (403): the request's access does not allow it (`deny`, or an action in `read-only`), or
 * an action came without the CSRF token or from another origin.
 *
 * @example
 * ```ts
 * const response = await fetch("/sqlane/api/jobs/42/retry", { method: "POST" }) // no CSRF token
 * // 403 { _tag: "Forbidden", reason: "csrf-token", message: "…" }
 * ```
 *
 * @since 0.4.0
 * @category errors
 */
export class Forbidden extends Schema.TaggedError<Forbidden>("sqlane/dashboard/Forbidden")("Forbidden", {
  reason: Schema.Literal("denied", "read-only", "csrf-token", "cross-origin"),
  message: Schema.String
}, HttpApiSchema.annotations({ status: 403 })) {}

/**
 * A bulk action whose `confirm` is not the count of jobs its filter selects now (409): `count` is
 * the count now; send it back to act.
 *
 * @example
 * ```ts
 * // 409 { _tag: "ConfirmationMismatch", count: 12, confirm: 11 }: send { confirm: 12 } to act
 * const retryAgain = (e: DashboardApi.ConfirmationMismatch) => ({ confirm: e.count })
 * ```
 *
 * @since 0.4.0
 * @category errors
 */
export class ConfirmationMismatch
  extends Schema.TaggedError<ConfirmationMismatch>("sqlane/dashboard/ConfirmationMismatch")("ConfirmationMismatch", {
    count: Schema.Number,
    confirm: Schema.Number
  })
{}

/**
 * A request the API cannot serve as asked (400): a bad time, a filter selecting more than
 * `maxBulk` jobs, a bulk filter without a job name or state.
 *
 * @example
 * ```ts
 * // GET /sqlane/api/jobs?createdFrom=yesterday
 * // 400 { _tag: "BadRequest", message: "createdFrom is not a time (ISO 8601): \"yesterday\"" }
 * const isBad = (u: unknown) => Schema.is(DashboardApi.BadRequest)(u)
 * ```
 *
 * @since 0.4.0
 * @category errors
 */
export class BadRequest extends Schema.TaggedError<BadRequest>("sqlane/dashboard/BadRequest")("BadRequest", {
  message: Schema.String
}) {}

/**
 * The database failed (503), with its message.
 *
 * @example
 * ```ts
 * // 503 { _tag: "DatabaseError", message: "…" } while the database is unreachable
 * const retryLater = (e: DashboardApi.DatabaseError) => e.message
 * ```
 *
 * @since 0.4.0
 * @category errors
 */
export class DatabaseError extends Schema.TaggedError<DatabaseError>("sqlane/dashboard/DatabaseError")("DatabaseError", {
  message: Schema.String
}) {}

/**
 * The access check of the read endpoints: fails with `Forbidden` when the request's access is `deny`.
 *
 * @example
 * ```ts
 * // Provided by Dashboard.layer / Dashboard.httpApp from their `authorize`
 * const denied = Layer.succeed(DashboardApi.ReadAccess, new DashboardApi.Forbidden({ reason: "denied", message: "no" }))
 * ```
 *
 * @since 0.4.0
 * @category middleware
 */
export class ReadAccess extends HttpApiMiddleware.Tag<ReadAccess>()("sqlane/dashboard/ReadAccess", {
  failure: Forbidden
}) {}

/**
 * The access check of the actions: fails with `Forbidden` unless the request's access is `allow`,
 * it is same-origin (`Origin`, `Sec-Fetch-Site`) and it carries the CSRF token.
 *
 * @example
 * ```ts
 * // Provided by Dashboard.layer / Dashboard.httpApp from their `authorize` and CSRF token
 * const refuseAll = Layer.succeed(DashboardApi.ActionAccess, new DashboardApi.Forbidden({ reason: "read-only", message: "read-only" }))
 * ```
 *
 * @since 0.4.0
 * @category middleware
 */
export class ActionAccess extends HttpApiMiddleware.Tag<ActionAccess>()("sqlane/dashboard/ActionAccess", {
  failure: Forbidden
}) {}
