import { fileURLToPath } from "node:url"
import { defineConfig } from "vitest/config"
import { BaseSequencer, type TestSpecification } from "vitest/node"

/**
 * vitest's order (longest first when it has timings from an earlier run, else the largest file
 * first), except that the suites' files (test/<database>.test.ts: minutes each, but three lines
 * long) come first, so that they run side by side: in a fresh clone vitest would start them last,
 * one after the other.
 */
class SuitesFirst extends BaseSequencer {
  override async sort(files: Array<TestSpecification>): Promise<Array<TestSpecification>> {
    const rank = (file: TestSpecification) => (/\/(postgres|mariadb)-[\d.]+\.test\.ts$/.test(file.moduleId) ? 0 : 1)
    return (await super.sort(files)).sort((a, b) => rank(a) - rank(b))
  }
}

export default defineConfig({
  // `import … from "sqlane"` (the quick start) runs the sources, not a build (package.json's exports
  // send apps to dist/; tsconfig.json's "sqlane-source" condition does the same for tsc).
  resolve: {
    alias: [
      { find: /^sqlane$/, replacement: fileURLToPath(new URL("./src/index.ts", import.meta.url)) },
      { find: /^sqlane\/(.*)$/, replacement: `${fileURLToPath(new URL("./src/", import.meta.url))}$1.ts` }
    ]
  },
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/support/globalSetup.ts"],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Each database gets its own test file. Two files at a time: vitest's default on a 2-core
    // machine is one (cores − 1), and the tests mostly wait on the databases and child processes
    // (the whole suite: one at a time 10.4 min, two at a time 8.3 min).
    fileParallelism: true,
    maxWorkers: 2,
    minWorkers: 1,
    pool: "forks",
    sequence: { sequencer: SuitesFirst }
  }
})
