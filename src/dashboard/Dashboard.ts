/**
 * Serving the dashboard: its browser UI at `<basePath>/` and its JSON API (`DashboardApi`) below
 * `<basePath>/api/`, mounted under a base path of an app's own HTTP server (`layer`, on
 * @effect/platform's `HttpLayerRouter`), or as an `HttpApp` to serve any other way (`httpApp`;
 * `sqlane dashboard` serves it standalone). Beside the API, under the same access,
 * `GET <basePath>/api/openapi.json` serves its OpenAPI document.
 *
 * **UI**: the page (`<basePath>/`, revalidated on every load) and its content-hashed assets
 * (`<basePath>/assets/…`, cached for a year) use relative URLs only, so they work under any base
 * path. Every response carries a Content-Security-Policy (`default-src 'self'`, no inline script)
 * and `X-Content-Type-Options: nosniff`.
 *
 * **Access**: `authorize` decides per request: `"allow"` (read and act), `"read-only"` (actions
 * answer 403 `Forbidden` with reason `read-only`) or `"deny"` (everything answers 403). **CSRF**:
 * an action (POST) must carry the token of `GET <basePath>/api/session` in the `x-sqlane-csrf`
 * header, and is refused (403) when its `Origin` is another host or its `Sec-Fetch-Site` is
 * `cross-site`/`same-site`. The token is drawn when the dashboard is built: replicas of an app
 * behind one address should pass one `csrfToken` of their own.
 *
 * Every action is logged (one line at Info) and runs in a span `sqlane.dashboard.<action>`.
 *
 * @since 0.4.0
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import type * as HttpApp from "@effect/platform/HttpApp"
import * as HttpLayerRouter from "@effect/platform/HttpLayerRouter"
import type * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as OpenApi from "@effect/platform/OpenApi"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { Database } from "../internal/Database.js"
import * as Access from "../internal/dashboard/access.js"
import * as Actions from "../internal/dashboard/actions.js"
import * as Reads from "../internal/dashboard/reads.js"
import * as Ui from "../internal/dashboard/ui.js"
import type { Admin } from "../services/Admin.js"
import type { Queue } from "../services/Queue.js"
import * as Api from "./Api.js"

/**
 * How the dashboard is served: who may do what, and (for `layer`) where.
 *
 * @example
 * ```ts
 * const options: Dashboard.Options = {
 *   basePath: "/sqlane",
 *   authorize: Effect.map(HttpServerRequest.HttpServerRequest, (request) =>
 *     request.headers["x-role"] === "admin" ? "allow" : request.headers["x-role"] === "ops" ? "read-only" : "deny")
 * }
 * ```
 *
 * @since 0.4.0
 * @category models
 */
export interface Options {
  /** Where the API is mounted (`layer` only), e.g. `/sqlane`: the API answers below `<basePath>/api/`. */
  readonly basePath?: `/${string}` | undefined
  /**
   * Decides each request's access from the request (its session cookie, a header set by a proxy…).
   * Default: `"allow"` — only for a server nobody else reaches.
   */
  readonly authorize?: Effect.Effect<Api.Access, never, HttpServerRequest.HttpServerRequest> | undefined
  /** The CSRF token actions must carry (default: 32 random bytes, drawn when the dashboard is built). */
  readonly csrfToken?: string | undefined
}

/**
 * What the dashboard's handlers need: the services `QueueLive` provides.
 *
 * @example
 * ```ts
 * // QueueLive provides them
 * const Served = Dashboard.layer().pipe(Layer.provide(QueueLive().pipe(Layer.provideMerge(ClientLive))))
 * ```
 *
 * @since 0.4.0
 * @category models
 */
export type Requirements = Admin | Queue | Database

const openApiPath = "/api/openapi.json"

const forbidden = HttpServerResponse.json(new Api.Forbidden({ reason: "denied", message: "access denied" }), {
  status: 403
}).pipe(Effect.orDie)

/**
 * The dashboard as an `HttpApp` answering at the root: the browser UI at `/` (and its assets at
 * `/assets/…`), the API at `/api/…`, and its OpenAPI document at `/api/openapi.json`. Serve it
 * with `HttpServer.serve`, or mount it yourself (`layer` does). A `"deny"` of `authorize` answers
 * 403 to the page as to the API.
 *
 * @example
 * ```ts
 * const app = yield* Dashboard.httpApp({ authorize: Effect.succeed("read-only") })
 * yield* Layer.launch(HttpServer.serve(app).pipe(Layer.provide(NodeHttpServer.layer(createServer, { port: 7070 }))))
 * ```
 *
 * @since 0.4.0
 * @category constructors
 */
