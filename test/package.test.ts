/**
 * The package as an app gets it: built (`npm run build`), packed, and installed with npm into a new
 * app outside this repository, beside the peer dependencies docs/install.md names for PostgreSQL; the app is
 * type-checked (with the README's quick start, examples/quickstart.ts) with the strictest compiler
 * options against sqlane's .d.ts files only and run with
 * plain `node` (no tsx): a job enqueued and completed on PostgreSQL 15 (waited for with
 * `sqlane/testing`'s `waitFor`: the subpath exports resolve), the same through `sqlane/promise`,
 * and the `sqlane` command from node_modules/.bin. An import of a package that is not a dependency or peer dependency (a
 * devDependency such as tsx) fails here.
 *
 * The app installs PostgreSQL's packages only: npm installs neither `mysql2` nor
 * `@effect/sql-mysql2` (optional peer dependencies), warns about no engine, and the app runs without
 * them. `import "sqlane"` loads no database package and none of the CLI's (each module it resolves
 * is recorded by a module hook); the CLI given a MySQL URL names the packages to install.
 *
 * npm installs from its cache when it can (`--prefer-offline`): `npm ci` of this repository has
 * put every package there.
 */
import { assert, it } from "@effect/vitest"
import { Effect } from "effect"
import { execFile, spawn } from "node:child_process"
import { access, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises"
import * as os from "node:os"
import * as path from "node:path"
import { inject } from "vitest"
import { dropTables } from "./support/helpers.js"
import { clientLayer, pgQuery, uniquePrefix } from "./support/targets.js"

const root = path.join(import.meta.dirname, "..")
const pg = inject("targets").find((t) => t.id === "postgres-15")

/** Runs a command; its output, and its exit code (1 when it could not start or timed out). */
const exec = (file: string, args: ReadonlyArray<string>, options: { cwd: string; env?: NodeJS.ProcessEnv }) =>
  new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    execFile(file, args, { ...options, timeout: 90_000, killSignal: "SIGKILL", maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) =>
      resolve({ code: error ? Number((error as { code?: unknown }).code ?? 1) || 1 : 0, stdout, stderr }))
  })

const app = `import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Redacted, Schema } from "effect"
import { Admin, Job, Queue, QueueLive, Worker } from "sqlane"
import { JobNotFound } from "sqlane/schema/Errors"
import { waitFor } from "sqlane/testing"

const Greet = Job.make("greet", { payload: Schema.Struct({ to: Schema.String }) })

const program = Effect.gen(function*() {
  const queue = yield* Queue.Queue
  const greeted = yield* Effect.makeLatch(false)
  yield* Worker.make({ handlers: [Job.handler(Greet, ({ to }) => Effect.zipRight(Effect.log(to), greeted.open))] })
  const id = yield* queue.enqueue(Greet, { to: "ada" })
  yield* greeted.await
  const { state } = yield* waitFor(id, "completed")
  const status = yield* (yield* Admin.Admin).status
  const missing = yield* Effect.flip(queue.get("999999999"))
  console.log(JSON.stringify({ state, names: status.names.map((n) => n.name), notFound: missing instanceof JobNotFound }))
}).pipe(Effect.scoped)

const url = process.env["DATABASE_URL"] ?? ""
const prefix = process.env["SQLANE_PREFIX"] ?? ""
const Live = QueueLive({ prefix }).pipe(Layer.provideMerge(PgClient.layer({ url: Redacted.make(url) })))
Effect.runPromise(program.pipe(Effect.provide(Live))).then(
  () => process.exit(0),
  (error) => {
    console.error(error)
    process.exit(1)
  }
)
`

/** The same on sqlane/promise: no Effect code of its own, and no process.exit (it ends by itself after close). */
const promiseApp = `import { Schema } from "effect"
import { createQueue, Job, JobNotFound } from "sqlane/promise"

const Greet = Job.make("greet-promise", { payload: Schema.Struct({ to: Schema.String }), success: Schema.String })

const queue = await createQueue({ url: process.env["DATABASE_URL"] ?? "", prefix: process.env["SQLANE_PREFIX"] ?? "" })
const worker = await queue.work(Greet, async ({ to }) => \`hello \${to}\`)
const id = await queue.enqueue(Greet, { to: "ada" })
await worker.drain()
const job = await queue.get(id)
const missing = await queue.get("999999999").then(() => undefined, (e: unknown) => e)
await queue.close()
console.log(JSON.stringify({ state: job.state, result: job.result, notFound: missing instanceof JobNotFound }))
`

