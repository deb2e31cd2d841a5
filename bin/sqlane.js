#!/usr/bin/env node
// The `sqlane` command. Installed from the package it runs the compiled CLI (dist/); in a clone of
// the repository, which has the TypeScript sources and tsx (a devDependency), it runs the sources,
// so that it never runs a stale build. Paths are taken from this file's real location (npm links
// it from node_modules/.bin).
import { existsSync, realpathSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"

const root = join(dirname(realpathSync(fileURLToPath(import.meta.url))), "..")
const source = join(root, "src", "cli", "main.ts")
const tsx = existsSync(source) ? await import("tsx/esm/api").catch(() => undefined) : undefined
if (tsx !== undefined) {
  tsx.register()
  await import(pathToFileURL(source).href)
} else {
  await import(pathToFileURL(join(root, "dist", "cli", "main.js")).href)
}
