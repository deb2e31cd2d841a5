/**
 * Stopping while the database is gone, on every database: a worker process behind a proxy that the
 * test cuts (every connection closed and new ones refused, as a stopped server does; or nothing
 * crossing any more, as a network that drops packets) shuts down within its `shutdownTimeout` plus
 * a small fixed bound, says once that the database is unreachable and which jobs it could not
 * release, and leaves those rows for the rescuers of other workers. A database back before the
 * worker gives up on it gets the releases.
 */
import { assert, describe, it } from "@effect/vitest"
import { spawn } from "node:child_process"
import * as path from "node:path"
import * as Effect from "effect/Effect"
import { Job, Queue, Worker } from "../../src/index.js"
import { countJobs, waitUntil, withQueue } from "../support/helpers.js"
import { Slow } from "../support/jobs.js"
import { proxyTo } from "../support/proxy.js"
import type { Target } from "../support/targets.js"

const workerScript = path.join(import.meta.dirname, "..", "support", "worker-process.ts")

/** The worker's `shutdownTimeout` (ms). */
const shutdownMs = 1000

/** The target's URL with its host and port replaced by `address`. */
const via = (url: string, address: string) => {
  const u = new URL(url)
  u.host = address
  return u.toString()
}

/** Runs the "outage" worker process through `url`; its output and exit, and a way to signal it. */
const outageWorker = (dialect: "pg" | "mysql", url: string, prefix: string, shutdownMs: number) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const child = spawn(process.execPath, ["--import", "tsx", workerScript, "outage", dialect, url, prefix, "outage", String(shutdownMs)], {
        stdio: ["ignore", "pipe", "pipe"]
      })
      let output = ""
      child.stdout.on("data", (d) => (output += d))
      child.stderr.on("data", (d) => (output += d))
      const exit = new Promise<number | string>((resolve) => child.on("close", (code, signal) => resolve(signal ?? code ?? -1)))
      return { child, exit, output: () => output }
    }),
    ({ child }) => Effect.sync(() => child.exitCode === null && child.signalCode === null && child.kill("SIGKILL"))
  )

export const outage = (target: Target) => {
  const name = (title: string) => `[${target.id}] ${title}`
  const { hostname, port } = new URL(target.url)
  /**
   * 30 jobs, and a worker process (concurrency 20, shutdownTimeout `shutdownMs`) behind a proxy the
   * test can cut, once its handlers started 20 of them — started, not only claimed in the table: the
   * cut must not lose a claim's answer (its jobs would then be a lost claim's, which the worker never ran).
   */
  const twentyRunning = (prefix: string) =>
    Effect.gen(function*() {
      const queue = yield* Queue.Queue
      yield* queue.enqueueMany(Slow, Array.from({ length: 30 }, () => ({})))
      const proxy = yield* proxyTo(hostname, Number(port))
      const worker = yield* outageWorker(target.dialect, via(target.url, proxy.address), prefix, shutdownMs)
      const started = () => worker.output().match(/^started \d+$/gm)?.length ?? 0
      yield* waitUntil(Effect.sync(() => started() === 20), 30_000, "20 running jobs").pipe(
        Effect.tapError(() => Effect.sync(() => console.error(worker.output())))
      )
      return { proxy, worker }
    })
  describe("shutdown with the database gone", () => {
    for (const mode of ["refuse", "blackhole"] as const) {
      it.live(
        name(`database ${mode === "refuse" ? "stopped" : "unreachable (packets dropped)"}: a worker of 20 running jobs stops within shutdownTimeout + 2 s, logs the outage once and names the jobs it could not release`),
        () =>
          withQueue(target, (prefix) =>
            Effect.gen(function*() {
              const { proxy, worker } = yield* twentyRunning(prefix)
              yield* proxy.cut(mode)
              // Long enough for the worker to find its lock connection gone and try to take it again.
              yield* Effect.sleep("1500 millis")
              const signalledAt = Date.now()
              worker.child.kill("SIGINT")
              // The worker's and QueueLive's scopes close within the bound, whatever the database does.
              yield* waitUntil(Effect.sync(() => /queue closed \d+/.test(worker.output())), 30_000, "QueueLive to close")
              const output = worker.output()
              const took = Number(/queue closed (\d+)/.exec(output)![1])
              assert.isTrue(took <= shutdownMs + 2000, `the shutdown took ${took} ms:\n${output}`)
              // The SQL client closes after them, and the process exits. Not with @effect/sql-mysql2 on a
              // network that drops packets: its pool's close waits for the server's goodbye with no bound
              // of its own (docs/operations.md).
              if (!(target.dialect === "mysql" && mode === "blackhole")) {
                const exit = yield* Effect.promise(() => worker.exit)
                const exitedMs = Date.now() - signalledAt
                assert.isTrue(exitedMs <= shutdownMs + 3000, `the process exited ${exitedMs} ms after SIGINT:\n${output}`)
                assert.include([0, 130, "SIGINT"], exit)
              }
              // One warning of the outage, not one per retry; one line naming the jobs left running.
              assert.isAtMost(output.match(/unreachable/g)?.length ?? 0, 2, output)
              assert.notInclude(output, "re-acquiring")
              assert.isAtMost(output.match(/WARN/g)?.length ?? 0, 4, output)
              const left = /(\d+) job end\(s\) could not be written at close[^:]*: ([\d, ]+)/.exec(output)
              assert.isNotNull(left, output)
              assert.strictEqual(Number(left![1]), 20)
              assert.strictEqual(left![2].split(", ").length, 20)
              // Their rows stay running, for the rescuers of other workers ("worker lost").
              assert.strictEqual(yield* countJobs(prefix, "running"), 20)
              if (mode === "refuse") {
                // The server saw the worker's connections close: its lock is free, its jobs are rescued.
                yield* Worker.make({ concurrency: 30, handlers: [Job.handler(Slow, () => Effect.void)] })
                yield* waitUntil(Effect.map(countJobs(prefix, "completed"), (n) => n === 30), 30_000, "all 30 jobs to complete")
              }
            })
          ),
        60_000
      )
    }

    it.live(
      name("database stopped, then back 300 ms after SIGINT: the worker stops within shutdownTimeout + 2 s and releases its 20 jobs"),
      () =>
        withQueue(target, (prefix) =>
          Effect.gen(function*() {
            const { proxy, worker } = yield* twentyRunning(prefix)
            yield* proxy.cut("refuse")
            // The worker finds the database gone before it is told to stop.
            yield* Effect.sleep("1500 millis")
            worker.child.kill("SIGINT")
            yield* Effect.sleep("300 millis")
            yield* proxy.restore
            yield* waitUntil(Effect.sync(() => /queue closed \d+/.test(worker.output())), 30_000, "QueueLive to close")
            const output = worker.output()
            const took = Number(/queue closed (\d+)/.exec(output)![1])
            assert.isTrue(took <= shutdownMs + 2000, `the shutdown took ${took} ms:\n${output}`)
            yield* Effect.promise(() => worker.exit)
            // Released: back to pending, their attempts not counted.
            assert.notInclude(output, "could not be written", output)
            assert.strictEqual(yield* countJobs(prefix, "running"), 0, output)
            assert.strictEqual(yield* countJobs(prefix, "pending"), 30, output)
          })
        ),
      60_000
    )
  })
}
