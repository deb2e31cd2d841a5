/**
 * The package as an app gets it: built (`npm run build`), packed, and installed with npm into a new
 * app outside this repository, beside the peer dependencies docs/getting-started.md names; the app is
 * type-checked (with the README's quick start, examples/quickstart.ts) with the strictest compiler
 * options against sqlane's .d.ts files only and run with
 * plain `node` (no tsx): a job enqueued and completed on PostgreSQL 15 (waited for with
 * `sqlane/testing`'s `waitFor`: the subpath exports resolve), the same through `sqlane/promise`,
 * and the `sqlane` command from node_modules/.bin. An import of a package that is not a dependency or peer dependency (a
 * devDependency such as tsx) fails here.
 *
 * npm installs from its cache when it can (`--prefer-offline`): `npm ci` of this repository has
 * put every package there.
 */
import { assert, it } from "@effect/vitest"
import { Effect } from "effect"
import { execFile } from "node:child_process"
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises"
import * as os from "node:os"
import * as path from "node:path"
import { inject } from "vitest"
import { dropTables } from "./support/helpers.js"
import { clientLayer, uniquePrefix } from "./support/targets.js"

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

if (pg) {
  it("the packed package: installed by npm, typed by its .d.ts under the strictest options, runs on plain node, its CLI too", async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), "sqlane-package-"))
    const prefix = uniquePrefix("pkg")
    try {
      const built = await exec("npm", ["run", "build", "--silent"], { cwd: root })
      assert.strictEqual(built.code, 0, built.stdout + built.stderr)
      const packed = await exec("npm", ["pack", "--ignore-scripts", "--silent", "--pack-destination", dir], { cwd: root })
      assert.strictEqual(packed.code, 0, packed.stderr)
      const tarball = path.join(dir, (await readdir(dir)).find((f) => f.endsWith(".tgz"))!)

      const appDir = path.join(dir, "app")
      await mkdir(appDir)
      await writeFile(path.join(appDir, "package.json"), JSON.stringify({ name: "app", private: true, type: "module" }))
      const installed = await exec("npm", [
        "install",
        "--prefer-offline",
        "--no-audit",
        "--no-fund",
        "--loglevel=error",
        tarball,
        "effect@^3.22",
        "@effect/sql@^0.52",
        "@effect/sql-pg@^0.53",
        "@effect/platform-node@^0.108",
        "@types/node@^20"
      ], { cwd: appDir })
      assert.strictEqual(installed.code, 0, installed.stdout + installed.stderr)
      // What the package holds: the build, its bin, docs and license; no TypeScript sources.
      const files = await readdir(path.join(appDir, "node_modules", "sqlane"))
      assert.deepStrictEqual(files.sort(), ["LICENSE", "README.md", "bin", "dist", "docs", "package.json"])

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
    } finally {
      for (const p of [prefix, `${prefix}p_`]) {
        await Effect.runPromise(dropTables(p).pipe(Effect.provide(clientLayer(pg)), Effect.ignore))
      }
      await rm(dir, { recursive: true, force: true })
    }
  }, 420_000)
}
