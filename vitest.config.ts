import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/support/globalSetup.ts"],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Each database gets its own test file, so the three run side by side.
    fileParallelism: true,
    pool: "forks"
  }
})
