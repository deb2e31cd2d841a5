/**
 * examples/telemetry.ts, run as a child process: the spans and metrics it prints (what its
 * in-memory OpenTelemetry exporters received) are the ones docs/observability.md describes.
 */
import { SqlClient } from "@effect/sql"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as path from "node:path"
import { inject } from "vitest"
import { runScript } from "./support/processes.js"
import { clientLayer, type Target } from "./support/targets.js"

const example = path.join(import.meta.dirname, "..", "examples", "telemetry.ts")

interface PrintedSpan {
  readonly name: string
  readonly traceId: string
  readonly spanId: string
  readonly depth: number
  readonly parent: PrintedSpan | undefined
  readonly attributes: Record<string, string>
  readonly status: string
  readonly links: Array<{ traceId: string; spanId: string; attributes: Record<string, string> }>
}

const attributesOf = (text: string) =>
  Object.fromEntries(text.split(" ").filter((kv) => kv.includes("=")).map((kv) => kv.split("=") as [string, string]))

/** Parses the example's "Spans:" section: `trace=…` headers, indented span lines and their links. */
const parseSpans = (stdout: string) => {
  const section = stdout.slice(stdout.indexOf("\nSpans:\n"), stdout.indexOf("\nMetrics:\n"))
  const spans: Array<PrintedSpan> = []
  let traceId = ""
  let stack: Array<PrintedSpan> = []
  for (const line of section.split("\n")) {
    const trace = /^trace=([0-9a-f]{32})$/.exec(line)
    const span = /^( +)(.+?)  span=([0-9a-f]{16})  (.*?)  (OK|ERROR.*)$/.exec(line)
    const link = /^ +link → trace=([0-9a-f]{32}) span=([0-9a-f]{16}) ?(.*)$/.exec(line)
    if (trace) {
      traceId = trace[1]
      stack = []
    } else if (link) {
      stack.at(-1)!.links.push({ traceId: link[1], spanId: link[2], attributes: attributesOf(link[3]) })
    } else if (span) {
      const depth = span[1].length / 2 - 1
      stack = stack.slice(0, depth)
      const parsed: PrintedSpan = {
        name: span[2],
        traceId,
        spanId: span[3],
        depth,
        parent: stack.at(-1),
        attributes: attributesOf(span[4]),
        status: span[5],
        links: []
      }
      spans.push(parsed)
      stack.push(parsed)
    }
  }
  return spans
}

/** Parses the "Metrics:" section: `name{job_name="…"} kind value` lines. */
const parseMetrics = (stdout: string) =>
  new Map(
    stdout.slice(stdout.indexOf("\nMetrics:\n")).split("\n").flatMap((line) => {
      const m = /^(sqlane_\w+)\{([^}]*)\} (\w+) (.+)$/.exec(line)
      if (m === null || !m[2].split(",").includes(`job_name="send-receipt"`)) return []
      return [[m[1], { kind: m[3], value: m[4], tags: m[2] }] as const]
    })
  )

