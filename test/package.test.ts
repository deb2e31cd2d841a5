/**
 * The package as an app gets it: `npm pack` (which builds dist/ through `prepack`), unpacked into an
 * app's node_modules, type-checked by the app's own strictest compiler options against the .d.ts
 * files only, and run with plain `node` (no tsx): a job enqueued and completed on PostgreSQL 15, and
 * the `sqlane` command from the package's bin.
 *
 * The unpacked package finds its dependencies (effect, @effect/sql, …) in this repository's
 * node_modules, as an app's npm install would put them beside it.
 */
import { assert, it } from "@effect/vitest"
import { Effect } from "effect"
import { execFile } from "node:child_process"
import { mkdir, mkdtemp, readdir, rm, writeFile } from "node:fs/promises"
import * as path from "node:path"
import { inject } from "vitest"
import { dropTables } from "./support/helpers.js"
import { clientLayer, uniquePrefix } from "./support/targets.js"

const root = path.join(import.meta.dirname, "..")
const pg = inject("targets").find((t) => t.id === "postgres-15")

const exec = (file: string, args: ReadonlyArray<string>, options: { cwd: string; env?: NodeJS.ProcessEnv }) =>
  new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    execFile(file, args, { ...options, timeout: 120_000, maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) =>
      resolve({ code: error ? Number((error as { code?: unknown }).code ?? 1) || 1 : 0, stdout, stderr }))
  })

const app = `import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Redacted, Schema } from "effect"
import { Admin, Job, Queue, QueueLive, Worker } from "sqlane"
import { JobNotFound } from "sqlane/schema/Errors"

const Greet = Job.make("greet", { payload: Schema.Struct({ to: Schema.String }) })

const program = Effect.gen(function*() {
  const queue = yield* Queue.Queue
  const greeted = yield* Effect.makeLatch(false)
  yield* Worker.make({ handlers: [Job.handler(Greet, ({ to }) => Effect.zipRight(Effect.log(to), greeted.open))] })
  const id = yield* queue.enqueue(Greet, { to: "ada" })
  yield* greeted.await
  let state = ""
  while (state !== "completed") {
    state = (yield* queue.get(id)).state
    yield* Effect.sleep("20 millis")
  }
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
  include: ["app.ts"]
}

if (pg) {
  it("the packed package: typed by its .d.ts under the strictest options, runs on plain node, its CLI too", async () => {
    await mkdir(path.join(root, ".tmp"), { recursive: true })
    const dir = await mkdtemp(path.join(root, ".tmp", "package-"))
    const prefix = uniquePrefix("pkg")
    try {
      const packed = await exec("npm", ["pack", "--pack-destination", dir, "--silent"], { cwd: root })
      assert.strictEqual(packed.code, 0, packed.stderr)
      const tarball = (await readdir(dir)).find((f) => f.endsWith(".tgz"))!
      const appDir = path.join(dir, "app")
      const installed = path.join(appDir, "node_modules", "sqlane")
      await mkdir(installed, { recursive: true })
      const untar = await exec("tar", ["xzf", path.join(dir, tarball), "-C", installed, "--strip-components=1"], {
        cwd: dir
      })
      assert.strictEqual(untar.code, 0, untar.stderr)
      // What the package holds: the build, its bin and docs; no TypeScript sources to compile.
      const files = await readdir(installed)
      assert.deepStrictEqual(files.filter((f) => f !== "LICENSE").sort(), ["README.md", "bin", "dist", "docs", "package.json"])

      await writeFile(path.join(appDir, "package.json"), JSON.stringify({ name: "app", type: "module" }))
      await writeFile(path.join(appDir, "tsconfig.json"), JSON.stringify(tsconfig))
      await writeFile(path.join(appDir, "app.ts"), app)
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

      const cli = await exec(process.execPath, [path.join(installed, "bin", "sqlane.js"), "status", "--json"], {
        cwd: appDir,
        env
      })
      assert.strictEqual(cli.code, 0, cli.stderr)
      assert.strictEqual(JSON.parse(cli.stdout).names[0].completed, 1)
    } finally {
      await Effect.runPromise(dropTables(prefix).pipe(Effect.provide(clientLayer(pg)), Effect.ignore))
      await rm(dir, { recursive: true, force: true })
    }
  }, 180_000)
}
