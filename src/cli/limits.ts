/**
 * `sqlane limit`: concurrency limits set at run time, over those of the job definitions. Each flag
 * changes its own number and leaves the other as it was; the command prints the run-time limits the
 * name has now.
 *
 * ```
 * sqlane limit                          # the run-time limits, and the slots held now
 * sqlane limit NAME N [--per-key K]     # at most N attempts of NAME at once (and K per key)
 * sqlane limit NAME --per-key K         # at most K attempts per key of NAME at once (N kept)
 * sqlane limit NAME --clear-running     # the definition's running limit again (per key kept)
 * sqlane limit NAME --clear-per-key     # the definition's per-key limit again (running kept)
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
import { InvalidLimit } from "../schema/Errors.js"
import * as Job from "../schema/Job.js"
import * as Admin from "../services/Admin.js"
import { warnIfUnknownName } from "./actions.js"
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

/** The run-time limits of `name` as one line: each number, or the definition's where none is set. */
const describeLimits = (name: string, l: Admin.RunTimeLimits) =>
  l.running === undefined && l.runningPerKey === undefined
    ? `${name} has no run-time limits now: the definition's apply (every worker within one rescue interval)`
    : `limited ${name}: ${l.running === undefined ? "the definition's running limit" : `${l.running} at once`}, ${
      l.runningPerKey === undefined ? "the definition's per-key limit" : `${l.runningPerKey} per key at once`
    } (every worker within one rescue interval)`

/** Both given: a usage error naming them. */
const either = (a: string, b: string) => new CliError({ message: `give either ${a} or ${b}, not both` })

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
    clearRunning: Options.boolean("clear-running").pipe(
      Options.withDescription("remove the run-time running limit: the definition's applies (per key kept)")
    ),
    clearPerKey: Options.boolean("clear-per-key").pipe(
      Options.withDescription("remove the run-time per-key limit: the definition's applies (running kept)")
    ),
    clear: Options.boolean("clear").pipe(Options.withDescription("remove the run-time limits: the definition's apply"))
  },
  (c) =>
    withAdmin(
      c,
      Effect.gen(function*() {
        const admin = yield* Admin.Admin
        const changes = Option.isSome(c.running) || Option.isSome(c.perKey) || c.clearRunning || c.clearPerKey
        if (Option.isNone(c.name)) {
          if (changes || c.clear) {
            return yield* new CliError({ message: "give the job name first: sqlane limit NAME N [--per-key K]" })
          }
          return yield* show(c)
        }
        const name = c.name.value
        if (c.clear) {
          if (changes) return yield* either("--clear", "limits")
          const changed = yield* admin.clearLimits(name)
          return yield* c.json
            ? printJson({ name, cleared: changed })
            : Console.log(changed ? `cleared the run-time limits of ${name}` : `${name} had no run-time limits`)
        }
        if (!changes) {
          return yield* new CliError({
            message: "give a limit: sqlane limit NAME N [--per-key K], --clear-running, --clear-per-key or --clear"
          })
        }
        if (Option.isSome(c.running) && c.clearRunning) return yield* either("N (the running limit)", "--clear-running")
        if (Option.isSome(c.perKey) && c.clearPerKey) return yield* either("--per-key", "--clear-per-key")
        // Only what is given changes: a number sets it, a --clear-… flag removes it (null), and the
        // other number stays as it was.
        const running = Option.isSome(c.running) ? c.running.value : c.clearRunning ? null : undefined
        const runningPerKey = Option.isSome(c.perKey) ? c.perKey.value : c.clearPerKey ? null : undefined
        const now = yield* admin.setLimits(name, { running, runningPerKey }).pipe(
          // Named as the command line has them (`--per-key`, not the option `runningPerKey`).
          Effect.catchIf(
            (e): e is InvalidLimit => e instanceof InvalidLimit && (e.option === "running" || e.option === "runningPerKey"),
            (e) =>
              new CliError({
                message: `${e.option === "running" ? "running" : "--per-key"} must be an integer from 1 to ${Job.maxLimit}, got ${
                  e.option === "running" ? running : runningPerKey
                }`
              })
          )
        )
        yield* warnIfUnknownName(name, "limited")
        yield* c.json
          ? printJson({ name, running: now.running ?? null, runningPerKey: now.runningPerKey ?? null })
          : Console.log(describeLimits(name, now))
      })
    )
).pipe(Command.withDescription("set, clear or show the concurrency limits of job names at run time"))
