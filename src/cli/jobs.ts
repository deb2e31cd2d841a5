/**
 * `sqlane status`, `sqlane jobs list` and `sqlane jobs show`: what is in the queue.
 *
 * @since 0.1.0
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
import { age, clip, indented, printJson, progressJson, progressText, shownLength, summaryJson, table, withTag } from "./output.js"

export const status = Command.make("status", common, (c) =>
  withAdmin(
    c,
    Effect.gen(function*() {
      const admin = yield* Admin.Admin
      const s = yield* admin.status
      if (c.json) {
        return yield* printJson({
          names: s.names.map((n) => ({ ...n, oldestDueMs: n.oldestDueMs ?? null, limits: limitsJson(n.limits) })),
          running: s.running.map(summaryJson)
        })
      }
      yield* Console.log(
        s.names.length === 0
          ? "no jobs"
          : table(
            ["NAME", "PENDING", "DUE", "RUNNING", "COMPLETED", "DEAD", "CANCELLED", "OLDEST DUE", "PAUSED", "LIMITS"],
            s.names.map((n) => [
              n.name,
              n.pending,
              n.due,
              n.running,
              n.completed,
              n.dead,
              n.cancelled,
              age(n.oldestDueMs),
              n.paused ? "paused" : "",
              limitsText(n.limits)
            ]),
            // The limits in full: a name with every kind of limit needs about 100 characters.
            [undefined, undefined, undefined, undefined, undefined, undefined, undefined, undefined, undefined, 160]
          )
      )
      if (s.running.length > 0) {
        yield* Console.log(
          "\n" + table(
            ["RUNNING ID", "NAME", "ATTEMPT", "SINCE", "PROGRESS"],
            s.running.map((j) => [j.id, j.name, j.attempts, j.claimedAt, progressText(j.progress)])
          )
        )
      }
    })
  )).pipe(Command.withDescription("per job name: pending, due, running, completed, dead, cancelled, oldest due age"))

/** A name's limits in `status --json`: its rate window with times as ISO strings and `null` for none. */
const limitsJson = (l: Admin.NameLimitStatus | undefined) =>
  l === undefined ? null : {
    ...l,
    rateWindow: l.rateWindow === undefined ? null : {
      starts: l.rateWindow.starts ?? null,
      nextWindowAt: l.rateWindow.nextWindowAt.toISOString(),
      heldUntil: l.rateWindow.heldUntil?.toISOString() ?? null
    }
  }

/**
 * A name's limits in the status table: `3/20` (slots in use / limit), `2 per key (5 keys)`, the
 * rates with the starts of the current window (`4/10 per 1000 ms`) and when the next one begins
 * (`next window in 350ms`, `held, next window in 2m5s`), `(run time)`.
 */
const limitsText = (l: Admin.NameLimitStatus | undefined) => {
  if (l === undefined) return ""
  const w = l.rateWindow
  return [
    l.running === undefined ? undefined : `${l.inUse}/${l.running}`,
    l.runningPerKey === undefined ? undefined : `${l.runningPerKey} per key (${l.keysInUse} in use)`,
    l.rate === undefined ? undefined : `${w?.starts ?? 0}/${l.rate.starts} per ${l.rate.perMs} ms`,
    l.ratePerKey === undefined ? undefined : `${l.ratePerKey.starts} per ${l.ratePerKey.perMs} ms per key`,
    w === undefined
      ? undefined
      : `(${w.heldUntil === undefined ? "" : "held, "}next window in ${age(Math.max(0, w.nextWindowAt.getTime() - Date.now()))})`,
    l.setAtRunTime ? "(run time)" : undefined
  ].filter((s) => s !== undefined).join(" ")
}

export const stateChoice = ["pending", "running", "completed", "dead", "cancelled"] as const

