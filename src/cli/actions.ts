/**
 * `sqlane retry`, `cancel`, `pause` and `resume`: acting on jobs and job names.
 *
 * @since 0.1.0
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { JobNotFound } from "../schema/Errors.js"
import * as Admin from "../services/Admin.js"
import { CliError } from "./CliError.js"
import { type Common, common, withAdmin } from "./connection.js"
import { printJson, table } from "./output.js"

/** `retry`/`cancel` check every id before changing any: an unknown one changes nothing, and says so. */
export const nothingChanged = <A, E, R>(action: Effect.Effect<A, E | JobNotFound, R>) =>
  Effect.catchIf(
    action,
    (e): e is JobNotFound => e instanceof JobNotFound,
    (e) => new CliError({ message: `${e.message}: nothing changed` })
  )

/**
 * `--json`: one object per id, `{ id, changed, before, state }`: the state before the action and the
 * state it left (`pending` after a retry, `cancelled` after a cancel; unchanged jobs keep theirs).
 */
export const actionOutput = (
  c: Common,
  verb: string,
  stateAfter: "pending" | "cancelled",
  results: ReadonlyArray<Admin.ActionResult>
) =>
  c.json
    ? printJson(results.map((r) => ({ id: r.id, changed: r.changed, before: r.state, state: r.changed ? stateAfter : r.state })))
    : Console.log(table(
      ["ID", "BEFORE", "RESULT"],
      results.map((r) => [r.id, r.state, r.changed ? verb : `unchanged (${r.state})`])
    ))

export const retry = Command.make(
  "retry",
  {
    ...common,
    ids: Args.text({ name: "id" }).pipe(Args.repeated),
    name: Options.text("name").pipe(Options.withDescription("retry every job of this name…"), Options.optional),
    state: Options.choice("state", ["dead", "cancelled"] as const).pipe(
      Options.withDescription("…in this state (default dead)"),
      Options.withDefault("dead" as const)
    )
  },
  (c) =>
    withAdmin(
      c,
      Effect.gen(function*() {
        const admin = yield* Admin.Admin
        if (Option.isSome(c.name)) {
          if (c.ids.length > 0) return yield* new CliError({ message: "give either job ids or --name, not both" })
          const n = yield* admin.retryAll(c.name.value, c.state)
          return yield* c.json
            ? printJson({ name: c.name.value, state: c.state, retried: n })
            : Console.log(`retried ${n} ${c.state} job(s) of ${c.name.value}`)
        }
        if (c.ids.length === 0) return yield* new CliError({ message: "give job ids, or --name NAME [--state dead|cancelled]" })
        yield* actionOutput(c, "retried", "pending", yield* nothingChanged(admin.retry(c.ids)))
      })
    )
).pipe(Command.withDescription("put dead or cancelled jobs back to pending with fresh attempts"))

export const cancel = Command.make(
  "cancel",
  { ...common, ids: Args.text({ name: "id" }).pipe(Args.atLeast(1)) },
  (c) =>
    withAdmin(
      c,
      Effect.gen(function*() {
        const admin = yield* Admin.Admin
        yield* actionOutput(c, "cancelled", "cancelled", yield* nothingChanged(admin.cancel(c.ids)))
      })
    )
).pipe(Command.withDescription("cancel pending or running jobs (running handlers are interrupted)"))

/**
 * Warns on stderr (`sqlane: warning: no job named "…" …; <done> it anyway (check the name)`) when no
 * job of `name` is in the jobs table and no worker row names it among its handlers: likely a typo.
 * A deploy may still pause or limit a name before its first job, so the command goes on. A failed
 * look-up warns nothing.
 */
export const warnIfUnknownName = (name: string, done: string) =>
  Effect.gen(function*() {
    const admin = yield* Admin.Admin
    const jobs = yield* Effect.option(admin.list({ name, limit: 1 }))
    const handled = yield* Effect.option(admin.handledNames)
    if (Option.isSome(jobs) && jobs.value.length === 0 && Option.isSome(handled) && !handled.value.has(name)) {
      yield* Console.error(
        `sqlane: warning: no job named ${JSON.stringify(name)} is in the jobs table and no live worker ` +
          `handles it; ${done} it anyway (check the name)`
      )
    }
  })

/**
 * Warns on stderr when workers handle `name` but none of their definitions gives its jobs a
 * concurrency key (`limits.key`): a per-key limit holds back only jobs enqueued with a key. A
 * failed look-up warns nothing.
 */
export const warnIfNoKey = (name: string, option: string) =>
  Effect.gen(function*() {
    const admin = yield* Admin.Admin
    const handled = yield* Effect.option(admin.handledNames)
    const keyed = yield* Effect.option(admin.keyedNames)
    if (Option.isSome(handled) && handled.value.has(name) && Option.isSome(keyed) && !keyed.value.has(name)) {
      yield* Console.error(
        `sqlane: warning: no worker's definition of ${JSON.stringify(name)} has a concurrency key (limits.key): ` +
          `${option} holds back only jobs enqueued with a key; set it anyway`
      )
    }
  })

export const pause = Command.make(
  "pause",
  { ...common, name: Args.text({ name: "name" }) },
  (c) =>
    withAdmin(
      c,
      Effect.gen(function*() {
        const admin = yield* Admin.Admin
        const changed = yield* admin.pause(c.name)
        yield* warnIfUnknownName(c.name, "paused")
        yield* c.json
          ? printJson({ name: c.name, paused: true, changed })
          : Console.log(changed ? `paused ${c.name}` : `${c.name} was already paused`)
      })
    )
).pipe(Command.withDescription("stop claiming jobs of a name in every worker; running jobs finish"))

export const resume = Command.make(
  "resume",
  { ...common, name: Args.text({ name: "name" }) },
  (c) =>
    withAdmin(
      c,
      Effect.gen(function*() {
        const changed = yield* (yield* Admin.Admin).resume(c.name)
        yield* c.json
          ? printJson({ name: c.name, paused: false, changed })
          : Console.log(changed ? `resumed ${c.name}` : `${c.name} was not paused`)
      })
    )
).pipe(Command.withDescription("claim jobs of a paused name again"))
