/**
 * The README's quick start: the README's code is examples/quickstart.ts, word for word, and that
 * program runs as written — on a database of its own, it places an order, its worker sends the
 * email, and Ctrl-C stops it. Then the TestClock test docs/getting-started.md shows.
 */
import { PgClient } from "@effect/sql-pg"
import { assert, it } from "@effect/vitest"
import { Effect, Layer, Redacted, Schema, TestClock } from "effect"
import { spawn } from "node:child_process"
import { readFile } from "node:fs/promises"
import * as path from "node:path"
import { Job, Queue, QueueLive, Worker } from "sqlane"
import { inject } from "vitest"
import { dropTables, waitUntil } from "./support/helpers.js"
import { pgQuery, uniquePrefix } from "./support/targets.js"

const root = path.join(import.meta.dirname, "..")
const example = path.join(root, "examples", "quickstart.ts")
const target = inject("targets").find((t) => t.id === "postgres-15")

it("the README's quick start is examples/quickstart.ts", async () => {
  const readme = await readFile(path.join(root, "README.md"), "utf8")
  const section = readme.slice(readme.indexOf("## Quick start"))
  const code = /```ts\n([\s\S]*?)```/.exec(section)?.[1]
  assert.strictEqual(code, await readFile(example, "utf8"))
})

if (target) {
  it("[postgres-15] the quick start runs as written: the order's email is sent, Ctrl-C stops it", async () => {
    const database = uniquePrefix("quickstart").slice(0, -1)
    const url = new URL(target.url)
    url.pathname = `/${database}`
    await pgQuery(target.url, `CREATE DATABASE ${database}`)
    try {
      const child = spawn(process.execPath, ["--conditions=sqlane-source", "--import", "tsx", example], {
        cwd: root,
        env: { ...process.env, DATABASE_URL: url.href },
        stdio: ["ignore", "pipe", "pipe"]
      })
      let output = ""
      child.stdout.on("data", (chunk) => (output += chunk))
      child.stderr.on("data", (chunk) => (output += chunk))
      const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)))
      const sent = await Promise.race([
        new Promise<boolean>((resolve) => {
          const check = () => output.includes("emailing ada@example.com about order 1") && resolve(true)
          child.stdout.on("data", check)
          check()
        }),
        exited.then(() => false),
        new Promise<boolean>((resolve) => setTimeout(() => resolve(false), 60_000))
      ])
      if (!sent) child.kill("SIGKILL")
      assert.isTrue(sent, output)
      child.kill("SIGINT")
      assert.strictEqual(await exited, 0, output)
      const jobs = await pgQuery(url.href, "SELECT name, state FROM sqlane_jobs")
      assert.deepStrictEqual(jobs, [{ name: "send-email", state: "completed" }])
    } finally {
      await pgQuery(target.url, `DROP DATABASE IF EXISTS ${database} WITH (FORCE)`)
    }
  }, 90_000)

  const SendEmail = Job.make("send-email", {
    payload: Schema.Struct({ orderId: Schema.Number, to: Schema.String, placedAt: Schema.Date })
  })
  const WorkerLive = Worker.layer({ handlers: [Job.handler(SendEmail, ({ to }) => Effect.log(`emailing ${to}`))] })

  it.effect("[postgres-15] a delayed job runs when TestClock reaches it", () => {
    const prefix = uniquePrefix("qs")
    // Long poll and rescue intervals: TestClock.adjust replays every timer it passes.
    const QueueTest = QueueLive({ prefix, pollInterval: "1 hour", rescueInterval: "1 hour" }).pipe(
      Layer.provideMerge(PgClient.layer({ url: Redacted.make(target.url) }))
    )
    return Effect.gen(function*() {
      const queue = yield* Queue.Queue
      const id = yield* queue.enqueue(SendEmail, { orderId: 1, to: "bob@example.com", placedAt: new Date(0) }, {
        delay: "1 hour"
      })
      yield* TestClock.adjust("59 minutes")
      assert.strictEqual((yield* queue.get(id)).state, "pending")
      yield* TestClock.adjust("1 minute")
      yield* waitUntil(Effect.map(queue.get(id), (job) => job.state === "completed"))
      yield* dropTables(prefix)
    }).pipe(Effect.provide(WorkerLive.pipe(Layer.provideMerge(QueueTest))))
  })
}
