/**
 * `sqlane limit`: concurrency limits set at run time, over those of the job definitions.
 *
 * ```
 * sqlane limit                          # the run-time limits, and the slots held now
 * sqlane limit NAME N [--per-key K]     # at most N attempts of NAME at once (and K per key)
 * sqlane limit NAME --per-key K         # at most K attempts per key of NAME at once
 * sqlane limit NAME --clear             # the definition's limits again
 * ```
 *
 * @since 0.3.0
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Admin from "../services/Admin.js"
import { CliError } from "./CliError.js"
import { common, withAdmin } from "./connection.js"
import { printJson, table } from "./output.js"

const show = (c: { readonly json: boolean }) =>
  Effect.gen(function*() {
    const limits = yield* (yield* Admin.Admin).limits
    if (c.json) return yield* printJson(limits)
    if (limits.length === 0) return yield* Console.log("no limits set at run time (job definitions may have their own)")
    yield* Console.log(table(
      ["NAME", "RUNNING", "PER KEY", "IN USE", "KEYS IN USE", "BUSIEST KEY", "SET AT"],
      limits.map((l) => [
        l.name,
        l.running ?? "(definition)",
        l.runningPerKey ?? "(definition)",
        l.inUse.running,
        l.inUse.keys,
        l.inUse.busiestKey === undefined ? "" : `${l.inUse.busiestKey} (${l.inUse.busiestKeyRunning})`,
        l.updatedAt.toISOString()
      ])
    ))
  })

export const limit = Command.make(
  "limit",
  {
    ...common,
    name: Args.text({ name: "name" }).pipe(Args.optional),
    running: Args.integer({ name: "running" }).pipe(
      Args.withDescription("at most this many attempts of the name at once, in every process"),
      Args.optional
    ),
    perKey: Options.integer("per-key").pipe(
      Options.withDescription("at most this many attempts of one concurrency key at once"),
      Options.optional
    ),
    clear: Options.boolean("clear").pipe(Options.withDescription("remove the run-time limits: the definition's apply"))
  },
  (c) =>
    withAdmin(
      c,
      Effect.gen(function*() {
        const admin = yield* Admin.Admin
        if (Option.isNone(c.name)) {
          if (Option.isSome(c.running) || Option.isSome(c.perKey) || c.clear) {
            return yield* new CliError({ message: "give the job name first: sqlane limit NAME N [--per-key K]" })
          }
          return yield* show(c)
        }
        const name = c.name.value
        if (c.clear) {
          if (Option.isSome(c.running) || Option.isSome(c.perKey)) {
            return yield* new CliError({ message: "give either --clear or limits, not both" })
          }
          const changed = yield* admin.clearLimits(name)
          return yield* c.json
            ? printJson({ name, cleared: changed })
            : Console.log(changed ? `cleared the run-time limits of ${name}` : `${name} had no run-time limits`)
        }
        if (Option.isNone(c.running) && Option.isNone(c.perKey)) {
          return yield* new CliError({ message: "give a limit: sqlane limit NAME N [--per-key K], or --clear" })
        }
        const running = Option.getOrUndefined(c.running)
        const runningPerKey = Option.getOrUndefined(c.perKey)
        yield* admin.setLimits(name, { running, runningPerKey })
        yield* c.json
          ? printJson({ name, running: running ?? null, runningPerKey: runningPerKey ?? null })
          : Console.log(
            `limited ${name}: ${
              [
                running === undefined ? undefined : `${running} at once`,
                runningPerKey === undefined ? undefined : `${runningPerKey} per key at once`
              ].filter((s) => s !== undefined).join(", ")
            } (every worker within one rescue interval)`
          )
      })
    )
).pipe(Command.withDescription("set, clear or show the concurrency limits of job names at run time"))
