/**
 * Screenshots of the dashboard's views for docs/dashboard.md (docs/images/dashboard-*.png): seeds a
 * queue on its own table prefix (a shop's jobs: emails completed and retried, a card charge
 * dead-lettered, an image resize running with progress, a paused name, a periodic job's tick, a
 * worker), serves the dashboard at /sqlane/, and photographs each view in headless Chromium.
 *
 *   npm run dashboard:screenshots       (DATABASE_URL: postgres://… or mysql://…; default the local PostgreSQL)
 *
 * Not part of `npm test`. Builds the UI first (scripts/build-ui.mjs).
 */
import * as HttpLayerRouter from "@effect/platform/HttpLayerRouter"
import * as HttpServer from "@effect/platform/HttpServer"
import { NodeHttpServer } from "@effect/platform-node"
import { SqlClient } from "@effect/sql"
import { MysqlClient } from "@effect/sql-mysql2"
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Redacted, Schedule, Schema } from "effect"
import { execFileSync } from "node:child_process"
import { createServer } from "node:http"
import * as path from "node:path"
import { Dashboard } from "../src/dashboard.js"
import { Admin, Job, Queue, QueueLive, Worker } from "../src/index.js"
import { Database } from "../src/internal/Database.js"
import { nowMicros } from "../src/internal/time.js"
import { launchChromium } from "../test/support/browser.js"

const repo = path.join(import.meta.dirname, "..")
const prefix = "screens_"
const url = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres"
const Client = /^mysql:/.test(url) ? MysqlClient.layer({ url: Redacted.make(url) }) : PgClient.layer({ url: Redacted.make(url) })

class SmtpUnavailable extends Schema.TaggedError<SmtpUnavailable>()("SmtpUnavailable", { host: Schema.String }) {}
class CardRejected extends Schema.TaggedError<CardRejected>()("CardRejected", { reason: Schema.String }) {}

const SendEmail = Job.make("send-confirmation-email", {
  payload: Schema.Struct({ orderId: Schema.Number, email: Schema.String }),
  success: Schema.Struct({ messageId: Schema.String }),
  failure: SmtpUnavailable,
  retry: Job.attempts(3, Schedule.spaced("200 millis"))
})
const ChargeCard = Job.make("charge-card", {
  payload: Schema.Struct({ orderId: Schema.Number, card: Schema.String, amountCents: Schema.Number }),
  failure: CardRejected,
  isPermanent: () => true
})
const ResizeImage = Job.make("resize-image", { payload: Schema.Struct({ image: Schema.String, sizes: Schema.Array(Schema.Number) }) })
const NightlyReport = Job.make("nightly-report", { payload: Schema.Struct({ day: Schema.String }) })

const dropTables = Effect.gen(function*() {
  const sql = (yield* SqlClient.SqlClient).withoutTransforms()
  for (const t of ["jobs", "workers", "migrations", "ledger", "schedules", "paused", "limits", "rates", "stats"]) {
    yield* Effect.ignore(sql`DROP TABLE IF EXISTS ${sql(prefix + t)}`)
  }
})

const views = [
  { file: "overview", hash: "#/", ready: "tr[data-name]" },
  { file: "jobs", hash: "#/jobs", ready: "tr[data-job]" },
  { file: "job-detail", hash: "#/jobs/{dead}", ready: '[data-testid="error-message"]' },
  { file: "dead-letters", hash: "#/dead-letters", ready: "tr[data-job]" },
  { file: "periodic-jobs", hash: "#/periodic", ready: "td" },
  { file: "workers", hash: "#/workers", ready: "tr[data-worker]" }
] as const

const seedAndShoot = Effect.gen(function*() {
  const queue = yield* Queue.Queue
  const admin = yield* Admin.Admin
  const { driver } = yield* Database
  let emails = 0
  const handlers = [
    Job.handler(SendEmail, (email, ctx) =>
      Effect.gen(function*() {
        yield* Effect.sleep("20 millis")
        if (ctx.attempt === 1 && ++emails % 7 === 0) return yield* new SmtpUnavailable({ host: "smtp.example.com" })
        return { messageId: `<order-${email.orderId}@shop.example>` }
      })),
    Job.handler(ChargeCard, (charge) => new CardRejected({ reason: `card ending ${charge.card.slice(-4)} expired` })),
    Job.handler(ResizeImage, (_, ctx) => Effect.zipRight(queue.progress(ctx, 40, "resized 2 of 5 sizes"), Effect.never))
  ]
  yield* Worker.make({ handlers, concurrency: 8, logs: "quiet" })
  yield* queue.enqueueMany(SendEmail, Array.from({ length: 60 }, (_, i) => ({ orderId: 10_000 + i, email: `customer${i}@example.com` })))
  const dead = yield* queue.enqueue(ChargeCard, { orderId: 10_007, card: "4000000000000069", amountCents: 4_250 })
  yield* queue.enqueue(ResizeImage, { image: "products/7781.jpg", sizes: [64, 128, 256, 512, 1024] })
  yield* admin.pause("nightly-report")
  for (const day of ["2026-12-03", "2026-12-04", "2026-12-05"]) yield* queue.enqueue(NightlyReport, { day })
  const nowUs = yield* nowMicros
  yield* driver.scheduleFire("nightly-report", nowUs - 3_600_000_000, nowUs, Effect.void)
  yield* driver.scheduleDescribe(
    "nightly-report",
    { jobName: "nightly-report", expression: "0 3 * * *", timeZone: "Europe/Berlin", nextTickUs: nowUs + 20 * 3_600_000_000 }
  )
  // Later emails, due in a minute: pending in the overview.
  yield* queue.enqueueMany(SendEmail, Array.from({ length: 12 }, (_, i) => ({ orderId: 20_000 + i, email: `later${i}@example.com` })), {
    runAt: new Date(Date.now() + 60_000)
  })
  yield* Effect.sleep("4 seconds")

  const context = yield* Layer.build(
    HttpLayerRouter.serve(Dashboard.layer({ basePath: "/sqlane" }), { disableLogger: true, disableListenLog: true })
      .pipe(Layer.provideMerge(NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" })))
  )
  const address = Context.get(context, HttpServer.HttpServer).address
  if (address._tag !== "TcpAddress") return yield* Effect.die("not a TCP address")
  const base = `http://127.0.0.1:${address.port}/sqlane/`
  const { browser, close } = yield* Effect.acquireRelease(Effect.promise(launchChromium), (l) => Effect.promise(l.close))
  const page = yield* Effect.promise(() => browser.newPage({ viewport: { width: 1280, height: 820 }, deviceScaleFactor: 1 }))
  for (const view of views) {
    yield* Effect.promise(async () => {
      await page.goto(base + view.hash.replace("{dead}", dead))
      await page.locator(view.ready).first().waitFor()
      await page.waitForTimeout(500) // the chart's and tables' last paint
      const file = path.join(repo, "docs", "images", `dashboard-${view.file}.png`)
      await page.screenshot({ path: file, fullPage: false })
      console.log(`wrote ${path.relative(repo, file)}`)
    })
  }
  yield* Effect.promise(close)
})

execFileSync(process.execPath, [path.join(repo, "scripts", "build-ui.mjs")], { stdio: "inherit" })
const program = Effect.gen(function*() {
  yield* dropTables
  yield* seedAndShoot.pipe(Effect.scoped, Effect.provide(QueueLive({ prefix })), Effect.ensuring(dropTables))
})
Effect.runPromise(program.pipe(Effect.provide(Client))).then(
  () => process.exit(0),
  (e) => (console.error(e), process.exit(1))
)
