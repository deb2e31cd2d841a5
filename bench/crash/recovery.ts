/**
 * crash-recovery for sqlane with defaults: seconds from SIGKILL of the worker process holding a job
 * (200 ms into it) to the job starting again in a fresh worker. The fresh worker starts before the
 * kill, as a second worker process would already be running.
 */
import * as MysqlClient from "@effect/sql-mysql2/MysqlClient"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as SqlClient from "@effect/sql/SqlClient"
import { spawn } from "node:child_process"
import * as path from "node:path"
import { Effect, Redacted } from "effect"
import { Job, Migrations, Queue, QueueLive, Worker } from "../../src/index.js"
import { admin, type Target } from "../lib/targets.js"
import { sqlaneTables, stderrLogger } from "../systems/sqlane.js"
import { Crash } from "./job.js"

const child = path.join(import.meta.dirname, "child.ts")

/** The tables of one crash run: sqlane's and the victim's record of the job's start. */
const crashTables = [...sqlaneTables, "started"]

/** Drops the tables of `runs` crash runs under `ns` (what an interrupted run leaves). */
export const dropCrashTables = async (target: Target, runs: number, ns: string) => {
  const a = admin(target)
  try {
    for (let i = 0; i < runs; i++) {
      for (const t of crashTables) await a.query(`DROP TABLE IF EXISTS ${ns}_crash${i}_${t}`)
    }
  } finally {
    await a.close()
  }
}

const once = (dialect: "pg" | "mysql", url: string, prefix: string) => {
  const client = dialect === "pg"
    ? PgClient.layer({ url: Redacted.make(url) })
    : MysqlClient.layer({ url: Redacted.make(url) })
  return Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    yield* Migrations.run(prefix)
    yield* sql`CREATE TABLE ${sql(`${prefix}started`)} (job_id VARCHAR(32) NOT NULL)`
    const startedOnce = Effect.map(
      sql<{ n: number }>`SELECT COUNT(*) AS n FROM ${sql(`${prefix}started`)}`,
      (r) => Number(r[0].n) > 0
    )
    return yield* Effect.gen(function*() {
      const queue = yield* Queue.Queue
      yield* queue.enqueue(Crash, {})
      // With an IPC channel: the victim exits when this process goes (see child.ts).
      const victim = spawn(process.execPath, ["--import", "tsx", child, dialect, url, prefix], {
        stdio: ["ignore", "inherit", "inherit", "ipc"]
      })
      yield* Effect.addFinalizer(() => Effect.sync(() => victim.kill("SIGKILL")))
      while (!(yield* startedOnce)) yield* Effect.sleep("10 millis")
      yield* Effect.sleep("200 millis")
      let restartedAt = 0
      yield* Worker.make({ handlers: [Job.handler(Crash, () => Effect.sync(() => void (restartedAt ||= Date.now())))] })
      const killedAt = Date.now()
      victim.kill("SIGKILL")
      while (restartedAt === 0) {
        if (Date.now() - killedAt > 120_000) return Number.POSITIVE_INFINITY
        yield* Effect.sleep("5 millis")
      }
      return (restartedAt - killedAt) / 1000
    }).pipe(
      Effect.scoped,
      Effect.provide(QueueLive({ prefix, migrate: false })),
      Effect.provide(stderrLogger),
      Effect.ensuring(Effect.ignore(Effect.forEach(crashTables, (t) => sql`DROP TABLE IF EXISTS ${sql(prefix + t)}`)))
    )
  }).pipe(Effect.provide(client))
}

/** Seconds from SIGKILL to restart, one number per run. */
export const measureCrashRecovery = (dialect: "pg" | "mysql", url: string, runs: number, ns: string) =>
  Effect.runPromise(
    Effect.forEach(Array.from({ length: runs }, (_, i) => i), (i) => once(dialect, url, `${ns}_crash${i}_`)) as
      Effect.Effect<ReadonlyArray<number>, unknown>
  )
