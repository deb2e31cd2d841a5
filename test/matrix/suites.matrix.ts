/**
 * The compatibility matrix's test file: every suite of test/suite/index.ts (through `suitesFor`: the
 * driver conformance suite and the behaviour suites) on each database listed in
 * `SQLANE_MATRIX_TARGETS`. Not part of `npm test` (its name does not end in `.test.ts`);
 * test/matrix/run.ts runs it through test/matrix/vitest.config.ts, one database per run.
 */
import { inject } from "vitest"
import { suitesFor } from "../suite/index.js"

for (const id of [...inject("targets").map((t) => t.id), ...inject("skipped").map((s) => s.id)]) {
  suitesFor(id)
}
