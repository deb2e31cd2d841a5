// `npm run docs`: the site in site/ (git-ignored), from README.md, docs/*.md and the docstrings of the
// public modules. It runs offline, and a broken link (in a docstring or between pages) fails it.
import { existsSync } from "node:fs"

/** The public modules: the package root and the subpath modules written for users to import. */
const entryPoints = ["src/index.ts", "src/testing.ts", "src/promise.ts", "src/dashboard.ts"].filter((file) => existsSync(file))

/** @type {Partial<import("typedoc").TypeDocOptions>} */
export default {
  name: "sqlane",
  entryPoints,
  entryPointStrategy: "resolve",
  tsconfig: "tsconfig.json",
  out: "site",
  readme: "README.md",
  projectDocuments: ["docs/*.md"],
  plugin: ["./scripts/typedoc-sqlane.mjs"],
  excludePrivate: true,
  excludeInternal: true,
  excludeExternals: true,
  disableSources: true,
  skipErrorChecking: true,
  ignoredHighlightLanguages: ["mermaid"],
  hideGenerator: true,
  includeVersion: true,
  sort: ["kind", "alphabetical"],
  validation: { invalidLink: true, invalidPath: true, notExported: true, notDocumented: false },
  treatWarningsAsErrors: true,
  treatValidationWarningsAsErrors: true,
  // Internal types a public signature names (a layer's requirements, a row's shape): QueueLive
  // provides them, and an app never builds them itself.
  intentionallyNotExported: [
    "src/internal/Database.ts:Database",
    "src/internal/driver/rows.ts:Ahead",
    "src/internal/driver/rows.ts:ClaimedRow",
    "src/internal/driver/rows.ts:Finish",
    "src/internal/driver/rows.ts:KeyedClaim",
    "src/internal/driver/rows.ts:NameLimits",
    "src/internal/driver/rows.ts:RatedClaim",
    "src/internal/facts.ts:Facts",
    "src/internal/claimsOnEnds.ts:EndWritten",
    "src/internal/claimsOnEnds.ts:Claimant",
    "src/layers/QueueLive.ts:Services"
  ]
}
