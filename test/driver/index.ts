/**
 * The driver conformance suite: one `describe` per operation of `Driver`
 * (src/internal/driver/Driver.ts), each asserting its contract with exact values on a real
 * database — rows returned, states written, the guards of ends and claims, locks, and what
 * `capabilities` says. Run on every database (test/suite/index.ts); a new driver passes it before
 * the behaviour suites. Each test has a table prefix of its own, migrated by a fresh QueueLive, and
 * a fixed clock (`t0`): every time it writes is a parameter.
 */
import { describe } from "@effect/vitest"
import type { Target } from "../support/targets.js"
import { adminOps } from "./admin.js"
import { insertOps } from "./insert.js"
import { jobsOps } from "./jobs.js"
import { ratesOps } from "./rates.js"
import { schedulesOps } from "./schedules.js"
import { sessionOps } from "./session.js"
import { statsOps } from "./stats.js"
import { workersOps } from "./workers.js"

export const driverSuite = (target: Target) => {
  // The tests share nothing (a prefix each): they run a few at a time.
  describe.concurrent(`driver [${target.id}]`, () => {
    sessionOps(target)
    insertOps(target)
    jobsOps(target)
    workersOps(target)
    schedulesOps(target)
    adminOps(target)
    ratesOps(target)
    statsOps(target)
  })
}