/**
 * Imports "sqlane" under a module hook that records every module it resolves, and prints those
 * under node_modules as JSON. After "sqlane", the hook resolves `node:os`: once that arrives, every
 * module of "sqlane" has (messages on one port keep their order).
 */
const loadedScript = `import { register } from "node:module"
import { MessageChannel } from "node:worker_threads"
const { port1, port2 } = new MessageChannel()
const urls = []
const done = new Promise((resolve) => port1.on("message", (url) => url === "node:os" ? resolve() : urls.push(url)))
register("./hooks.mjs", import.meta.url, { data: { port: port2 }, transferList: [port2] })
await import("sqlane")
await import("node:os")
await done
port1.close()
console.log(JSON.stringify(urls.filter((u) => u.includes("/node_modules/"))))
`
const hooksScript = `let port
export const initialize = (data) => { port = data.port }
export const resolve = async (specifier, context, next) => {
  const result = await next(specifier, context)
  port.postMessage(result.url)
  return result
}
`

/** The package a node_modules URL is in, e.g. `@effect/sql` or `pg`. */
const packageOf = (url: string) => {
  const [first, second] = url.slice(url.lastIndexOf("/node_modules/") + "/node_modules/".length).split("/")
  return first.startsWith("@") ? `${first}/${second}` : first
}

const exists = (file: string) => access(file).then(() => true, () => false)

const tsconfig = {
  compilerOptions: {
    target: "ES2022",
    module: "NodeNext",
    moduleResolution: "NodeNext",
    strict: true,
    exactOptionalPropertyTypes: true,
    noUncheckedIndexedAccess: true,
    noPropertyAccessFromIndexSignature: true,
    skipLibCheck: true,
    outDir: "out",
    types: ["node"]
  },
  include: ["app.ts", "quickstart.ts", "promise-app.ts"]
}

/** Builds the package (`npm run build`) and packs it into `dir`; the tarball's path. */
const pack = async (dir: string) => {
  const built = await exec("npm", ["run", "build", "--silent"], { cwd: root })
  assert.strictEqual(built.code, 0, built.stdout + built.stderr)
  const packed = await exec("npm", ["pack", "--ignore-scripts", "--silent", "--pack-destination", dir], { cwd: root })
  assert.strictEqual(packed.code, 0, packed.stderr)
  return path.join(dir, (await readdir(dir)).find((f) => f.endsWith(".tgz"))!)
}

/** The fenced code block of `markdown` that follows `after` (a heading, or the block's first line). */
const codeBlock = (markdown: string, after: string) => {
  const at = markdown.indexOf(after)
  assert.isAtLeast(at, 0, `no ${after}`)
  const match = /```(?:ts|sh)\n([\s\S]*?)```/.exec(markdown.slice(at))
  assert.isNotNull(match, `no code block after ${after}`)
  return match![1]!
}

/** Runs `args` with node in `cwd` until `ready` is printed, then Ctrl-C (SIGINT); its output and exit code. */
const runUntil = (args: ReadonlyArray<string>, cwd: string, env: NodeJS.ProcessEnv, ready: string) =>
  new Promise<{ code: number | null; output: string }>((resolve) => {
    const child = spawn(process.execPath, args, { cwd, env, stdio: ["ignore", "pipe", "pipe"] })
    let output = ""
    const timer = setTimeout(() => child.kill("SIGKILL"), 60_000)
    const onData = (chunk: Buffer) => {
      output += chunk
      if (output.includes(ready)) child.kill("SIGINT")
    }
    child.stdout.on("data", onData)
    child.stderr.on("data", onData)
    child.on("exit", (code) => (clearTimeout(timer), resolve({ code, output })))
  })

