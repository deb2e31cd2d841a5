/**
 * Vitest configuration of the compatibility matrix (test/matrix/run.ts): the repository's own
 * configuration, but only the matrix test file, which runs every suite on the databases named in
 * `SQLANE_MATRIX_TARGETS` (see test/support/globalSetup.ts).
 */
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { defineConfig } from "vitest/config"
import base from "../../vitest.config.js"

export default defineConfig({
  ...base,
  root: path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../.."),
  test: {
    ...base.test,
    include: ["test/matrix/**/*.matrix.ts"]
  }
})
