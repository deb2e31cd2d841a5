import { inject } from "vitest"
import { conformance } from "./suite/conformance.js"
import { safety } from "./suite/safety.js"

const target = inject("targets").find((t) => t.id === "postgres-18")
if (target) {
  conformance(target)
  safety(target)
} else {
  const { it } = await import("vitest")
  const reason = inject("skipped").find((s) => s.id === "postgres-18")?.reason ?? "not configured"
  it.skip(`[postgres-18] not reachable: ${reason}`, () => {})
}
