/**
 * Diagnostic: the database's side of a PostgreSQL drain alone. Each lane is one connection that
 * runs sqlane's ride statement (end the attempts it claimed, claim as many: `WITH ended AS
 * (UPDATE … RETURNING), claimed AS (UPDATE … RETURNING) SELECT claimed rows LEFT JOIN the ends'
 * summary`) back to back, with no handler and no Effect runtime, over a backlog of N due jobs;
 * prints jobs/s per (lanes × batch). The statements are those of sqlane's driver (`jobClaim`,
 * `jobFinishManyAndClaim`), written by it for each call; the raw `pg` driver runs them.
 *
 * It bounds what a worker can reach: a worker at concurrency 50 writes its ends and claims in one
 * such statement at a time (1 × 50); writing two halves in turn would be 1 × 25, and two
 * connections at once 2 × 25.
 *   node --import tsx bench/tools/ride-ceiling.ts [n=20000] [lanes×batch …, default 1x50 1x25 2x25 2x50]
 */
import Pg from "pg"
import type { Finish } from "../../src/internal/driver/Driver.js"
import { recorder } from "../lib/driverSql.js"
import { admin, open } from "../lib/targets.js"
import { sqlane } from "../systems/sqlane.js"
import { payload } from "../systems/types.js"

const n = Number(process.argv[2] ?? 20000)
const shapes = (process.argv.length > 3 ? process.argv.slice(3) : ["1x50", "1x25", "2x25", "2x50"])
  .map((s) => s.split("x").map(Number) as [number, number])
const target = await open("postgres-15")
const env = { target, ns: `ceiling_${process.pid}` }
await sqlane.prepare(env)
const jobs = `${env.ns}_jobs`
const a = admin(target)
const group = [{ name: "bench", priority: 0 }]
/** The driver's statements for one lane (each lane records its own). */
const lane = async (worker: string) => {
  const driver = await recorder("pg", `${env.ns}_`)
  return {
    claim: async (k: number) =>
      (await driver.statements((d) => d.jobClaim(group, k, Date.now() * 1000, worker)))[0],
    ride: async (rows: ReadonlyArray<any>, k: number) => {
      const nowUs = Date.now() * 1000
      const finishes: Array<Finish> = rows.map((r) => ({
        id: String(r.id),
        attempt: Number(r.attempts),
        state: "completed",
        runAtUs: null,
        finishedAtUs: nowUs,
        lastError: null,
        errors: null,
        result: null
      }))
      return (await driver.statements((d) => d.jobFinishManyAndClaim!(finishes, group, k, nowUs, worker)))[0]
    }
  }
}
try {
  for (const [lanes, k] of shapes) {
    await a.query(`TRUNCATE ${jobs}`)
    await a.query(
      `INSERT INTO ${jobs} (name, payload, priority, run_at, created_at)
       SELECT 'bench', $1, 0, now() - interval '1 second', now() FROM generate_series(1, ${n})`,
      [JSON.stringify(payload(1))]
    )
    await a.query(`VACUUM ANALYZE ${jobs}`)
    const clients = await Promise.all(Array.from({ length: lanes }, async () => {
      const c = new Pg.Client({ connectionString: target.url })
      await c.connect()
      return c
    }))
    let done = 0
    const t0 = performance.now()
    await Promise.all(clients.map(async (c, i) => {
      const statements = await lane(`w${i}`)
      const first = await statements.claim(k)
      let rows = (await c.query(first.text, first.params)).rows
      while (rows.length > 0) {
        const ride = await statements.ride(rows, k)
        const { rows: result } = await c.query(ride.text, ride.params)
        done += rows.length
        rows = result.filter((r) => r.id !== null)
      }
    }))
    const seconds = (performance.now() - t0) / 1000
    console.log(`${lanes} × ${k}: ${Math.round(done / seconds)} jobs/s (${done} jobs)`)
    await Promise.all(clients.map((c) => c.end()))
  }
} finally {
  await a.close()
  await sqlane.drop(env)
}
