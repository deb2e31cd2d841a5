/**
 * Response times of the dashboard's API on a large jobs table. Creates sqlane's tables under a
 * scratch prefix in the `sqlane_bench` database, fills the jobs table by SQL (default 1,000,000
 * jobs: mostly completed, 2% pending, 1% dead, 0.5% cancelled, 0.1% running; ten names plus a rare
 * one; a unique key on every tenth job; created over the last 10 days in id order), gathers the
 * table's statistics (VACUUM ANALYZE / ANALYZE TABLE), serves `Dashboard.httpApp` on an ephemeral
 * port of 127.0.0.1 and times every endpoint and filter over HTTP (`--calls` calls each, after one
 * call not counted). Prints a markdown table, writes the figures as JSON, and drops the tables.
 *
 *   npx tsx bench/dashboard.ts --db postgres-15|mariadb-10.11 [--jobs 1000000] [--calls 5] [--out file.json] [--keep]
 */
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as HttpServer from "@effect/platform/HttpServer"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { execSync } from "node:child_process"
import * as fs from "node:fs"
import { createServer } from "node:http"
import * as os from "node:os"
import { Dashboard } from "../src/dashboard.js"
import { register } from "./lib/cleanup.js"
import { percentile } from "./lib/stats.js"
import { admin, type DbId, open } from "./lib/targets.js"
import { prefix, runtime, sqlane } from "./systems/sqlane.js"

const arg = (name: string, fallback: string) => {
  const i = process.argv.indexOf(`--${name}`)
  return i >= 0 && process.argv[i + 1] !== undefined ? process.argv[i + 1] : fallback
}
const db = arg("db", "postgres-15") as DbId
const total = Number(arg("jobs", "1000000"))
const calls = Number(arg("calls", "5"))
const out = arg("out", "")
/** Keeps the tables (to look at plans), printing their prefix: drop them with `DROP TABLE` afterwards. */
const keep = process.argv.includes("--keep")

const target = await open(db)
const env = { target, ns: `dash_${process.pid}` }
const jobs = `${prefix(env)}jobs`
const a = admin(target)
const drop = async () => {
  await sqlane.drop(env).catch(() => {})
}
if (!keep) register(drop)

const dayUs = 86_400_000_000
const startUs = (Date.now() - 10 * 86_400_000) * 1000
/** Job i (1-based) is created at startUs + i * stepUs: 10 days over the whole table. */
const stepUs = Math.floor((10 * dayUs) / total)

/**
 * Fills the table: job i's state by i mod 1000 (0–19 pending, 20–29 dead, 30–34 cancelled, 35
 * running, the rest completed), its name `dash.n<i mod 10>` but every 9,973rd `dash.rare` (about 100 jobs, of every state), a
 * unique key `key-<i>` on every tenth job (held while pending or running).
 */
