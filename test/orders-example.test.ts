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

describe("examples/orders.ts", () => {
  it("Ctrl-C to its process group while it runs jobs: it exits within 2 s, prints one line, leaves no server or directory", async () => {
    const before = dataDirs()
    const env: Record<string, string> = {}
    for (const [k, v] of Object.entries(process.env)) if (v !== undefined && k !== "DATABASE_URL") env[k] = v
    // A process group of its own, as a terminal's foreground job has.
    const child = spawn(process.execPath, ["--import", "tsx", example, "--orders", "200000"], {
      detached: true,
      env,
      stdio: ["ignore", "pipe", "pipe"]
    })
    let output = ""
    child.stdout.on("data", (d) => (output += d))
    child.stderr.on("data", (d) => (output += d))
    const exited = new Promise<number | string>((resolve) => child.on("close", (code, signal) => resolve(signal ?? code ?? -1)))
    try {
      const start = Date.now()
      while (!/jobs \d+\/\d+ completed/.test(output)) {
        if (Date.now() - start > 60_000) throw new Error(`the example ran no jobs within 60 s:\n${output}`)
        await new Promise((r) => setTimeout(r, 50))
      }
      const ours = Array.from(dataDirs()).filter((d) => !before.has(d))
      assert.strictEqual(ours.length, 1, "the example's data directory")
      assert.isAbove(serversOn(ours).length, 0, "its embedded server runs")
      const printedBefore = output.length
      const signalledAt = Date.now()
      process.kill(-child.pid!, "SIGINT")
      const code = await exited
      const took = Date.now() - signalledAt
      const after = output.slice(printedBefore).split("\n").map((l) => l.trim())
        .filter((l) => l !== "" && !/^jobs \d+\/\d+ completed/.test(l)) // a progress line already on its way
      assert.isBelow(took, 2000, `it exited ${took} ms after Ctrl-C:\n${output.slice(printedBefore)}`)
      assert.strictEqual(code, 130)
      assert.deepStrictEqual(after, ["Interrupted: shutting down…"])
      assert.isFalse(fs.existsSync(path.join(os.tmpdir(), ours[0])), "the data directory is removed")
      assert.deepStrictEqual(serversOn(ours), [], "no server is left")
    } finally {
      if (child.exitCode === null && child.signalCode === null) {
        try {
          process.kill(-child.pid!, "SIGKILL")
        } catch {
          // gone
        }
      }
    }
  }, 120_000)
})
