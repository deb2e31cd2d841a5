/**
 * Who may do what in the dashboard: the app's `authorize` decides per request (`allow`,
 * `read-only`, `deny`); actions also need a same-origin request (`Origin`, `Sec-Fetch-Site`) that
 * carries the CSRF token `GET /api/session` hands out, in the `x-sqlane-csrf` header.
 *
 * @internal
 */
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { randomBytes, timingSafeEqual } from "node:crypto"
import * as Api from "../../dashboard/Api.js"

/** How a request's access is decided, and the CSRF token actions carry. */
export interface Access {
  readonly decide: Effect.Effect<Api.Access, never, HttpServerRequest.HttpServerRequest>
  readonly csrfToken: string
  readonly csrfHeader: string
}

export const csrfHeader = "x-sqlane-csrf"

/** A fresh token of 32 random bytes (base64url), one per dashboard built. */
export const make = (
  decide: Effect.Effect<Api.Access, never, HttpServerRequest.HttpServerRequest>,
  csrfToken: string = randomBytes(32).toString("base64url")
): Access => ({ decide, csrfToken, csrfHeader })

const sameText = (a: string, b: string) => {
  const x = Buffer.from(a)
  const y = Buffer.from(b)
  return x.length === y.length && timingSafeEqual(x, y)
}

/**
 * Whether a request comes from the dashboard's own origin: a browser's `Sec-Fetch-Site` says
 * `same-origin` (or `none`: typed by the user), and an `Origin` names the host the request was sent
 * to. A request with neither (a script, curl) passes: the CSRF token is what such a caller lacks.
 */
const sameOrigin = (request: HttpServerRequest.HttpServerRequest) => {
  const site = request.headers["sec-fetch-site"]
  if (site !== undefined && site !== "same-origin" && site !== "none") return false
  const origin = request.headers["origin"]
  if (origin === undefined) return true
  if (origin === "null") return false
  try {
    return new URL(origin).host === (request.headers["host"] ?? "")
  } catch {
    return false
  }
}

const refuse = (reason: Api.Forbidden["reason"], message: string) => new Api.Forbidden({ reason, message })

/** The middlewares of the two groups: reads need any access but `deny`; actions, `allow` and the checks above. */
export const layer = (access: Access) =>
  Layer.mergeAll(
    Layer.succeed(
      Api.ReadAccess,
      Effect.flatMap(access.decide, (a) => a === "deny" ? refuse("denied", "access denied") : Effect.void)
    ),
    Layer.succeed(
      Api.ActionAccess,
      Effect.gen(function*() {
        const request = yield* HttpServerRequest.HttpServerRequest
        const a = yield* access.decide
        if (a === "deny") return yield* refuse("denied", "access denied")
        if (a === "read-only") return yield* refuse("read-only", "the dashboard is read-only here: actions are refused")
        if (!sameOrigin(request)) return yield* refuse("cross-origin", "actions are refused from another origin")
        const token = request.headers[csrfHeader]
        if (token === undefined || !sameText(token, access.csrfToken)) {
          return yield* refuse("csrf-token", `actions need the token of GET /api/session in the ${csrfHeader} header`)
        }
      }).pipe(
        // A refused action is audited as one done is: one line at Warning, with the path and the reason.
        Effect.tapError((e) =>
          Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
            Effect.logWarning(`sqlane dashboard: action refused (${e.reason})`).pipe(
              Effect.annotateLogs({ package: "sqlane", module: "Dashboard", "sqlane.dashboard.path": request.url.split("?")[0] })
            ))
        )
      )
    )
  )
