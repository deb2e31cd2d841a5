/**
 * The dashboard's browser UI in a real headless Chromium, on every database: the page mounted at
 * /sqlane/ of an `HttpLayerRouter` server, each view opened, the actions taken through its buttons
 * (retry a dead job, cancel a running one, pause a name, a bulk retry confirmed by its count) and
 * what they changed read back from the database; read-only access showing no action and the API
 * refusing them; denied access refusing the page; payloads, error messages and job names that look
 * like markup rendered as inert text; a name with a right-to-left override leaving the text after it
 * in order, and a long one wrapping; a filter value of the address the API would not take shown as
 * an error, with no bulk action.
 *
 * Without Chromium the tests are skipped with the reason, unless CI=true (then they fail).
 */
import * as HttpLayerRouter from "@effect/platform/HttpLayerRouter"
import * as HttpServer from "@effect/platform/HttpServer"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as SqlClient from "@effect/sql/SqlClient"
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { createServer } from "node:http"
import type { Browser, BrowserContext, Locator } from "playwright-core"
import { Dashboard } from "../../src/dashboard.js"
import { Job, Queue, Worker } from "../../src/index.js"
import { Database } from "../../src/internal/Database.js"
import { nowMicros } from "../../src/internal/time.js"
import { Admin } from "../../src/services/Admin.js"
import { chromiumMissing, type Launched, launchChromium } from "../support/browser.js"
import { waitUntil, withQueue } from "../support/helpers.js"
import type { Target } from "../support/targets.js"

const Report = Job.make("ui.report", { payload: Schema.Struct({ n: Schema.Number }) })
const Bulk = Job.make("ui.bulk", { payload: Schema.Struct({ n: Schema.Number }) })
const Slow = Job.make("ui.slow", { payload: Schema.Struct({ n: Schema.Number }) })

/** Text that would run script if it were inserted as markup. */
const scriptTag = "<script>window.__xss=1</script>"
const imgTag = "\"><img src=x onerror=\"window.__xss=1\">"

/** Access by a header the test's "proxy" sets: admin → allow, viewer → read-only, none → deny. */
const byRole = Effect.map(HttpServerRequest.HttpServerRequest, (request) => {
  const role = request.headers["x-role"]
  return role === "admin" ? "allow" as const : role === "viewer" ? "read-only" as const : "deny" as const
})