const fill = async () => {
  const chunk = 100_000
  for (let from = 1; from <= total; from += chunk) {
    const to = Math.min(total, from + chunk - 1)
    if (target.dialect === "pg") {
      await a.query(
        `INSERT INTO ${jobs} (id, name, state, payload, run_at, created_at, claimed_at, finished_at, attempts,
           worker_id, last_error, unique_key, unique_states)
         SELECT i, CASE WHEN i % 9973 = 0 THEN 'dash.rare' ELSE 'dash.n' || (i % 10) END, s,
           '{"i":' || i || '}', c, c, CASE WHEN s = 'pending' THEN NULL ELSE c END,
           CASE WHEN s IN ('completed', 'dead', 'cancelled') THEN c + interval '1 second' END,
           CASE WHEN s = 'pending' THEN 0 ELSE 1 END, CASE WHEN s = 'running' THEN 'bench-worker' END,
           CASE WHEN s = 'dead' THEN 'boom' END,
           CASE WHEN i % 10 = 3 THEN 'key-' || i END, CASE WHEN i % 10 = 3 THEN 3 END
         FROM (SELECT i, to_timestamp(($1::bigint + i * $2::bigint) / 1e6) AS c,
           CASE WHEN i % 1000 < 20 THEN 'pending' WHEN i % 1000 < 30 THEN 'dead' WHEN i % 1000 < 35 THEN 'cancelled'
             WHEN i % 1000 = 35 THEN 'running' ELSE 'completed' END AS s
           FROM generate_series($3::bigint, $4::bigint) AS i) g`,
        [startUs, stepUs, from, to]
      )
    } else {
      await a.query(
        `INSERT INTO ${jobs} (id, name, state, payload, run_at, created_at, claimed_at, finished_at, attempts,
           worker_id, last_error, unique_key, unique_states)
         WITH RECURSIVE seq (n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM seq WHERE n < 999),
         g AS (SELECT i, DATE_ADD('1970-01-01', INTERVAL (? + i * ?) MICROSECOND) AS c,
           CASE WHEN i % 1000 < 20 THEN 'pending' WHEN i % 1000 < 30 THEN 'dead' WHEN i % 1000 < 35 THEN 'cancelled'
             WHEN i % 1000 = 35 THEN 'running' ELSE 'completed' END AS s
           FROM (SELECT ? + a.n * 1000 + b.n AS i FROM seq a CROSS JOIN seq b) r WHERE i <= ?)
         SELECT i, CASE WHEN i % 9973 = 0 THEN 'dash.rare' ELSE CONCAT('dash.n', i % 10) END, s,
           CONCAT('{"i":', i, '}'), c, c, CASE WHEN s = 'pending' THEN NULL ELSE c END,
           CASE WHEN s IN ('completed', 'dead', 'cancelled') THEN c + INTERVAL 1 SECOND END,
           CASE WHEN s = 'pending' THEN 0 ELSE 1 END, CASE WHEN s = 'running' THEN 'bench-worker' END,
           CASE WHEN s = 'dead' THEN 'boom' END,
           CASE WHEN i % 10 = 3 THEN CONCAT('key-', i) END, CASE WHEN i % 10 = 3 THEN 3 END
         FROM g ORDER BY i`,
        [startUs, stepUs, from, to]
      )
    }
    process.stderr.write(`filled ${to} of ${total}\n`)
  }
  // Job i has id i (as if enqueued one by one); the sequence continues after them.
  if (target.dialect === "pg") await a.query(`SELECT setval(pg_get_serial_sequence('${jobs}', 'id'), ${total})`)
  if (target.dialect === "pg") await a.query(`VACUUM ANALYZE ${jobs}`)
  else await a.query(`ANALYZE TABLE ${jobs}`)
}

const iso = (us: number) => new Date(Math.floor(us / 1000)).toISOString()
/** The created time of job i. */
const createdOf = (i: number) => startUs + i * stepUs

/** What is timed: a label and a request (GET path, or a POST with a body). */
interface Call {
  readonly label: string
  readonly path: string
  readonly body?: unknown
}

const requests: Array<Call> = (() => {
  const mid = Math.floor(total / 2)
  const hour = (i: number) => `createdFrom=${encodeURIComponent(iso(createdOf(i)))}&createdBefore=${encodeURIComponent(iso(createdOf(i) + 3_600_000_000))}`
  const old = Math.floor(total / 10)
  return [
    { label: "overview", path: "/api/overview" },
    { label: "jobs", path: "/api/jobs" },
    { label: "jobs, limit 500", path: "/api/jobs?limit=500" },
    { label: "jobs by id", path: `/api/jobs?id=${mid}` },
    { label: "jobs by name", path: "/api/jobs?name=dash.n3" },
    { label: "jobs by rare name (100 jobs)", path: "/api/jobs?name=dash.rare" },
    { label: "jobs by name, page deep in the table", path: `/api/jobs?name=dash.n3&cursor=${old}` },
    { label: "jobs by state completed", path: "/api/jobs?state=completed" },
    { label: "jobs by state pending", path: "/api/jobs?state=pending" },
    { label: "jobs by state running", path: "/api/jobs?state=running" },
    { label: "jobs by state dead", path: "/api/jobs?state=dead" },
    { label: "jobs by state cancelled", path: "/api/jobs?state=cancelled" },
    { label: "jobs by state dead, page deep in the table", path: `/api/jobs?state=dead&cursor=${old}` },
    { label: "jobs by name and state", path: "/api/jobs?name=dash.n3&state=dead" },
    { label: "jobs by rare name and state", path: "/api/jobs?name=dash.rare&state=dead" },
    { label: "jobs by rare name and state pending", path: "/api/jobs?name=dash.rare&state=pending" },
    { label: "jobs by unique key", path: `/api/jobs?uniqueKey=key-${mid + 3}` },
    { label: "jobs created in an hour", path: `/api/jobs?${hour(mid)}` },
    { label: "jobs created in an hour, 9 days ago", path: `/api/jobs?${hour(old)}` },
    { label: "jobs created since 9 days ago", path: `/api/jobs?createdFrom=${encodeURIComponent(iso(createdOf(old)))}` },
    { label: "jobs created before 9 days ago", path: `/api/jobs?createdBefore=${encodeURIComponent(iso(createdOf(old)))}` },
    { label: "jobs created in an hour, by name", path: `/api/jobs?${hour(old)}&name=dash.n3` },
    { label: "jobs created in an hour, by state dead", path: `/api/jobs?${hour(old)}&state=dead` },
    { label: "jobs created in an hour, by name and state", path: `/api/jobs?${hour(old)}&name=dash.n3&state=dead` },
    { label: "job detail", path: `/api/jobs/${mid}` },
    { label: "dead letters", path: "/api/dead-letters" },
    { label: "dead letters by name", path: "/api/dead-letters?name=dash.n3" },
    { label: "dead letters by rare name", path: "/api/dead-letters?name=dash.rare" },
    { label: "periodic jobs", path: "/api/periodic-jobs" },
    { label: "workers", path: "/api/workers" },
    { label: "bulk count (100 jobs)", path: "/api/bulk/retry", body: { filter: { name: "dash.rare" } } },
    { label: "bulk count (10,000 jobs)", path: "/api/bulk/retry", body: { filter: { state: "dead" } } },
    { label: "bulk count over 10,000 (400)", path: "/api/bulk/retry", body: { filter: { name: "dash.n3" } } }
  ]
})()

