/**
 * `npm start` (examples/orders.ts on its embedded PostgreSQL) stopped by Ctrl-C in a terminal: the
 * terminal signals the whole process group, so the embedded server stops at the same moment as the
 * app. The example exits within 2 s, prints one line, and leaves no server or directory behind.
 */
import { assert, describe, it } from "@effect/vitest"
import { execFileSync, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"

const example = path.join(import.meta.dirname, "..", "examples", "orders.ts")

const dataDirs = () => new Set(fs.readdirSync(os.tmpdir()).filter((f) => f.startsWith("sqlane-orders-")))

/** The postgres processes running on one of `dirs`. */
const serversOn = (dirs: ReadonlyArray<string>) => {
  if (dirs.length === 0) return []
  const ps = execFileSync("ps", ["-eo", "pid,args"], { encoding: "utf8" })
  return ps.split("\n").filter((line) => dirs.some((d) => line.includes(d)))
}

/** The example on its embedded PostgreSQL, in a process group of its own (as a terminal's foreground job). */
const startExample = () => {
  const env: Record<string, string> = {}
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && k !== "DATABASE_URL") env[k] = v
  const child = spawn(process.execPath, ["--import", "tsx", example, "--orders", "200000"], {
    detached: true,
    env,
    stdio: ["ignore", "pipe", "pipe"]
  })
  let output = ""
  child.stdout.on("data", (d) => (output += d))
  child.stderr.on("data", (d) => (output += d))
  const exited = new Promise<number | string>((resolve) => child.on("close", (code, signal) => resolve(signal ?? code ?? -1)))
  const kill = () => {
    if (child.exitCode === null && child.signalCode === null) {
      try {
        process.kill(-child.pid!, "SIGKILL")
      } catch {
        // gone
      }
    }
  }
  return { child, exited, output: () => output, kill }
}

/**
 * The lines of `output` that the example printed, without pg's deprecation warning for a query sent on
 * a client that is still running another: a statement interrupted at Ctrl-C is cancelled
 * (`pg_cancel_backend`) and its client goes back to the pool before the cancelled statement has
 * answered, so the next statement on that client waits behind it (correct, and pg warns about it).
 */
const printedLines = (output: string) =>
  output.split("\n").map((l) => l.trim()).filter((l) =>
    l !== "" && !/DeprecationWarning: Calling client\.query\(\) when the client is already executing a query/.test(l) &&
    !l.startsWith("(Use `node --trace-deprecation")
  )

const waitFor = async (what: string, ready: () => boolean, output: () => string) => {
  const start = Date.now()
  while (!ready()) {
    if (Date.now() - start > 60_000) throw new Error(`${what}: not within 60 s:\n${output()}`)
    await new Promise((r) => setTimeout(r, 5))
  }
}

describe("examples/orders.ts", () => {
  it("Ctrl-C to its process group while it runs jobs: it exits within 2 s, prints one line, leaves no server or directory", async () => {
    const before = dataDirs()
    const app = startExample()
    try {
      await waitFor("the example runs jobs", () => /jobs \d+\/\d+ completed/.test(app.output()), app.output)
      // The dashboard it serves meanwhile: its page, and the API's overview of the example's jobs.
      const dashboard = /Dashboard at (http:\/\/127\.0\.0\.1:\d+\/)/.exec(app.output())?.[1]
      assert.isDefined(dashboard, app.output())
      const page = await fetch(dashboard!)
      assert.deepStrictEqual([page.status, page.headers.get("content-type")], [200, "text/html; charset=utf-8"])
      const overview = (await (await fetch(`${dashboard}api/overview`)).json()) as { names: Array<{ name: string }> }
      assert.include(overview.names.map((n) => n.name), "send-confirmation-email")
      const ours = Array.from(dataDirs()).filter((d) => !before.has(d))
      assert.strictEqual(ours.length, 1, "the example's data directory")
      assert.isAbove(serversOn(ours).length, 0, "its embedded server runs")
      const printedBefore = app.output().length
      const signalledAt = Date.now()
      process.kill(-app.child.pid!, "SIGINT")
      const code = await app.exited
      const took = Date.now() - signalledAt
      const after = printedLines(app.output().slice(printedBefore))
        .filter((l) => !/^jobs \d+\/\d+ completed/.test(l)) // a progress line already on its way
      assert.isBelow(took, 2000, `it exited ${took} ms after Ctrl-C:\n${app.output().slice(printedBefore)}`)
      assert.deepStrictEqual(after, ["Interrupted: shutting down…"])
      assert.strictEqual(code, 130, app.output().slice(printedBefore))
      assert.isFalse(fs.existsSync(path.join(os.tmpdir(), ours[0])), "the data directory is removed")
      assert.deepStrictEqual(serversOn(ours), [], "no server is left")
    } finally {
      app.kill()
    }
  }, 120_000)

  it("Ctrl-C to its process group while the embedded server starts: it prints one line, leaves no server or directory", async () => {
    const before = dataDirs()
    const app = startExample()
    try {
      // Its data directory made: the server is being set up (initdb) or started.
      await waitFor("the data directory", () => Array.from(dataDirs()).some((d) => !before.has(d)), app.output)
      const ours = Array.from(dataDirs()).filter((d) => !before.has(d))
      process.kill(-app.child.pid!, "SIGINT")
      const code = await app.exited
      const lines = printedLines(app.output())
      assert.strictEqual(code, 130, app.output())
      assert.deepStrictEqual(lines, ["Interrupted: shutting down…"])
      assert.isFalse(fs.existsSync(path.join(os.tmpdir(), ours[0])), "the data directory is removed")
      assert.deepStrictEqual(serversOn(ours), [], "no server is left")
    } finally {
      app.kill()
    }
  }, 120_000)
})
