/**
 * `sqlane dashboard`: serves the dashboard (its browser UI, JSON API and OpenAPI document) over
 * HTTP on its own, bound to 127.0.0.1 unless told otherwise, optionally read-only and behind basic auth.
 *
 * @since 0.4.0
 */
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as HttpServer from "@effect/platform/HttpServer"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as Config from "effect/Config"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import { createServer } from "node:http"
import { timingSafeEqual } from "node:crypto"
import * as Dashboard from "../dashboard/Dashboard.js"
import * as Ui from "../internal/dashboard/ui.js"
import { QueueLive } from "../layers/QueueLive.js"
import { CliError } from "./CliError.js"
import { common, connect } from "./connection.js"

const sameText = (a: string, b: string) => {
  const x = Buffer.from(a)
  const y = Buffer.from(b)
  return x.length === y.length && timingSafeEqual(x, y)
}

/** Loopback addresses: a server bound to one answers only requests addressed to a loopback name. */
const loopback = /^(127\.\d+\.\d+\.\d+|::1|\[::1\]|localhost)$/

/**
 * Answers 421 to a request whose `Host` is not a loopback name, when the server is bound to a
 * loopback address: a web page whose name was made to resolve to 127.0.0.1 (DNS rebinding) sends
 * its own name, and is refused before it can read the CSRF token or act.
 */
const loopbackHostOnly = <E, R>(app: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const host = (request.headers["host"] ?? "").toLowerCase()
    const name = host.startsWith("[") ? host.slice(0, host.indexOf("]") + 1) : host.replace(/:\d+$/, "")
    if (!loopback.test(name)) {
      return HttpServerResponse.unsafeJson({ _tag: "MisdirectedRequest", message: "this dashboard answers requests to localhost only" }, {
        status: 421
      })
    }
    return yield* app
  })

/** Answers 401 (with `WWW-Authenticate: Basic`) to a request without these credentials. */
const basicAuth = (credentials: string) => <E, R>(app: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const header = request.headers["authorization"] ?? ""
    const given = /^Basic /i.test(header) ? Buffer.from(header.slice(6).trim(), "base64").toString("utf8") : undefined
    if (given === undefined || !sameText(given, credentials)) {
      return HttpServerResponse.unsafeJson({ _tag: "Unauthorized", message: "credentials required" }, {
        status: 401,
        headers: { ...Ui.securityHeaders, "www-authenticate": "Basic realm=\"sqlane dashboard\", charset=\"UTF-8\"" }
      })
    }
    return yield* app
  })

export const dashboard = Command.make(
  "dashboard",
  {
    ...common,
    port: Options.integer("port").pipe(Options.withDescription("the port to listen on (0: any free one)"), Options.withDefault(7070)),
    host: Options.text("host").pipe(
      Options.withDescription("the address to bind (default 127.0.0.1: this machine only)"),
      Options.withDefault("127.0.0.1")
    ),
    readOnly: Options.boolean("read-only").pipe(Options.withDescription("refuse every action (403)")),
    basicAuth: Options.text("basic-auth").pipe(
      Options.withDescription("USER:PASS: ask every request for these credentials (or SQLANE_DASHBOARD_BASIC_AUTH)"),
      Options.withFallbackConfig(Config.string("SQLANE_DASHBOARD_BASIC_AUTH")),
      Options.optional
    )
  },
  (c) =>
    Effect.gen(function*() {
      if (c.port < 0 || c.port > 65535) return yield* new CliError({ message: `--port must be between 0 and 65535, got ${c.port}` })
      if (Option.isSome(c.basicAuth) && !/^[^:]+:.+$/s.test(c.basicAuth.value)) {
        // The value is not repeated: it may hold a password.
        return yield* new CliError({ message: "--basic-auth must be USER:PASS (a user, a colon, a password)" })
      }
      if (Option.isNone(c.basicAuth) && !loopback.test(c.host)) {
        yield* Effect.logWarning(`sqlane dashboard: ${c.host} is reachable from other machines and no --basic-auth is set`)
      }
      const app = yield* Dashboard.httpApp({ authorize: Effect.succeed(c.readOnly ? "read-only" : "allow") })
      const authed = Option.match(c.basicAuth, { onNone: () => app, onSome: (credentials) => basicAuth(credentials)(app) })
      const guarded = loopback.test(c.host) ? loopbackHostOnly(authed) : authed
      const announce = HttpServer.addressFormattedWith((address) =>
        Console.log(
          `sqlane dashboard: listening on ${address}/ (the API at ${address}/api/, OpenAPI at ${address}/api/openapi.json)` +
            (c.readOnly ? ", read-only" : "") + (Option.isSome(c.basicAuth) ? ", basic auth" : "")
        )
      )
      return yield* Layer.launch(
        Layer.mergeAll(HttpServer.serve(guarded), Layer.effectDiscard(announce)).pipe(
          Layer.provide(NodeHttpServer.layer(createServer, { port: c.port, host: c.host }))
        )
      ).pipe(
        Effect.mapError((e) => new CliError({ message: `cannot listen on ${c.host}:${c.port}: ${e.message}` })),
        // The actions' audit lines (Info) go to stderr with the other logs.
        Logger.withMinimumLogLevel(LogLevel.Info)
      )
    }).pipe(
      Effect.provide(QueueLive({ prefix: c.prefix, migrate: false })),
      Effect.provide(Layer.unwrapEffect(connect(c)))
    )
).pipe(Command.withDescription("serve the dashboard (browser UI and JSON API) over HTTP (127.0.0.1:7070 unless told)"))