const timeAll = async (base: string) => {
  const session = await (await fetch(`${base}/api/session`)).json() as { csrfToken: string }
  const one = async (c: Call) => {
    const t0 = performance.now()
    const response = await fetch(base + c.path, c.body === undefined ? {} : {
      method: "POST",
      headers: { "content-type": "application/json", "x-sqlane-csrf": session.csrfToken },
      body: JSON.stringify(c.body)
    })
    const text = await response.text()
    return { ms: performance.now() - t0, status: response.status, bytes: text.length, text }
  }
  const results = []
  for (const c of requests) {
    const first = await one(c)
    const ms: Array<number> = []
    for (let k = 0; k < calls; k++) ms.push((await one(c)).ms)
    const summary = JSON.parse(first.text)
    const rows = Array.isArray(summary?.jobs) ? summary.jobs.length : Array.isArray(summary?.names) ? summary.names.length : undefined
    results.push({
      label: c.label,
      request: c.body === undefined ? `GET ${c.path}` : `POST ${c.path} ${JSON.stringify(c.body)}`,
      status: first.status,
      rows,
      count: typeof summary?.count === "number" ? summary.count : undefined,
      medianMs: Number(percentile(ms, 50).toFixed(1)),
      maxMs: Number(Math.max(...ms).toFixed(1)),
      ms: ms.map((m) => Number(m.toFixed(1)))
    })
    process.stderr.write(`${c.label}: ${percentile(ms, 50).toFixed(1)} ms\n`)
  }
  return results
}

/** Serves the dashboard on an ephemeral port of 127.0.0.1 and times every call through it. */
const serveAndTime = Effect.gen(function*() {
  const app = yield* Dashboard.httpApp()
  const context = yield* Layer.build(
    Layer.provideMerge(HttpServer.serve(app), NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" }))
  )
  const address = Context.get(context, HttpServer.HttpServer).address
  if (address._tag !== "TcpAddress") return yield* Effect.dieMessage("not a TCP address")
  return yield* Effect.promise(() => timeAll(`http://127.0.0.1:${address.port}`))
}).pipe(Effect.scoped)

const commit = (() => {
  try {
    return execSync("git rev-parse --short HEAD", { encoding: "utf8" }).trim()
  } catch {
    return "unknown"
  }
})()

try {
  await drop()
  await sqlane.prepare(env)
  const t0 = performance.now()
  await fill()
  const fillS = Math.round((performance.now() - t0) / 1000)
  process.stderr.write(`filled in ${fillS} s\n`)
  const rt = runtime(env, { pool: 4 })
  const results = await rt.runPromise(serveAndTime).finally(() => rt.dispose())
  const report = {
    db: target.version,
    jobs: total,
    calls,
    date: new Date().toISOString(),
    commit,
    machine: `${os.cpus().length} cores, ${os.cpus()[0]?.model ?? "unknown"}`,
    fillSeconds: fillS,
    results
  }
  if (out !== "") fs.writeFileSync(out, JSON.stringify(report, null, 2) + "\n")
  console.log(`| call | status | rows | median ms | max ms |\n|---|---|---|---|---|`)
  for (const r of results) {
    console.log(`| ${r.label} | ${r.status} | ${r.rows ?? r.count ?? ""} | ${r.medianMs} | ${r.maxMs} |`)
  }
} finally {
  if (keep) process.stderr.write(`kept the tables ${prefix(env)}*\n`)
  else await drop()
  await a.close()
}
