#!/usr/bin/env node
// The `sqlane` command. Installed from the package it runs the compiled CLI (dist/); in a clone of
// the repository, which has the TypeScript sources, it runs those through tsx (a devDependency), so
// that it never runs a stale build.
import { existsSync } from "node:fs"

const source = new URL("../src/cli/main.ts", import.meta.url)
if (existsSync(source)) {
  const { register } = await import("tsx/esm/api")
  register()
  await import(source.href)
} else {
  await import("../dist/cli/main.js")
}