if (pg) {
  it("the packed package: installed by npm, typed by its .d.ts under the strictest options, runs on plain node, its CLI too", async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), "sqlane-package-"))
    const prefix = uniquePrefix("pkg")
    try {
      const tarball = await pack(dir)

      const appDir = path.join(dir, "app")
      await mkdir(appDir)
      await writeFile(path.join(appDir, "package.json"), JSON.stringify({ name: "app", private: true, type: "module" }))
      const installed = await exec("npm", [
        "install",
        "--prefer-offline",
        "--no-audit",
        "--no-fund",
        "--loglevel=warn",
        tarball,
        "effect@^3.22",
        "@effect/sql@^0.52",
        "@effect/sql-pg@^0.53",
        "@effect/platform-node@^0.108",
        "pg",
        "@types/node@^20"
      ], { cwd: appDir })
      assert.strictEqual(installed.code, 0, installed.stdout + installed.stderr)
      assert.notInclude(installed.stdout + installed.stderr, "EBADENGINE")
      // PostgreSQL's packages only: MySQL's are optional peer dependencies nobody asked for.
      const modules = path.join(appDir, "node_modules")
      assert.isTrue(await exists(path.join(modules, "pg", "package.json")), "pg installed")
      assert.isFalse(await exists(path.join(modules, "mysql2")), "mysql2 not installed")
      assert.isFalse(await exists(path.join(modules, "@effect", "sql-mysql2")), "@effect/sql-mysql2 not installed")
      // What the package holds: the build, its bin, docs and license; no TypeScript sources.
      const files = await readdir(path.join(appDir, "node_modules", "sqlane"))
      assert.deepStrictEqual(files.sort(), ["LICENSE", "README.md", "bin", "dist", "docs", "package.json"])
      // The dashboard's browser UI, built: its page and assets beside the compiled modules.
      const ui = path.join(appDir, "node_modules", "sqlane", "dist", "dashboard-ui")
      assert.isTrue(await exists(path.join(ui, "index.html")), "dist/dashboard-ui/index.html packed")
      const uiAssets = await readdir(path.join(ui, "assets"))
      assert.isTrue(uiAssets.some((f) => f.endsWith(".js")) && uiAssets.some((f) => f.endsWith(".css")), uiAssets.join(", "))

      await writeFile(path.join(appDir, "tsconfig.json"), JSON.stringify(tsconfig))
      await writeFile(path.join(appDir, "app.ts"), app)
      await writeFile(path.join(appDir, "promise-app.ts"), promiseApp)
      // The README's quick start, as an app's own code: it type-checks under these options too.
      await writeFile(path.join(appDir, "quickstart.ts"), await readFile(path.join(root, "examples", "quickstart.ts"), "utf8"))
      const tsc = await exec(process.execPath, [path.join(root, "node_modules", "typescript", "bin", "tsc"), "-p", "."], {
        cwd: appDir
      })
      assert.strictEqual(tsc.code, 0, tsc.stdout + tsc.stderr)

      const env = { ...process.env, DATABASE_URL: pg.url, SQLANE_PREFIX: prefix }
      const run = await exec(process.execPath, [path.join("out", "app.js")], { cwd: appDir, env })
      assert.strictEqual(run.code, 0, run.stderr)
      assert.deepStrictEqual(JSON.parse(run.stdout.trim().split("\n").at(-1)!), {
        state: "completed",
        names: ["greet"],
        notFound: true
      })

      const promiseRun = await exec(process.execPath, [path.join("out", "promise-app.js")], {
        cwd: appDir,
        env: { ...env, SQLANE_PREFIX: `${prefix}p_` }
      })
      assert.strictEqual(promiseRun.code, 0, promiseRun.stderr)
      assert.deepStrictEqual(JSON.parse(promiseRun.stdout.trim().split("\n").at(-1)!), {
        state: "completed",
        result: "hello ada",
        notFound: true
      })

      const cli = await exec(path.join(appDir, "node_modules", ".bin", "sqlane"), ["status", "--json"], { cwd: appDir, env })
      assert.strictEqual(cli.code, 0, cli.stderr)
      assert.strictEqual(JSON.parse(cli.stdout).names[0].completed, 1)

      // `import "sqlane"` loads @effect/sql and effect, and no database or CLI package.
      await writeFile(path.join(appDir, "loaded.mjs"), loadedScript)
      await writeFile(path.join(appDir, "hooks.mjs"), hooksScript)
      const loaded = await exec(process.execPath, ["loaded.mjs"], { cwd: appDir })
      assert.strictEqual(loaded.code, 0, loaded.stderr)
      const packages = new Set((JSON.parse(loaded.stdout.trim()) as Array<string>).map(packageOf))
      assert.isTrue(packages.has("sqlane") && packages.has("effect") && packages.has("@effect/sql"), [...packages].join(", "))
      for (const name of ["pg", "@effect/sql-pg", "mysql2", "@effect/sql-mysql2", "@effect/cli", "@effect/platform-node"]) {
        assert.isFalse(packages.has(name), `${name} loaded by import "sqlane"`)
      }

      // MySQL without its packages: the CLI names them, and the command that installs them.
      const mysql = await exec(path.join(appDir, "node_modules", ".bin", "sqlane"), ["status"], {
        cwd: appDir,
        env: { ...env, DATABASE_URL: "mysql://root@127.0.0.1:3306/sqlane" }
      })
      assert.strictEqual(mysql.code, 1, mysql.stdout + mysql.stderr)
      assert.strictEqual(
        mysql.stderr.trim(),
        "sqlane: MySQL/MariaDB needs @effect/sql-mysql2 and mysql2: npm install @effect/sql-mysql2@^0.53 mysql2"
      )
    } finally {
      for (const p of [prefix, `${prefix}p_`]) {
        await Effect.runPromise(dropTables(p).pipe(Effect.provide(clientLayer(pg)), Effect.ignore))
      }
      await rm(dir, { recursive: true, force: true })
    }
  }, 420_000)

  it("a new app, following the docs only: the README's install lines, its quick start, docs/testing.md's test file under vitest, docs/promise.md's script", async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), "sqlane-docs-app-"))
    const database = uniquePrefix("docsapp").slice(0, -1)
    const url = new URL(pg.url)
    url.pathname = `/${database}`
    await pgQuery(pg.url, `CREATE DATABASE ${database}`)
    try {
      const tarball = await pack(dir)
      const appDir = path.join(dir, "my-app")
      await mkdir(appDir)
      await writeFile(path.join(appDir, "package.json"), JSON.stringify({ name: "my-app", private: true, type: "module" }))
      const readme = await readFile(path.join(root, "README.md"), "utf8")

      // The README's install lines for PostgreSQL and for tests, as a user pastes them.
      const install = codeBlock(readme, "## Install").split("\n").filter((line) => line.startsWith("npm install"))
      assert.lengthOf(install, 3, "PostgreSQL, MySQL/MariaDB and the test stack")
      for (const line of [install[0]!, install[2]!]) {
        const args = line.split(" ").slice(1).map((a) => a.replace(/^"|"$/g, "").replace("./sqlane-0.1.0.tgz", tarball))
        const installed = await exec("npm", [...args, "--prefer-offline", "--no-audit", "--no-fund", "--loglevel=warn"], {
          cwd: appDir
        })
        assert.strictEqual(installed.code, 0, `${line}\n${installed.stdout}${installed.stderr}`)
        assert.notInclude(installed.stdout + installed.stderr, "EBADENGINE", line)
      }
      // The app's own environment: none of this test run's (vitest's workers, a NODE_OPTIONS).
      const env: NodeJS.ProcessEnv = { PATH: process.env["PATH"], HOME: process.env["HOME"], DATABASE_URL: url.href }

      // The quick start as pasted, run as the README says (node --import tsx app.ts), stopped by Ctrl-C.
      await writeFile(path.join(appDir, "app.ts"), codeBlock(readme, "## Quick start"))
      const quick = await runUntil(["--import", "tsx", "app.ts"], appDir, env, "emailing ada@example.com about order 1")
      assert.include(quick.output, "emailing ada@example.com about order 1")
      assert.strictEqual(quick.code, 0, quick.output)

      // docs/testing.md's whole test file, on this database, run by the app's vitest.
      const testing = await readFile(path.join(root, "docs", "testing.md"), "utf8")
      const testFile = codeBlock(testing, "```ts\n// test/orders.test.ts")
      assert.include(testFile, `"postgres://postgres@127.0.0.1:5432/test"`)
      await mkdir(path.join(appDir, "test"))
      await writeFile(
        path.join(appDir, "test", "orders.test.ts"),
        testFile.replace(`"postgres://postgres@127.0.0.1:5432/test"`, JSON.stringify(url.href))
      )
      const vitest = await exec(path.join(appDir, "node_modules", ".bin", "vitest"), ["run"], { cwd: appDir, env })
      assert.strictEqual(vitest.code, 0, vitest.stdout + vitest.stderr)
      assert.match(vitest.stdout, /Tests\s+3 passed \(3\)/)

      // docs/promise.md's whole script: plain TypeScript, no Effect code of its own.
      const promise = await readFile(path.join(root, "docs", "promise.md"), "utf8")
      await writeFile(path.join(appDir, "send-emails.ts"), codeBlock(promise, "```ts\n// send-emails.ts"))
      const script = await exec(process.execPath, ["--import", "tsx", "send-emails.ts"], { cwd: appDir, env })
      assert.strictEqual(script.code, 0, script.stdout + script.stderr)
      assert.strictEqual(script.stdout.trim().split("\n").at(-1), "completed sent order 1 to ada@example.com true")
    } finally {
      await pgQuery(pg.url, `DROP DATABASE IF EXISTS ${database} WITH (FORCE)`)
      await rm(dir, { recursive: true, force: true })
    }
  }, 600_000)
}
