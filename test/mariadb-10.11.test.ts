import { inject } from "vitest"
import { conformance } from "./suite/conformance.js"
import { safety } from "./suite/safety.js"

const target = inject("targets").find((t) => t.id === "mariadb-10.11")
if (target) {
  conformance(target)
  safety(target)
} else {
  const { it } = await import("vitest")
  const reason = inject("skipped").find((s) => s.id === "mariadb-10.11")?.reason ?? "not configured"
  it.skip(`[mariadb-10.11] not reachable: ${reason}`, () => {})
}
