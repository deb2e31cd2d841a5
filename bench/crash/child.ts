/**
 * The victim of the crash-recovery scenario: a sqlane worker (defaults) whose handler records that
 * it started, then runs for an hour. The parent SIGKILLs this process 200 ms into the job.
 *
 *   node --import tsx bench/crash/child.ts <pg|mysql> <url> <prefix>
 */
import * as MysqlClient from "@effect/sql-mysql2/MysqlClient"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Layer, Redacted } from "effect"
import { Job, QueueLive, Worker } from "../../src/index.js"
import { stderrLogger } from "../systems/sqlane.js"
import { Crash } from "./job.js"

const [dialect, url, prefix] = process.argv.slice(2)
// The parent's IPC channel closes when it exits (or is killed): do not outlive it.
process.on("disconnect", () => process.exit(1))
const client = dialect === "pg"
  ? PgClient.layer({ url: Redacted.make(url) })
  : MysqlClient.layer({ url: Redacted.make(url) })

const program = Effect.gen(function*() {
  const sql = (yield* SqlClient.SqlClient).withoutTransforms()
  yield* Worker.make({
    handlers: [Job.handler(Crash, (_, ctx) =>
      sql`INSERT INTO ${sql(`${prefix}started`)} (job_id) VALUES (${ctx.id})`.pipe(
        Effect.orDie,
        Effect.zipRight(Effect.sleep("1 hour"))
      ))]
  })
  yield* Effect.never
}).pipe(
  Effect.scoped,
  Effect.provide(QueueLive({ prefix, migrate: false }).pipe(Layer.provideMerge(client))),
  Effect.provide(stderrLogger)
)

Effect.runPromise(program as Effect.Effect<never, unknown>).catch((e) => {
  console.error(e)
  process.exit(1)
})
