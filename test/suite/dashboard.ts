/**
 * The dashboard's JSON API through real HTTP, on every database: mounted under a base path of an
 * `HttpLayerRouter` server on an ephemeral port, and served by `sqlane dashboard`. Reads (overview,
 * jobs with keyset pages, job detail, dead letters, periodic jobs, workers, the OpenAPI document),
 * actions and what they change in the database, bulk actions confirmed by their count, and what is
 * refused: actions in read-only mode, from another origin or without the CSRF token, and requests
 * without the basic-auth credentials.
 */
import * as HttpLayerRouter from "@effect/platform/HttpLayerRouter"
import * as HttpServer from "@effect/platform/HttpServer"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as SqlClient from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"
import * as HashMap from "effect/HashMap"
import * as HashSet from "effect/HashSet"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Schema from "effect/Schema"
import * as http from "node:http"
import { createServer } from "node:http"
import { Dashboard } from "../../src/dashboard.js"
import { Admin, Job, PeriodicJob, Queue, Scheduler } from "../../src/index.js"
import { Database } from "../../src/internal/Database.js"
import { nowMicros } from "../../src/internal/time.js"
import { waitUntil, withQueue } from "../support/helpers.js"
import { spawnCliUntil } from "../support/processes.js"
import type { Target } from "../support/targets.js"

const Mail = Job.make("dash.mail", { payload: Schema.Struct({ to: Schema.String }) })
const Report = Job.make("dash.report", { payload: Schema.Struct({ n: Schema.Number }) })

interface Reply {
  readonly status: number
  readonly body: any
  readonly text: string
}

/** A client of the dashboard at `base` (e.g. `http://127.0.0.1:1234/sqlane`). */
const client = (base: string) => {
  const call = (method: "GET" | "POST", path: string, init: { body?: unknown; headers?: Record<string, string> } = {}) =>
    Effect.promise(async (): Promise<Reply> => {
      const response = await fetch(base + path, {
        method,
        headers: { ...(init.body === undefined ? {} : { "content-type": "application/json" }), ...init.headers },
        body: init.body === undefined ? undefined : JSON.stringify(init.body)
      })
      const text = await response.text()
      let body: unknown = undefined
      try {
        body = JSON.parse(text)
      } catch {
        body = undefined
      }
      return { status: response.status, body, text }
    })
  const token = Effect.map(call("GET", "/api/session"), (r) => r.body.csrfToken as string)
  return {
    get: (path: string) => call("GET", path),
    /** An action with the session's CSRF token. */
    act: (path: string, body?: unknown) =>
      Effect.flatMap(token, (t) => call("POST", path, { body, headers: { "x-sqlane-csrf": t } })),
    post: call.bind(null, "POST")
  }
}

/** The dashboard mounted at /sqlane of an HttpLayerRouter server on an ephemeral port of 127.0.0.1. */
const serve = (authorize?: Dashboard.Options["authorize"], logs?: Array<{ message: string; annotations: Record<string, unknown> }>) =>
  Effect.gen(function*() {
    // The server's fibers log with the logger of the fiber that builds it.
    if (logs !== undefined) {
      yield* Effect.locallyScopedWith(FiberRef.currentLoggers, HashSet.add(Logger.make(({ annotations, message }) => {
        logs.push({
          message: String(Array.isArray(message) ? message.join(" ") : message),
          annotations: Object.fromEntries(HashMap.toEntries(annotations))
        })
      })))
    }
    const context = yield* Layer.build(
      HttpLayerRouter.serve(Dashboard.layer({ basePath: "/sqlane", authorize }), { disableLogger: true, disableListenLog: true })
        .pipe(Layer.provideMerge(NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" })))
    )
    const address = Context.get(context, HttpServer.HttpServer).address
    assert(address._tag === "TcpAddress")
    return `http://127.0.0.1:${address.port}/sqlane`
  })

/** Sets a job's state by SQL (a dead letter without running a worker). */
const setState = (prefix: string, id: string, state: string) =>
  Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    yield* sql`UPDATE ${sql(prefix + "jobs")} SET state = ${state}, finished_at = created_at, last_error = 'boom' WHERE id = ${id}`
  })

const stateOf = (prefix: string, id: string) =>
  Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    const rows = yield* sql<{ state: string }>`SELECT state FROM ${sql(prefix + "jobs")} WHERE id = ${id}`
    return rows[0]?.state
  })