/** The dashboard mounted at /sqlane of a server on an ephemeral port of 127.0.0.1; its page's URL. */
const serve = Effect.gen(function*() {
  const context = yield* Layer.build(
    HttpLayerRouter.serve(Dashboard.layer({ basePath: "/sqlane", authorize: byRole }), { disableLogger: true, disableListenLog: true })
      .pipe(Layer.provideMerge(NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" })))
  )
  const address = Context.get(context, HttpServer.HttpServer).address
  assert(address._tag === "TcpAddress")
  return `http://127.0.0.1:${address.port}/sqlane/`
})

const sqlOf = Effect.map(SqlClient.SqlClient, (sql) => sql.withoutTransforms())

const stateOf = (prefix: string, id: string) =>
  Effect.gen(function*() {
    const sql = yield* sqlOf
    const rows = yield* sql<{ state: string }>`SELECT state FROM ${sql(prefix + "jobs")} WHERE id = ${id}`
    return rows[0]?.state
  })

const countOf = (prefix: string, name: string, state: string) =>
  Effect.gen(function*() {
    const sql = yield* sqlOf
    const rows = yield* sql<{ n: unknown }>`SELECT COUNT(*) AS n FROM ${sql(prefix + "jobs")} WHERE name = ${name} AND state = ${state}`
    return Number(rows[0].n)
  })

/** Makes jobs dead letters by SQL (without running them). */
const killJobs = (prefix: string, where: { name: string } | { id: string }) =>
  Effect.gen(function*() {
    const sql = yield* sqlOf
    const cond = "id" in where ? sql`id = ${where.id}` : sql`name = ${where.name}`
    yield* sql`UPDATE ${sql(prefix + "jobs")} SET state = 'dead', attempts = 1, finished_at = created_at, last_error = 'boom' WHERE ${cond}`
  })

const promise = <A>(f: () => Promise<A>) => Effect.promise(f)

/**
 * Waits until `rows` matches exactly `n` elements (and `none`, if given, none), for up to 10 s, and
 * returns the last count of `rows` (the page's CSP forbids waitForFunction's eval). Counted over and over: the rows of the page before a
 * click are still there when it starts, and the list may be empty while the next page loads.
 */
const exactly = (rows: Locator, n: number, none?: Locator) =>
  promise(async () => {
    const until = Date.now() + 10_000
    while (true) {
      const count = await rows.count()
      if ((count === n && (none === undefined || (await none.count()) === 0)) || Date.now() >= until) return count
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
  })

export const dashboardBrowser = (target: Target) => {
  const name = (title: string) => `[${target.id}] dashboard UI: ${title}`
  const missing = chromiumMissing()
  if (missing !== undefined) {
    if (process.env.CI === "true") {
      it(name("Chromium is installed (CI=true)"), () => assert.fail(missing))
    } else {
      it.skip(name(`skipped: ${missing}`), () => {})
    }
    return
  }

  describe(`dashboard UI [${target.id}]`, () => {
    let launched: Promise<Launched> | undefined
    const browser = (): Promise<Browser> => (launched ??= launchChromium()).then((l) => l.browser)
    afterAll(async () => {
      if (launched !== undefined) await (await launched).close()
    })

    /** A page in a fresh browser context (no shared cookies or cache), closed with the scope. */
    const open = (headers: Record<string, string>) =>
      Effect.acquireRelease(
        promise(async () => {
          const context: BrowserContext = await (await browser()).newContext({ extraHTTPHeaders: headers, viewport: { width: 1280, height: 900 } })
          const page = await context.newPage()
          page.setDefaultTimeout(15_000)
          const problems: Array<string> = []
          page.on("pageerror", (e) => problems.push(`page error: ${e.message}`))
          // Refused requests are checked where they are made (Chromium logs each non-2xx response).
          page.on("console", (m) => m.type() === "error" && !m.text().startsWith("Failed to load resource") && problems.push(`console: ${m.text()}`))
          return { context, page, problems }
        }),
        ({ context }) => promise(() => context.close())
      )

    it.live(name("views, and the actions through their buttons change the database"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const queue = yield* Queue.Queue
          const admin = yield* Admin
          const { driver } = yield* Database
          const reports: Array<string> = []
          for (let i = 0; i < 3; i++) reports.push(yield* queue.enqueue(Report, { n: i }))
          yield* killJobs(prefix, { id: reports[0] })
          // 55 dead letters of one name: more than a page (50).
          yield* queue.enqueueMany(Bulk, Array.from({ length: 55 }, (_, n) => ({ n })))
          yield* killJobs(prefix, { name: "ui.bulk" })
          const nowUs = yield* nowMicros
          yield* driver.workerRegister("w-ui", nowUs, "host-ui", 4242, ["ui.report"])
          yield* driver.scheduleFire("ui.nightly", nowUs - 60_000_000, nowUs, Effect.void)
          // A job that runs until it is cancelled.
          yield* Worker.make({ handlers: [Job.handler(Slow, () => Effect.never)], concurrency: 1 })
          const slowId = yield* queue.enqueue(Slow, { n: 1 })
          yield* waitUntil(Effect.map(stateOf(prefix, slowId), (s) => s === "running"), 20_000, "the slow job running")

          const base = yield* serve
          const { page, problems } = yield* open({ "x-role": "admin" })

          // Overview: a row per name with its counts; the chart, or "No data." without stats.
          const response = yield* promise(() => page.goto(base))
          assert.strictEqual(response?.status(), 200)
          assert.strictEqual(response?.headers()["x-content-type-options"], "nosniff")
          assert.match(response?.headers()["content-security-policy"] ?? "", /default-src 'self'.*script-src 'self'/)
          const reportRow = page.locator('tr[data-name="ui.report"]')
          yield* promise(() => reportRow.locator('[data-count="pending"]').filter({ hasText: "2" }).waitFor())
          assert.strictEqual(yield* promise(() => reportRow.locator('[data-count="dead"]').textContent()), "1")
          assert.strictEqual(yield* promise(() => page.locator('tr[data-name="ui.bulk"] [data-count="dead"]').textContent()), "55")
          yield* promise(() => page.locator('[data-testid="throughput-chart"] canvas, [data-testid="no-stats"]:text("No data.")').first().waitFor())
          // Live: a job enqueued meanwhile shows in the counts without a reload.
          yield* promise(() => page.evaluate("window.__sameDocument = true"))
          yield* queue.enqueue(Report, { n: 3 })
          yield* promise(() => reportRow.locator('[data-count="pending"]').filter({ hasText: "3" }).waitFor())
          assert.isTrue(yield* promise(() => page.evaluate("window.__sameDocument")))

          // Pause a name, then resume it.
          yield* promise(() => reportRow.locator('button[data-action="pause"]').click())
          yield* promise(() => reportRow.locator(".badge.paused").waitFor())
          assert.deepStrictEqual((yield* admin.paused).map((p) => p.name), ["ui.report"])
          yield* promise(() => reportRow.locator('button[data-action="resume"]').click())
          yield* promise(() => reportRow.locator(".badge.paused").waitFor({ state: "detached" }))
          assert.deepStrictEqual(yield* admin.paused, [])

          // Dead letters: a full page of them (newest first), then those of one name; periodic jobs; workers.
          yield* promise(() => page.locator("nav a", { hasText: "Dead letters" }).click())
          assert.strictEqual(yield* exactly(page.locator('[data-view="dead-letters"] tbody tr'), 50), 50)
          yield* promise(() => page.fill('[data-view="dead-letters"] input[name="name"]', "ui.report"))
          yield* promise(() => page.click('[data-view="dead-letters"] button[type="submit"]'))
          yield* promise(() => page.locator(`[data-view="dead-letters"] tr[data-job="${reports[0]}"]`).waitFor())
          yield* promise(() => page.locator("nav a", { hasText: "Periodic jobs" }).click())
          yield* promise(() => page.locator('[data-view="periodic"] td', { hasText: "ui.nightly" }).waitFor())
          yield* promise(() => page.locator("nav a", { hasText: "Workers" }).click())
          const worker = page.locator('tr[data-worker="w-ui"]')
          yield* promise(() => worker.waitFor())
          assert.include(yield* promise(() => worker.innerText()), "host-ui")

          // Job detail of the dead report: its payload pretty-printed, then Retry.
          yield* promise(() => page.goto(`${base}#/jobs/${reports[0]}`))
          yield* promise(() => page.locator('[data-view="job"] h1', { hasText: "dead" }).waitFor())
          assert.strictEqual(yield* promise(() => page.locator('[data-testid="payload"]').textContent()), "{\n  \"n\": 0\n}")
          yield* promise(() => page.locator('button[data-action="retry"]').click())
          yield* promise(() => page.locator('[role="status"]', { hasText: `Job ${reports[0]} retried` }).waitFor())
          assert.strictEqual(yield* stateOf(prefix, reports[0]), "pending")

          // Cancel the running job from its page.
          yield* promise(() => page.goto(`${base}#/jobs/${slowId}`))
          yield* promise(() => page.locator('[data-view="job"] h1', { hasText: "running" }).waitFor())
          yield* promise(() => page.locator('button[data-action="cancel"]').click())
          yield* promise(() => page.locator('[role="status"]', { hasText: `Job ${slowId} cancelled` }).waitFor())
          assert.strictEqual(yield* stateOf(prefix, slowId), "cancelled")

          // The jobs list, filtered in the form: two keyset pages (50 + 5), then a bulk retry.
          yield* promise(() => page.goto(`${base}#/jobs`))
          yield* promise(() => page.fill('input[name="name"]', "ui.bulk"))
          yield* promise(() => page.selectOption('select[name="state"]', "dead"))
          yield* promise(() => page.click('form.filters button[type="submit"]'))
          const rows = page.locator('[data-view="jobs"] tbody tr')
          const others = rows.filter({ hasNotText: "ui.bulk" })
          assert.strictEqual(yield* exactly(rows, 50, others), 50)
          assert.strictEqual(new URL(page.url()).hash, "#/jobs?name=ui.bulk&state=dead", page.url())
          yield* promise(() => page.click('button[data-page="next"]'))
          assert.strictEqual(yield* exactly(rows, 5, others), 5)
          // The page's cursor is in the address: a reload (or a link) opens the same page.
          const paged = new URL(page.url()).hash
          assert.match(paged, /^#\/jobs\?name=ui\.bulk&state=dead&cursor=\d+$/)
          yield* promise(() => page.reload())
          assert.strictEqual(yield* exactly(rows, 5, others), 5)
          assert.strictEqual(yield* promise(() => page.locator('[data-testid="page"]').textContent()), "a later page")
          assert.strictEqual(new URL(page.url()).hash, paged)
          yield* promise(() => page.click('button[data-action="bulk-retry"]'))
          const question = page.locator('[data-testid="bulk-question"]')
          yield* promise(() => question.waitFor())
          assert.strictEqual(yield* promise(() => question.textContent()), "55 jobs match this filter; those that can be retried (dead or cancelled) will be. Confirm?")
          assert.strictEqual(yield* countOf(prefix, "ui.bulk", "dead"), 55) // counting changes nothing
          yield* promise(() => page.click('[data-testid="bulk"] button[data-action="confirm"]'))
          yield* promise(() => page.locator('[role="status"]', { hasText: "55 of 55 jobs retried" }).waitFor())
          assert.deepStrictEqual([yield* countOf(prefix, "ui.bulk", "dead"), yield* countOf(prefix, "ui.bulk", "pending")], [0, 55])
          // The list follows without a reload: the filter selects no job now.
          yield* promise(() => page.locator('[data-view="jobs"] .empty', { hasText: "No jobs." }).waitFor())

          assert.deepStrictEqual(problems, [])
        })), 60_000)

    it.live(name("read-only shows no action and the API refuses them; denied gets 403 for the page too"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const queue = yield* Queue.Queue
          const id = yield* queue.enqueue(Report, { n: 1 })
          yield* killJobs(prefix, { id })
          const base = yield* serve
          const { page, problems } = yield* open({ "x-role": "viewer" })

          yield* promise(() => page.goto(base))
          yield* promise(() => page.locator('[data-testid="read-only"]').waitFor())
          yield* promise(() => page.locator('tr[data-name="ui.report"]').waitFor())
          for (const view of ["#/", `#/jobs/${id}`, "#/jobs?name=ui.report", "#/dead-letters"]) {
            yield* promise(() => page.goto(base + view))
            yield* promise(() => page.locator(`[data-view] ${view === "#/dead-letters" || view.startsWith("#/jobs?") ? `tr[data-job="${id}"]` : view === "#/" ? "tr[data-name]" : "h1"}`).first().waitFor())
            assert.strictEqual(yield* promise(() => page.locator("button[data-action]").count()), 0, view)
          }
          // The API refuses an action even with the token (a page that would show the buttons anyway).
          const refused = yield* promise(() =>
            page.evaluate(`(async () => {
              const session = await (await fetch("api/session")).json()
              const r = await fetch("api/jobs/${id}/retry", { method: "POST", headers: { [session.csrfHeader]: session.csrfToken } })
              return [session.access, r.status, (await r.json()).reason]
            })()`)
          )
          assert.deepStrictEqual(refused, ["read-only", 403, "read-only"])
          assert.strictEqual(yield* stateOf(prefix, id), "dead")
          assert.deepStrictEqual(problems, [])

          const denied = yield* open({})
          const response = yield* promise(() => denied.page.goto(base))
          assert.strictEqual(response?.status(), 403)
          const redirected = yield* promise(() => denied.page.request.get(base.replace(/\/$/, ""), { maxRedirects: 0 }))
          assert.deepStrictEqual([redirected.status(), redirected.headers()["location"]], [308, "./sqlane/"])
        })))

    it.live(name("the overview's chart and pickup latency from GET api/stats, and No data without it"), () =>
      withQueue(target, () =>
        Effect.gen(function*() {
          const queue = yield* Queue.Queue
          yield* queue.enqueue(Report, { n: 1 })
          const base = yield* serve
          const { page, problems } = yield* open({ "x-role": "admin" })
          // The statistics in the shape GET api/stats answers with (60 zero-filled minutes, oldest first).
          const since = Date.parse("2026-01-01T10:00:00Z")
          const points = Array.from({ length: 60 }, (_, i) => ({
            minute: new Date(since + i * 60_000).toISOString(),
            completed: i % 5,
            failed: i === 30 ? 2 : 0
          }))
          const stats = {
            since: new Date(since).toISOString(),
            names: [{ name: "ui.report", points, pickupMs: { p50: 12, p95: 40, p99: 1500, count: 120 } }]
          }
          yield* promise(() => page.route("**/api/stats", (route) => route.fulfill({ json: stats })))
          const asked = { overview: 0, stats: 0 }
          page.on("request", (request) => {
            const path = new URL(request.url()).pathname
            if (path.endsWith("/api/overview")) asked.overview++
            if (path.endsWith("/api/stats")) asked.stats++
          })
          yield* promise(() => page.goto(base))
          const row = page.locator('tr[data-name="ui.report"]')
          yield* promise(() => row.locator("td", { hasText: "12 ms / 40 ms / 1.5 s" }).waitFor())
          // The counts are read every 2 s, the statistics every 10 s: three reads of one, one of the other.
          yield* waitUntil(Effect.sync(() => asked.overview >= 3), 10_000, "the overview read three times")
          assert.strictEqual(asked.stats, 1)
          yield* promise(() => page.locator('[data-testid="throughput-chart"] canvas').waitFor())
          assert.deepStrictEqual(
            yield* promise(() => page.locator('[data-testid="throughput-chart"] .u-legend .u-label').allTextContents()),
            ["Time", "completed", "failed"]
          )
          assert.strictEqual(yield* promise(() => page.locator('[data-testid="stats-truncated"]').count()), 0)
          // The name the chart shows is in the address: a reload shows it again.
          yield* promise(() => page.selectOption("select", "ui.report"))
          yield* promise(() => page.waitForURL((url) => url.hash === "#/?chart=ui.report"))
          yield* promise(() => page.reload())
          yield* promise(() => page.locator('[data-testid="throughput-chart"] canvas').waitFor())
          assert.strictEqual(yield* promise(() => page.locator("select").inputValue()), "ui.report")
          assert.deepStrictEqual(problems, [])

          // An answer that left out the oldest minutes (too many names) says so under the chart.
          yield* promise(() => page.unroute("**/api/stats"))
          yield* promise(() => page.route("**/api/stats", (route) => route.fulfill({ json: { ...stats, truncated: true } })))
          yield* promise(() => page.reload())
          assert.strictEqual(
            yield* promise(() => page.locator('[data-testid="stats-truncated"]').textContent()),
            "Too many job names: the oldest minutes are left out."
          )

          // A server without the endpoint (404): "No data", and the rest of the overview as before.
          yield* promise(() => page.unroute("**/api/stats"))
          yield* promise(() => page.route("**/api/stats", (route) => route.fulfill({ status: 404, json: { _tag: "RouteNotFound" } })))
          yield* promise(() => page.reload())
          yield* promise(() => page.locator('[data-testid="no-stats"]', { hasText: "No data." }).waitFor())
          yield* promise(() => row.locator("td", { hasText: "no data" }).waitFor())
        })))

    it.live(name("payloads, error messages and job names that look like markup render as inert text"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const queue = yield* Queue.Queue
          const ids: Array<string> = []
          for (const text of [scriptTag, imgTag]) {
            const Evil = Job.make(text, { payload: Schema.Struct({ text: Schema.String }), retry: Job.attempts(1) })
            const id = yield* queue.enqueue(Evil, { text })
            ids.push(id)
            // A handler that fails with that text as its message: the job dead-letters with it.
            yield* Effect.scoped(Effect.gen(function*() {
              yield* Worker.make({ handlers: [Job.handler(Evil, () => Effect.die(new Error(text)))], logs: "quiet" })
              yield* waitUntil(Effect.map(stateOf(prefix, id), (s) => s === "dead"), 20_000, "the job dead")
            }))
          }
          const base = yield* serve
          const { page, problems } = yield* open({ "x-role": "admin" })
          const xss = () => page.evaluate("window.__xss")

          yield* promise(() => page.goto(base))
          for (const text of [scriptTag, imgTag]) {
            yield* promise(() => page.locator("tr[data-name] td a", { hasText: text }).first().waitFor())
          }
          for (const [i, text] of [scriptTag, imgTag].entries()) {
            yield* promise(() => page.goto(`${base}#/jobs/${ids[i]}`))
            yield* promise(() => page.locator('[data-testid="error-message"]').first().waitFor())
            assert.include(yield* promise(() => page.locator('[data-testid="payload"]').textContent()), JSON.stringify(text).slice(1, -1))
            assert.include(yield* promise(() => page.locator('[data-testid="error-message"]').first().textContent()), text)
            assert.strictEqual(yield* promise(() => page.locator("dl.facts dd a").first().textContent()), text)
          }
          yield* promise(() => page.goto(`${base}#/dead-letters`))
          yield* promise(() => page.locator("tr[data-job] td", { hasText: imgTag }).first().waitFor())
          yield* promise(() => page.goto(`${base}#/jobs`))
          yield* promise(() => page.locator("tr[data-job] td", { hasText: scriptTag }).first().waitFor())
          // No element was made from the text: no <img> and no inline <script> in the document.
          assert.deepStrictEqual(
            yield* promise(() => page.evaluate(`[document.querySelectorAll("img").length, [...document.scripts].filter((s) => !s.src).length]`)),
            [0, 0]
          )
          assert.strictEqual(yield* promise(xss), undefined)
          assert.deepStrictEqual(problems, [])
        })))

    it.live(name("a name with a right-to-left override leaves the text after it in order; a long name wraps"), () =>
      withQueue(target, () =>
        Effect.gen(function*() {
          const queue = yield* Queue.Queue
          const { driver } = yield* Database
          const rlo = "\u202Eevil"
          yield* driver.workerRegister("w-bidi", yield* nowMicros, "host-bidi", 4243, [rlo, "ui.after"])
          const long = "n".repeat(200)
          const Long = Job.make(long, { payload: Schema.Struct({ n: Schema.Number }) })
          yield* queue.enqueue(Long, { n: 1 })
          const base = yield* serve
          const { page, problems } = yield* open({ "x-role": "admin" })

          // Workers: the names "‮evil, ui.after" in one cell. Where the override ran on, "ui.after"
          // and the comma would show mirrored (its "r" left of its "u", the comma right of both).
          yield* promise(() => page.goto(`${base}#/workers`))
          const cell = page.locator('tr[data-worker="w-bidi"] [data-testid="job-names"]')
          yield* promise(() => cell.waitFor())
          assert.strictEqual(yield* promise(() => cell.textContent()), `${rlo}, ui.after`)
          const lefts = yield* promise(() =>
            page.evaluate<Array<number>>(`(() => {
              const element = document.querySelector('tr[data-worker="w-bidi"] [data-testid="job-names"]')
              // The left edge on screen of the character at each index of the cell's text.
              const texts = []
              let all = ""
              const walker = document.createTreeWalker(element, NodeFilter.SHOW_TEXT)
              for (let node = walker.nextNode(); node !== null; node = walker.nextNode()) {
                texts.push([node, all.length])
                all += node.textContent
              }
              const leftOf = (index) => {
                const [node, start] = texts.filter(([, start]) => start <= index).at(-1)
                const range = document.createRange()
                range.setStart(node, index - start)
                range.setEnd(node, index - start + 1)
                return range.getBoundingClientRect().left
              }
              const after = all.indexOf("ui.after")
              return [leftOf(all.indexOf(",")), leftOf(after), leftOf(after + "ui.after".length - 1)]
            })()`)
          )
          const [comma, first, last] = lefts
          assert.isTrue(comma < first && first < last, `left edges of ",", "u", "r": ${lefts.join(", ")}`)

          // Jobs: a 200-character name wraps within its cell; the table stays as wide as the page.
          yield* promise(() => page.goto(`${base}#/jobs?name=${long}`))
          const nameCell = page.locator('[data-view="jobs"] tbody tr .name')
          yield* promise(() => nameCell.waitFor())
          const [scrollWidth, clientWidth] = yield* promise(() =>
            page.evaluate<Array<number>>(`(({ scrollWidth, clientWidth }) => [scrollWidth, clientWidth])(document.querySelector('[data-view="jobs"] .scroll'))`)
          )
          assert.isAtMost(scrollWidth, clientWidth)
          assert.isAtMost((yield* promise(() => nameCell.boundingBox()))!.width, 24 * 14) // 24rem
          assert.deepStrictEqual(problems, [])
        })))

    it.live(name("a filter value the API would not take is shown as an error, with no list and no bulk action"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const queue = yield* Queue.Queue
          yield* queue.enqueueMany(Bulk, [{ n: 1 }, { n: 2 }, { n: 3 }])
          yield* killJobs(prefix, { name: "ui.bulk" })
          const base = yield* serve
          const { page, problems } = yield* open({ "x-role": "admin" })
          const problem = page.locator('[data-testid="filter-problem"]')
          const rows = page.locator('[data-view="jobs"] tbody tr')
          const disabled = () => promise(() => page.evaluate<Array<boolean>>(`[...document.querySelectorAll('[data-testid="bulk"] button[data-action^="bulk-"]')].map((b) => b.disabled)`))

          for (const [search, text] of [
            ["name=ui.bulk&state=Dead", "unknown state: Dead"],
            ["name=ui.bulk&createdFrom=yesterday", "created from is not a time: yesterday"],
            ["name=ui.bulk&state=dead&cursor=next", "not a page cursor: next"]
          ]) {
            yield* promise(() => page.goto(`${base}#/jobs?${search}`))
            yield* promise(() => problem.waitFor())
            assert.deepStrictEqual(yield* promise(() => problem.allTextContents()), [text], search)
            assert.deepStrictEqual(yield* disabled(), [true, true, true], search)
            assert.strictEqual(yield* promise(() => rows.count()), 0, search)
          }

          // An id typed in the form that is not one: a short message, not the API's schema.
          yield* promise(() => page.fill('input[name="id"]', "12abc"))
          yield* promise(() => page.click('form.filters button[type="submit"]'))
          yield* promise(() => problem.filter({ hasText: "not a job id: 12abc" }).waitFor())
          assert.deepStrictEqual(yield* disabled(), [true, true, true])
          // An id the API refuses elsewhere (a job's page): the parameter named, in one short line.
          yield* promise(() => page.goto(`${base}#/jobs/12abc`))
          const refused = page.locator('[data-view="job"] [role="alert"]')
          yield* promise(() => refused.waitFor())
          const refusedText = (yield* promise(() => refused.textContent())) ?? ""
          assert.match(refusedText, /^Could not load: the server refused id/)
          assert.notInclude(refusedText, "readonly")
          assert.isAtMost(refusedText.length, 200, refusedText)

          // The same filter with a valid state: listed, and bulk actions offered.
          yield* promise(() => page.goto(`${base}#/jobs?name=ui.bulk&state=dead`))
          assert.strictEqual(yield* exactly(rows, 3), 3)
          assert.deepStrictEqual(yield* disabled(), [false, false, false])
          assert.strictEqual(yield* promise(() => problem.count()), 0)
          assert.strictEqual(yield* countOf(prefix, "ui.bulk", "dead"), 3)
          assert.deepStrictEqual(problems, [])
        })))
  })
}