const checkOutput = (stdout: string) => {
  const spans = parseSpans(stdout)
  const named = (name: string) => spans.filter((s) => s.name === name)

  // The app's trace: checkout → three sqlane.enqueue spans, each with its INSERT.
  const [checkout] = named("checkout")
  assert.isDefined(checkout)
  assert.isUndefined(checkout.parent)
  const enqueues = named("sqlane.enqueue")
  assert.strictEqual(enqueues.length, 3)
  for (const e of enqueues) {
    assert.strictEqual(e.parent, checkout)
    assert.strictEqual(e.traceId, checkout.traceId)
    assert.strictEqual(e.attributes["sqlane.job.name"], "send-receipt")
    assert.isTrue(spans.some((s) => s.parent === e && s.name === "sql.execute"))
  }

  // Four attempts, each the root of a trace of its own, linked to the enqueue span of its job.
  const attempts = named("sqlane.job send-receipt")
  assert.strictEqual(attempts.length, 4)
  const linkedBy = new Map<string, string>() // job id → enqueue span id
  for (const a of attempts) {
    assert.isUndefined(a.parent)
    assert.notStrictEqual(a.traceId, checkout.traceId)
    assert.strictEqual(a.links.length, 1)
    const [link] = a.links
    assert.strictEqual(link.traceId, checkout.traceId)
    assert.include(enqueues.map((e) => e.spanId), link.spanId)
    assert.strictEqual(link.attributes["sqlane.link"], "enqueued_by")
    const jobId = a.attributes["sqlane.job.id"]
    if (linkedBy.has(jobId)) assert.strictEqual(linkedBy.get(jobId), link.spanId) // a retry: the same link
    linkedBy.set(jobId, link.spanId)
    // the handler's span is the attempt's child
    const [smtp] = spans.filter((s) => s.parent === a)
    assert.strictEqual(smtp?.name, "smtp.send")
  }
  assert.strictEqual(new Set(linkedBy.values()).size, 3) // one enqueue span per job
  assert.strictEqual(new Set(attempts.map((a) => a.traceId)).size, 4)
  const failed = attempts.filter((a) => a.status.startsWith("ERROR"))
  assert.strictEqual(failed.length, 1)
  assert.strictEqual(failed[0].attributes["sqlane.job.attempt"], "1")
  assert.include(failed[0].status, "421 try again later")
  const retry = attempts.find((a) => a.attributes["sqlane.job.attempt"] === "2")
  assert.strictEqual(retry?.attributes["sqlane.job.id"], failed[0].attributes["sqlane.job.id"])
  assert.strictEqual(retry?.status, "OK")

  // The metrics, as the metric exporter received them.
  const metrics = parseMetrics(stdout)
  const sum = (name: string) => {
    const m = metrics.get(name)
    assert.strictEqual(m?.kind, "sum", name)
    return Number(m!.value)
  }
  assert.strictEqual(sum("sqlane_jobs_enqueued"), 3)
  assert.strictEqual(sum("sqlane_jobs_claimed"), 4)
  assert.strictEqual(sum("sqlane_jobs_completed"), 3)
  assert.strictEqual(sum("sqlane_jobs_failed"), 1)
  assert.strictEqual(sum("sqlane_jobs_retried"), 1)
  assert.isFalse(metrics.has("sqlane_jobs_dead")) // never updated, so never exported
  for (const name of ["sqlane_job_pickup_latency_ms", "sqlane_job_run_duration_ms"]) {
    assert.strictEqual(metrics.get(name)?.kind, "histogram", name)
    assert.match(metrics.get(name)!.value, /^count=4 sum=\d+(\.\d)?$/)
    assert.include(metrics.get(name)!.tags, `unit="ms"`)
  }
}

/** The example's tables left in a database (it drops them at the end). */
const leftTables = (target: Target) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    return yield* sql<{ name: string }>`SELECT table_name AS name FROM information_schema.tables
      WHERE table_schema = ${sql.onDialectOrElse({ pg: () => sql`current_schema()`, orElse: () => sql`DATABASE()` })}
      AND table_name LIKE ${"telemetry\\_%"}`
  }).pipe(Effect.provide(clientLayer(target, { maxConnections: 1 })))

/** Creates (or drops) a table `telemetry_app_data`, standing for an app's own table. */
const appTable = (target: Target, action: "create" | "drop") =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`DROP TABLE IF EXISTS telemetry_app_data`
    if (action === "create") yield* sql`CREATE TABLE telemetry_app_data (id INT)`
  }).pipe(Effect.provide(clientLayer(target, { maxConnections: 1 })))

describe.concurrent("examples/telemetry.ts", () => {
  // PostgreSQL 18 is the embedded run's below.
  for (const target of inject("targets").filter((t) => t.id !== "postgres-18")) {
    it.live(`[${target.id}] prints linked spans and the exported metrics; drops its tables, and only its own`, () =>
      Effect.gen(function*() {
        // A table of "the app" whose name starts like the example's: the example leaves it alone.
        yield* appTable(target, "create")
        const result = yield* runScript(example, { DATABASE_URL: target.url })
        assert.strictEqual(result.exit, 0, result.stderr)
        checkOutput(result.stdout)
        assert.deepStrictEqual((yield* leftTables(target)).map((t) => t.name), ["telemetry_app_data"])
        yield* appTable(target, "drop")
      }))
  }

  it.live("without DATABASE_URL: on an embedded PostgreSQL 18", () =>
    Effect.gen(function*() {
      const result = yield* runScript(example, { DATABASE_URL: undefined })
      assert.strictEqual(result.exit, 0, result.stderr)
      assert.include(result.stdout, "Started an embedded PostgreSQL")
      checkOutput(result.stdout)
    }))
})