export const dashboard = (target: Target) => {
  const name = (title: string) => `[${target.id}] dashboard: ${title}`

  describe(`dashboard [${target.id}]`, () => {
    it.live(name("reads: overview, jobs with keyset pages, detail, dead letters, periodic jobs, workers, OpenAPI"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const queue = yield* Queue.Queue
          const { driver } = yield* Database
          const ids: Array<string> = []
          for (let i = 0; i < 5; i++) ids.push(yield* queue.enqueue(Report, { n: i }))
          const xss = "<script>alert(1)</script>\"><img src=x onerror=alert(2)>"
          const mailId = yield* queue.enqueue(Mail, { to: xss }, { unique: "mail-1" })
          yield* setState(prefix, ids[0], "dead")
          const nowUs = yield* nowMicros
          yield* driver.workerRegister("w-dash", nowUs, "host-a", 4242, ["dash.report"])
          yield* driver.scheduleFire("dash.nightly", nowUs - 60_000_000, nowUs, Effect.void)
          const base = yield* serve()
          const api = client(base)

          const overview = yield* api.get("/api/overview")
          assert.strictEqual(overview.status, 200, overview.text)
          // A name with U+0000 (no job has one) is a bad request on every database.
          assert.strictEqual((yield* api.get("/api/jobs?name=a%00b")).status, 400)
          // The base path is matched with its case: /SQLANE/ is not the dashboard.
          const shouted = yield* Effect.promise(() => fetch(`${base.replace("/sqlane", "/SQLANE")}/api/overview`).then((r) => r.status))
          assert.strictEqual(shouted, 404)
          const report = overview.body.names.find((n: any) => n.name === "dash.report")
          assert.deepStrictEqual([report.pending.count, report.dead.count, report.paused], [4, 1, false])
          assert.isNumber(report.oldestDueMs)
          assert.strictEqual(overview.body.countCap, 10_000)

          // Keyset pages, newest first: 2 + 2 + 2 jobs, the last page without a cursor.
          const first = yield* api.get("/api/jobs?limit=2")
          assert.strictEqual(first.status, 200, first.text)
          assert.deepStrictEqual(first.body.jobs.map((j: any) => j.id), [mailId, ids[4]])
          const second = yield* api.get(`/api/jobs?limit=2&cursor=${first.body.nextCursor}`)
          assert.deepStrictEqual(second.body.jobs.map((j: any) => j.id), [ids[3], ids[2]])
          const third = yield* api.get(`/api/jobs?limit=2&cursor=${second.body.nextCursor}`)
          assert.deepStrictEqual(third.body.jobs.map((j: any) => j.id), [ids[1], ids[0]])
          assert.strictEqual(third.body.nextCursor, null)

          // Filters: name and state, id, unique key, creation time.
          const byName = yield* api.get("/api/jobs?name=dash.report&state=pending")
          assert.deepStrictEqual(byName.body.jobs.map((j: any) => j.id), [ids[4], ids[3], ids[2], ids[1]])
          const byId = yield* api.get(`/api/jobs?id=${ids[2]}`)
          assert.deepStrictEqual(byId.body.jobs.map((j: any) => j.id), [ids[2]])
          const byKey = yield* api.get("/api/jobs?uniqueKey=mail-1")
          assert.deepStrictEqual(byKey.body.jobs.map((j: any) => j.id), [mailId])
          const future = yield* api.get(`/api/jobs?createdFrom=${encodeURIComponent(new Date(Date.now() + 3_600_000).toISOString())}`)
          assert.deepStrictEqual(future.body.jobs, [])
          const badTime = yield* api.get("/api/jobs?createdFrom=yesterday")
          assert.strictEqual(badTime.status, 400)
          assert.strictEqual(badTime.body._tag, "BadRequest")
          for (const time of ["1", "-271821-04-20T00:00:00Z", "+020000-01-01T00:00:00Z"]) {
            const outOfRange = yield* api.get(`/api/jobs?createdBefore=${encodeURIComponent(time)}`)
            assert.strictEqual(outOfRange.status, 400, `${time}: ${outOfRange.text}`)
          }
          // Ids past a 64-bit integer are bad requests on both databases (not a failed query).
          for (const path of ["/api/jobs/9223372036854775808", "/api/jobs?id=9999999999999999999", "/api/jobs?cursor=9223372036854775808"]) {
            const tooBig = yield* api.get(path)
            assert.strictEqual(tooBig.status, 400, `${path}: ${tooBig.text}`)
          }
          assert.strictEqual((yield* api.get("/api/jobs?id=9223372036854775807")).status, 200)

          // Detail: the payload as JSON text; the markup-like text stays inert string data.
          const detail = yield* api.get(`/api/jobs/${mailId}`)
          assert.strictEqual(detail.status, 200, detail.text)
          assert.match(detail.text, /^\{/)
          assert.deepStrictEqual(JSON.parse(detail.body.payload), { to: xss })
          assert.strictEqual(detail.body.job.name, "dash.mail")
          assert.deepStrictEqual(detail.body.errors, [])
          const missing = yield* api.get("/api/jobs/999999999")
          assert.strictEqual(missing.status, 404)
          assert.strictEqual(missing.body._tag, "JobNotFound")

          const dead = yield* api.get("/api/dead-letters")
          assert.deepStrictEqual(dead.body.jobs.map((j: any) => [j.id, j.state, j.lastError]), [[ids[0], "dead", "boom"]])

          // A scheduler describes its periodic job (job, expression, zone, next tick) once it ticked.
          const EverySecond = PeriodicJob.unsafeMake("dash.every-second", {
            cron: "* * * * * *",
            timeZone: "Europe/Berlin",
            job: Report,
            payload: () => ({ n: 0 })
          })
          yield* Scheduler.make({ schedules: [EverySecond] })
          const described = Effect.map(api.get("/api/periodic-jobs"), (r) => r.body.periodicJobs as Array<any>)
          yield* waitUntil(Effect.map(described, (ps) => ps.length === 2 && ps[0].expression !== null), 10_000, "the scheduler's description")
          const [ticking, nightly] = yield* described
          assert.deepStrictEqual(
            [ticking.name, ticking.jobName, ticking.expression, ticking.timeZone],
            ["dash.every-second", "dash.report", "* * * * * *", "Europe/Berlin"]
          )
          const lastMs = Date.parse(ticking.lastTickAt)
          const nextMs = Date.parse(ticking.nextTickAt)
          assert.strictEqual(nextMs % 1_000, 0, ticking.nextTickAt)
          assert.isAbove(nextMs, lastMs)
          assert.deepStrictEqual([nightly.name, nightly.expression], ["dash.nightly", null])
          assert.strictEqual(Date.parse(nightly.lastTickAt), Math.floor((nowUs - 60_000_000) / 1000))

          const workers = yield* api.get("/api/workers")
          const w = workers.body.workers.find((x: any) => x.id === "w-dash")
          assert.deepStrictEqual([w.host, w.pid, w.jobNames, w.runningJobs], ["host-a", 4242, ["dash.report"], []])
          assert.isAtLeast(w.heartbeatAgeMs, 0)

          const spec = yield* api.get("/api/openapi.json")
          assert.strictEqual(spec.status, 200)
          assert.strictEqual(spec.body.info.title, "sqlane dashboard")
          assert.property(spec.body.paths, "/api/jobs/{id}")
          assert.property(spec.body.paths, "/api/bulk/{action}")
        })))

    it.live(name("actions: retry a dead job, cancel a pending one, delete, pause and resume, bulk retry confirmed by count"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const queue = yield* Queue.Queue
          const ids: Array<string> = []
          for (let i = 0; i < 4; i++) ids.push(yield* queue.enqueue(Report, { n: i }))
          yield* setState(prefix, ids[0], "dead")
          const logs: Array<{ message: string; annotations: Record<string, unknown> }> = []
          const api = client(yield* serve(undefined, logs))

          const retried = yield* api.act(`/api/jobs/${ids[0]}/retry`)
          assert.strictEqual(retried.status, 200, retried.text)
          assert.deepStrictEqual(retried.body, { changed: true, state: "dead" })
          assert.strictEqual(yield* stateOf(prefix, ids[0]), "pending")
          // The audit line: one per action, with its target and outcome.
          const audit = logs.filter((l) => l.message.startsWith("sqlane dashboard: "))
          assert.deepStrictEqual(audit.map((l) => [l.message, l.annotations.id, l.annotations.changed, l.annotations.before]), [
            ["sqlane dashboard: retry", ids[0], true, "dead"]
          ])

          const cancelled = yield* api.act(`/api/jobs/${ids[1]}/cancel`)
          assert.deepStrictEqual(cancelled.body, { changed: true, state: "pending" })
          assert.strictEqual(yield* stateOf(prefix, ids[1]), "cancelled")

          const deleted = yield* api.act(`/api/jobs/${ids[1]}/delete`)
          assert.deepStrictEqual(deleted.body, { changed: true, state: "cancelled" })
          assert.strictEqual(yield* stateOf(prefix, ids[1]), undefined)
          const gone = yield* api.act(`/api/jobs/${ids[1]}/retry`)
          assert.strictEqual(gone.status, 404)

          const paused = yield* api.act("/api/names/pause", { name: "dash.report" })
          assert.deepStrictEqual(paused.body, { changed: true, state: null })
          const overview = yield* api.get("/api/overview")
          assert.isTrue(overview.body.names.find((n: any) => n.name === "dash.report").paused)
          const resumed = yield* api.act("/api/names/resume", { name: "dash.report" })
          assert.deepStrictEqual(resumed.body, { changed: true, state: null })
          const after = yield* api.get("/api/overview")
          assert.isFalse(after.body.names.find((n: any) => n.name === "dash.report").paused)
          // A name of 255 characters (the longest a job name may be) is paused too; 256 is refused.
          const long = "n".repeat(255)
          assert.deepStrictEqual((yield* api.act("/api/names/pause", { name: long })).body, { changed: true, state: null })
          assert.deepStrictEqual((yield* (yield* Admin.Admin).paused).map((p) => p.name), [long])
          assert.strictEqual((yield* api.act("/api/names/pause", { name: long + "n" })).status, 400)
          assert.deepStrictEqual((yield* api.act("/api/names/resume", { name: long })).body, { changed: true, state: null })

          // Bulk: the count first, a wrong confirmation refused (nothing changes), the right one acts.
          yield* setState(prefix, ids[2], "dead")
          yield* setState(prefix, ids[3], "dead")
          const filter = { name: "dash.report", state: "dead" }
          const counted = yield* api.act("/api/bulk/retry", { filter })
          assert.deepStrictEqual(counted.body, { count: 2, done: false, changed: 0 })
          const wrong = yield* api.act("/api/bulk/retry", { filter, confirm: 3 })
          assert.strictEqual(wrong.status, 409, wrong.text)
          assert.deepStrictEqual([wrong.body._tag, wrong.body.count], ["ConfirmationMismatch", 2])
          assert.strictEqual(yield* stateOf(prefix, ids[2]), "dead")
          // A filter with a typo, or none, selects nothing: refused, not read as "every job".
          const typo = yield* api.act("/api/bulk/retry", { filter: { name: "dash.report", status: "dead" } })
          assert.strictEqual(typo.status, 400, typo.text)
          const empty = yield* api.act("/api/bulk/delete", { filter: {} })
          assert.strictEqual(empty.status, 400, empty.text)
          const done = yield* api.act("/api/bulk/retry", { filter, confirm: 2 })
          assert.deepStrictEqual(done.body, { count: 2, done: true, changed: 2 })
          assert.deepStrictEqual([yield* stateOf(prefix, ids[2]), yield* stateOf(prefix, ids[3])], ["pending", "pending"])
        })))

    it.live(name("overview past the count cap: each name's pending jobs counted up to the cap, the others' states as lower bounds"), () =>
      withQueue(target, () =>
        Effect.gen(function*() {
          const queue = yield* Queue.Queue
          // More pending jobs of one name than the cap (10,000), and a few of a name after it in
          // name order (the order of a capped read of the pending index).
          for (let i = 0; i < 11; i++) yield* queue.enqueueMany(Mail, Array.from({ length: 1000 }, (_, n) => ({ to: `${n}` })))
          yield* queue.enqueueMany(Report, [{ n: 1 }, { n: 2 }, { n: 3 }])
          const base = yield* serve()
          const overview = yield* client(base).get("/api/overview")
          assert.strictEqual(overview.status, 200, overview.text)
          const byName = (n: string) => overview.body.names.find((x: any) => x.name === n)
          assert.deepStrictEqual(byName("dash.mail").pending, { count: 10_000, atLeast: true })
          assert.deepStrictEqual(byName("dash.report").pending, { count: 3, atLeast: false })
        })), 120_000)

    it.live(name("refusals: read-only, denied, cross-origin and token-less actions"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const queue = yield* Queue.Queue
          const id = yield* queue.enqueue(Report, { n: 1 })
          // The app decides per request: here by a header its proxy would set.
          const logs: Array<{ message: string; annotations: Record<string, unknown> }> = []
          const base = yield* serve(Effect.map(HttpServerRequest.HttpServerRequest, (request) => {
            const role = request.headers["x-role"]
            return role === "admin" ? "allow" : role === "viewer" ? "read-only" : "deny"
          }), logs)
          const api = client(base)
          const as = (role: string) => ({ "x-role": role })
          const session = yield* api.post("/api/session", { headers: as("admin") })
          assert.strictEqual(session.status, 404) // the session is a GET
          const admin = yield* Effect.promise(() => fetch(`${base}/api/session`, { headers: as("admin") }).then((r) => r.json() as Promise<any>))
          assert.strictEqual(admin.access, "allow")
          const token = admin.csrfToken as string

          const denied = yield* Effect.promise(() => fetch(`${base}/api/overview`).then(async (r) => [r.status, (await r.json()) as any] as const))
          assert.deepStrictEqual([denied[0], denied[1]._tag, denied[1].reason], [403, "Forbidden", "denied"])

          const viewerRead = yield* Effect.promise(() => fetch(`${base}/api/overview`, { headers: as("viewer") }).then((r) => r.status))
          assert.strictEqual(viewerRead, 200)
          const readOnly = yield* api.post(`/api/jobs/${id}/cancel`, { headers: { ...as("viewer"), "x-sqlane-csrf": token } })
          assert.deepStrictEqual([readOnly.status, readOnly.body.reason], [403, "read-only"])

          const noToken = yield* api.post(`/api/jobs/${id}/cancel`, { headers: as("admin") })
          assert.deepStrictEqual([noToken.status, noToken.body.reason], [403, "csrf-token"])
          const badToken = yield* api.post(`/api/jobs/${id}/cancel`, { headers: { ...as("admin"), "x-sqlane-csrf": "x" + token } })
          assert.deepStrictEqual([badToken.status, badToken.body.reason], [403, "csrf-token"])
          const crossOrigin = yield* api.post(`/api/jobs/${id}/cancel`, {
            headers: { ...as("admin"), "x-sqlane-csrf": token, origin: "https://evil.example" }
          })
          assert.deepStrictEqual([crossOrigin.status, crossOrigin.body.reason], [403, "cross-origin"])
          const crossSite = yield* api.post(`/api/jobs/${id}/cancel`, {
            headers: { ...as("admin"), "x-sqlane-csrf": token, "sec-fetch-site": "cross-site" }
          })
          assert.deepStrictEqual([crossSite.status, crossSite.body.reason], [403, "cross-origin"])
          assert.strictEqual(yield* stateOf(prefix, id), "pending")
          // Each refused action is logged with its path and reason.
          const refusals = logs.filter((l) => l.message.startsWith("sqlane dashboard: action refused"))
          assert.deepStrictEqual(
            refusals.map((l) => [l.message, l.annotations["sqlane.dashboard.path"]]),
            ["read-only", "csrf-token", "csrf-token", "cross-origin", "cross-origin"].map((reason) => [
              `sqlane dashboard: action refused (${reason})`,
              `/api/jobs/${id}/cancel`
            ])
          )

          const sameOrigin = yield* api.post(`/api/jobs/${id}/cancel`, {
            headers: { ...as("admin"), "x-sqlane-csrf": token, origin: new URL(base).origin, "sec-fetch-site": "same-origin" }
          })
          assert.strictEqual(sameOrigin.status, 200, sameOrigin.text)
          assert.strictEqual(yield* stateOf(prefix, id), "cancelled")
        })))

    it.live(name("sqlane dashboard serves the API; --read-only refuses actions; --basic-auth asks for credentials"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const queue = yield* Queue.Queue
          const id = yield* queue.enqueue(Report, { n: 1 })
          const env = { DATABASE_URL: target.url }
          const server = yield* spawnCliUntil(
            ["dashboard", "--prefix", prefix, "--port", "0", "--read-only", "--basic-auth", "ops:s3cret-pass"],
            /listening on/,
            env
          )
          assert.match(server.line, /listening on http:\/\/127\.0\.0\.1:\d+\/ \(the API at http:\/\/127\.0\.0\.1:\d+\/api\/.*read-only, basic auth/)
          assert.notInclude(server.line + server.stderr(), "s3cret-pass")
          const base = /(http:\/\/127\.0\.0\.1:\d+)/.exec(server.line)![1]
          const auth = { authorization: `Basic ${Buffer.from("ops:s3cret-pass").toString("base64")}` }
          const api = client(base)

          const anonymous = yield* api.get("/api/overview")
          assert.strictEqual(anonymous.status, 401)
          const unauthorized = yield* Effect.promise(() => fetch(`${base}/`).then((r) => r.headers))
          assert.strictEqual(unauthorized.get("x-content-type-options"), "nosniff")
          assert.match(unauthorized.get("content-security-policy") ?? "", /^default-src 'self'/)
          const wrong = yield* Effect.promise(() =>
            fetch(`${base}/api/overview`, { headers: { authorization: `Basic ${Buffer.from("ops:nope").toString("base64")}` } })
              .then((r) => r.status)
          )
          assert.strictEqual(wrong, 401)
          const overview = yield* Effect.promise(() => fetch(`${base}/api/overview`, { headers: auth }).then((r) => r.json() as Promise<any>))
          assert.strictEqual(overview.names.find((n: any) => n.name === "dash.report").pending.count, 1)
          const session = yield* Effect.promise(() => fetch(`${base}/api/session`, { headers: auth }).then((r) => r.json() as Promise<any>))
          assert.strictEqual(session.access, "read-only")
          const refused = yield* api.post(`/api/jobs/${id}/retry`, { headers: { ...auth, "x-sqlane-csrf": session.csrfToken } })
          assert.deepStrictEqual([refused.status, refused.body.reason], [403, "read-only"])
          const spec = yield* Effect.promise(() => fetch(`${base}/api/openapi.json`, { headers: auth }).then((r) => r.status))
          assert.strictEqual(spec, 200)
          // The browser UI at /: the page (revalidated each load, under the CSP) and its hashed assets (cached).
          assert.strictEqual(yield* Effect.promise(() => fetch(`${base}/`).then((r) => r.status)), 401)
          const page = yield* Effect.promise(async () => {
            const r = await fetch(`${base}/`, { headers: auth })
            return { status: r.status, headers: r.headers, text: await r.text() }
          })
          assert.deepStrictEqual(
            [page.status, page.headers.get("content-type"), page.headers.get("cache-control"), page.headers.get("x-content-type-options")],
            [200, "text/html; charset=utf-8", "no-cache", "nosniff"]
          )
          assert.match(page.headers.get("content-security-policy") ?? "", /^default-src 'self'; script-src 'self';/)
          const script = /<script type="module" src="(assets\/app-[\w-]+\.js)"><\/script>/.exec(page.text)?.[1]
          assert.isDefined(script, page.text)
          const asset = yield* Effect.promise(async () => {
            const r = await fetch(`${base}/${script}`, { headers: auth })
            return [r.status, r.headers.get("content-type"), r.headers.get("cache-control"), (await r.arrayBuffer()).byteLength > 1000]
          })
          assert.deepStrictEqual(asset, [200, "text/javascript; charset=utf-8", "public, max-age=31536000, immutable", true])
          assert.strictEqual(yield* Effect.promise(() => fetch(`${base}/assets/nope.js`, { headers: auth }).then((r) => r.status)), 404)
          // Bound to 127.0.0.1, it answers requests addressed to a loopback name only (DNS rebinding:
          // a page whose name resolves to 127.0.0.1 sends its own name).
          const port = Number(new URL(base).port)
          const hostAs = (host: string) =>
            Effect.async<number>((resume) => {
              const req = http.request({ host: "127.0.0.1", port, path: "/api/session", headers: { ...auth, host } }, (res) => {
                res.resume()
                resume(Effect.succeed(res.statusCode ?? 0))
              })
              req.on("error", () => resume(Effect.succeed(-1)))
              req.end()
            })
          assert.strictEqual(yield* hostAs(`evil.example:${port}`), 421)
          assert.strictEqual(yield* hostAs(`localhost:${port}`), 200)
        })))
  })
}
