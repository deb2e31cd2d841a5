/**
 * A brief soak with faults (soak/run.ts) on a throw-away PostgreSQL 18 and a throw-away MariaDB:
 * 1,200 jobs of every kind, 2 worker processes at concurrency 20, a worker SIGKILLed every 3–5 s,
 * a quarter of the connections terminated every 3–5 s, and one server restart. Every violation count
 * must be zero, and the rated kind must reach its rate. The full run (`npm run soak`) and its figures: docs/reliability.md.
 */
import { assert, describe, it } from "vitest"
import { print, soak, violations } from "../soak/run.js"

describe("soak with faults", () => {
  for (const db of ["postgres", "mariadb"]) {
    it(`[${db}] worker kills, connection terminations and a server restart: nothing lost, run twice unexplained, overlapping, over a limit or a rate, or stuck`, async () => {
      const lines: Array<string> = []
      const result = await soak({
        db,
        minutes: 0.3,
        jobs: 1200,
        workers: 2,
        concurrency: 20,
        killEvery: [3, 5],
        terminateEvery: [3, 5],
        drainSeconds: 60,
        log: (line) => lines.push(line)
      })
      print(result, (line) => lines.push(line))
      console.log(lines.join("\n"))
      assert.strictEqual(result.jobs, 1200)
      assert.isAbove(result.worker_kills, 0)
      assert.isAbove(result.connections_terminated, 0)
      assert.strictEqual(result.server_restarts, 1)
      // The rated kind ran against its rate (10 a second): its backlog alone fills a window, unless
      // the faults (kills, a server restart) fell on it; never above it (rate_overshoots below).
      assert.isAtLeast(result.rate_busiest_window, 4)
      assert.isAtMost(result.rate_busiest_window, 10)
      assert.deepStrictEqual(violations(result), {
        lost: 0,
        duplicates_unexplained: 0,
        mutex_overlaps: 0,
        limit_overshoots: 0,
        rate_overshoots: 0,
        unique_duplicates: 0,
        stuck: 0,
        unaccounted: 0,
        worker_crashes: 0,
        timeout_first_attempt_recorded: 0,
        flaky_failing_attempt_recorded: 0,
        delayed_ran_early: 0,
        completed_final_attempt_unrecorded: 0
      })
    }, 150_000)
  }
})