export const jobsList = Command.make(
  "list",
  {
    ...common,
    name: Options.text("name").pipe(Options.withDescription("only jobs of this name"), Options.optional),
    state: Options.choice("state", stateChoice).pipe(Options.withDescription("only jobs in this state"), Options.optional),
    limit: Options.integer("limit").pipe(Options.withDescription("at most this many (1–10000)"), Options.withDefault(50)),
    before: Options.text("before").pipe(Options.withDescription("only ids below this one (paging)"), Options.optional)
  },
  (c) =>
    withAdmin(
      c,
      Effect.gen(function*() {
        if (c.limit < 1 || c.limit > 10_000) {
          return yield* new CliError({ message: `--limit must be between 1 and 10000, got ${c.limit}` })
        }
        if (Option.isSome(c.before) && !/^\d{1,19}$/.test(c.before.value)) {
          return yield* new CliError({ message: `--before must be a job id, got ${JSON.stringify(c.before.value)}` })
        }
        const admin = yield* Admin.Admin
        const jobs = yield* admin.list({
          name: Option.getOrUndefined(c.name),
          state: Option.getOrUndefined(c.state),
          limit: c.limit,
          beforeId: Option.getOrUndefined(c.before)
        })
        if (c.json) return yield* printJson(jobs.map(summaryJson))
        yield* Console.log(
          jobs.length === 0 ? "no jobs" : table(
            ["ID", "NAME", "STATE", "ATTEMPTS", "RUN AT", "FINISHED AT", "PROGRESS", "LAST ERROR"],
            jobs.map((j) => [j.id, j.name, j.state, j.attempts, j.runAt, j.finishedAt, progressText(j.progress), j.lastError])
          )
        )
      })
    )
).pipe(Command.withDescription("list jobs, newest first"))

export const jobsShow = Command.make(
  "show",
  {
    ...common,
    id: Args.text({ name: "id" }),
    full: Options.boolean("full").pipe(
      Options.withDescription(`print payload, result and errors whole (else each is cut at ${shownLength} characters)`)
    )
  },
  (c) =>
    withAdmin(
      c,
      Effect.gen(function*() {
        const admin = yield* Admin.Admin
        const { job, progress } = yield* admin.show(c.id)
        const out = {
          id: job.id,
          name: job.name,
          state: job.state,
          priority: job.priority,
          attempts: job.attempts,
          runAt: job.runAt.toISOString(),
          createdAt: job.createdAt.toISOString(),
          claimedAt: Option.getOrNull(Option.map(job.claimedAt, (d) => d.toISOString())),
          finishedAt: Option.getOrNull(Option.map(job.finishedAt, (d) => d.toISOString())),
          lastError: Option.getOrNull(job.lastError),
          progress: Option.getOrNull(Option.map(progress, progressJson)),
          payload: job.payload,
          errors: job.errors.map((e) => ({ ...e })),
          result: Option.getOrNull(job.result)
        }
        if (c.json) return yield* printJson(out)
        const lines = [
          `id           ${out.id}`,
          `name         ${out.name}`,
          `state        ${out.state}`,
          `priority     ${out.priority}`,
          `attempts     ${out.attempts}`,
          `run at       ${out.runAt}`,
          `created at   ${out.createdAt}`,
          `claimed at   ${out.claimedAt ?? ""}`,
          `finished at  ${out.finishedAt ?? ""}`,
          `progress     ${
            Option.match(progress, {
              onNone: () => "",
              onSome: (p) => `${progressText(p)} (attempt ${p.attempt}, ${p.at})`
            })
          }`,
          `payload      ${clip(JSON.stringify(out.payload) ?? "", c.full)}`,
          `result       ${out.result === null ? "" : clip(JSON.stringify(out.result) ?? "", c.full)}`,
          `errors       ${out.errors.length === 0 ? "none" : ""}`,
          ...out.errors.flatMap((e) => [
            `  #${e.attempt} ${e.at} ${e.kind}: ${clip(withTag(e.tag, e.message), c.full)}`,
            ...(e.properties === undefined ? [] : [`    properties ${clip(JSON.stringify(e.properties), c.full)}`]),
            ...(e.stack === undefined ? [] : ["    stack", indented(clip(e.stack, c.full), "      ")])
          ])
        ]
        yield* Console.log(lines.join("\n"))
      })
    )
).pipe(Command.withDescription("one job: payload, attempts, each error, result, progress"))

export const jobs = Command.make("jobs").pipe(
  Command.withDescription("list and inspect jobs"),
  Command.withSubcommands([jobsList, jobsShow])
)
