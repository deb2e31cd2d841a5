/**
 * Runs every suite against one database — the driver conformance suite (test/driver) first, then
 * the behaviour suites — or reports it loudly as skipped when the global setup could not reach it
 * (with CI=true the global setup fails the run instead).
 */
import { inject, it } from "vitest"
import { driverSuite } from "../driver/index.js"
import { badInput } from "./badInput.js"
import { core } from "./core.js"
import { dashboard } from "./dashboard.js"
import { dashboardBrowser } from "./dashboardBrowser.js"
import { fairShares } from "./fairShares.js"
import { limits } from "./limits.js"
import { rates } from "./rates.js"
import { dedup } from "./dedup.js"
import { observability } from "./observability.js"
import { plans } from "./plans.js"
import { prefetch } from "./prefetch.js"
import { operations } from "./operations.js"
import { outage } from "./outage.js"
import { pause } from "./pause.js"
import { promise } from "./promise.js"
import { rescue } from "./rescue.js"
import { runtimeRates } from "./runtimeRates.js"
import { safety } from "./safety.js"
import { scheduling } from "./scheduling.js"
import { stats } from "./stats.js"
import { testing } from "./testing.js"

export const suitesFor = (id: string) => {
  const target = inject("targets").find((t) => t.id === id)
  if (target) {
    driverSuite(target)
    core(target)
    prefetch(target)
    safety(target)
    rescue(target)
    plans(target)
    observability(target)
    scheduling(target)
    limits(target)
    rates(target)
    runtimeRates(target)
    fairShares(target)
    dedup(target)
    operations(target)
    pause(target)
    badInput(target)
    outage(target)
    testing(target)
    promise(target)
    dashboard(target)
    dashboardBrowser(target)
    stats(target)
  } else {
    const reason = inject("skipped").find((s) => s.id === id)?.reason ?? "not configured"
    it.skip(`[${id}] not reachable: ${reason}`, () => {})
  }
}