export const httpApp = (
  options: Omit<Options, "basePath"> = {}
): Effect.Effect<HttpApp.Default<never, HttpRouter.HttpRouter.DefaultServices>, never, Requirements> =>
  Effect.gen(function*() {
    const access = Access.make(options.authorize ?? Effect.succeed("allow"), options.csrfToken)
    const middlewares = Access.layer(access)
    const handlers = Layer.mergeAll(Reads.layer(access), Actions.layer).pipe(Layer.provideMerge(middlewares))
    const api = yield* HttpApiBuilder.httpApp.pipe(
      Effect.provide(
        Layer.mergeAll(
          HttpApiBuilder.api(Api.api).pipe(Layer.provide(handlers)),
          HttpApiBuilder.Router.Live,
          HttpApiBuilder.Middleware.layer
        )
      )
    )
    const spec = OpenApi.fromApi(Api.api)
    const files = Ui.load()
    return Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      const path = request.url.split("?")[0]
      if (request.method === "GET" && path === openApiPath) {
        if ((yield* access.decide) === "deny") return yield* forbidden
        return yield* HttpServerResponse.json(spec).pipe(Effect.orDie)
      }
      if ((request.method === "GET" || request.method === "HEAD") && !path.startsWith("/api/")) {
        const page = Ui.respond(files, path)
        if (page !== undefined) return (yield* access.decide) === "deny" ? yield* forbidden : page
      }
      return yield* api
    }).pipe(Effect.map(HttpServerResponse.setHeaders(Ui.securityHeaders)))
  })

/**
 * Mounts the dashboard under `options.basePath` (default `/sqlane`) of the app's `HttpLayerRouter`:
 * requests to `<basePath>/…` reach the dashboard with the base path cut off, and `<basePath>`
 * itself redirects to `<basePath>/` (the page's relative URLs need the slash). It asks the router
 * for the platform services every `HttpApp` of @effect/platform may use (a Node server's layer
 * provides them).
 *
 * @example
 * ```ts
 * const Routes = Layer.mergeAll(AppRoutes, Dashboard.layer({ basePath: "/sqlane", authorize }))
 * HttpLayerRouter.serve(Routes).pipe(
 *   Layer.provide(NodeHttpServer.layer(createServer, { port: 3000 })),
 *   Layer.provide(QueueLive().pipe(Layer.provideMerge(ClientLive))),
 *   Layer.launch,
 *   NodeRuntime.runMain
 * )
 * ```
 *
 * @since 0.4.0
 * @category layers
 */
export const layer = (
  options: Options = {}
): Layer.Layer<
  never,
  never,
  HttpLayerRouter.HttpRouter | Requirements | HttpLayerRouter.Request<"Requires", HttpRouter.HttpRouter.DefaultServices>
> =>
  HttpLayerRouter.use((router) =>
    Effect.gen(function*() {
      const basePath = (options.basePath ?? "/sqlane").replace(/\/+$/, "")
      const app = yield* httpApp(options)
      // `<basePath>` (no slash) is redirected to `<basePath>/`, relatively (`sqlane/` from `/sqlane`),
      // so that it holds behind a proxy that moves the path.
      const redirect = HttpServerResponse.redirect(`./${basePath.slice(basePath.lastIndexOf("/") + 1)}/`, { status: 308 })
      // The router matches paths without regard to case; the base path is matched with it (`/SQLANE/`
      // is not the dashboard), so that a proxy guarding the path by its prefix guards all of it.
      const notFound = HttpServerResponse.empty({ status: 404 })
      const handle = (request: HttpServerRequest.HttpServerRequest) => {
        const path = request.url.split("?")[0]
        return path === basePath
          ? Effect.succeed(redirect)
          : !path.startsWith(`${basePath}/`)
          ? Effect.succeed(notFound)
          : Effect.provideService(
            app,
            HttpServerRequest.HttpServerRequest,
            request.modify({ url: request.url.slice(basePath.length) || "/" })
          )
      }
      if (basePath !== "") yield* router.add("GET", basePath as `/${string}`, handle)
      yield* router.add("*", `${basePath}/*` as `/${string}`, handle)
    })
  )
