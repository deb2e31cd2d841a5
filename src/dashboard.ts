/**
 * `sqlane/dashboard`: the dashboard's typed JSON API (`DashboardApi`, an `@effect/platform` `HttpApi`
 * with its OpenAPI document) and the layer that serves it inside an app's HTTP server under a base
 * path (`Dashboard.layer`), with an authorization hook; `sqlane dashboard` serves it on its own. An
 * entry of its own, so that `sqlane` itself does not load the HTTP modules. docs/dashboard.md says
 * how to mount it, the endpoints, and how actions are authorized (read-only mode, CSRF token, same
 * origin).
 *
 * @example
 * ```ts
 * import { Dashboard } from "sqlane/dashboard"
 * const DashboardLive = Dashboard.layer({ basePath: "/sqlane", authorize: Effect.succeed("read-only") })
 * ```
 *
 * @since 0.4.0
 */
/** @since 0.4.0 */
export * as Dashboard from "./dashboard/Dashboard.js"
/** @since 0.4.0 */
export * as DashboardApi from "./dashboard/Api.js"
