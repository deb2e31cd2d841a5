#!/usr/bin/env node
// The `sqlane` command: registers tsx (sqlane ships TypeScript sources) and runs the CLI.
import { register } from "tsx/esm/api"

register()
await import("../src/cli/main.ts")
