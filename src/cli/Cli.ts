/**
 * The `sqlane` command line: look into a queue and act on it without writing SQL.
 *
 * ```
 * sqlane migrate [--dry-run]
 * sqlane status
 * sqlane jobs list [--name N] [--state S] [--limit N] [--before ID]
 * sqlane jobs show ID [--full]
 * sqlane retry ID… | sqlane retry --name N [--state dead|cancelled]
 * sqlane cancel ID…
 * sqlane pause NAME | sqlane resume NAME
 * sqlane prune
 * ```
 *
 * Every command takes `--database-url` (or `DATABASE_URL`: `postgres://…`, `mysql://…`,
 * `mariadb://…`), `--prefix` (or `SQLANE_PREFIX`, default `sqlane_`) and `--json`. Output is a
 * table by default and JSON with `--json`. An error prints one line to stderr and exits 1.
 *
 * @since 0.1.0
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as HelpDoc from "@effect/cli/HelpDoc"
import * as Options from "@effect/cli/Options"
import * as ValidationError from "@effect/cli/ValidationError"
import type * as SqlClient from "@effect/sql/SqlClient"
import * as Config from "effect/Config"
import * as Console from "effect/Console"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import { QueueLive } from "../layers/QueueLive.js"
import { JobNotFound } from "../schema/Errors.js"
import * as Admin from "../services/Admin.js"
import * as Migrations from "../services/Migrations.js"
import * as Pruner from "../services/Pruner.js"

/**
 * A usage or connection problem the CLI reports as one line.
 *
 * @since 0.1.0
 * @category errors
 */
export class CliError extends Schema.TaggedError<CliError>("sqlane/CliError")("CliError", {
  message: Schema.String
}) {}

// ---------------------------------------------------------------------------------------------
// Connection

/**
 * The URL with its password hidden, for messages: the user-info password and query parameters that
 * may carry a secret (`?password=…`, which the pg and mysql2 drivers read, `sslpassword`, `sslkey`…).
 */
const safeUrl = (url: URL) => {
  const copy = new URL(url.toString())
  if (copy.password) copy.password = "***"
  for (const key of Array.from(copy.searchParams.keys())) {
    if (/pass|secret|token|key|cert/i.test(key)) copy.searchParams.set(key, "***")
  }
  return copy.toString()
}

interface Target {
  readonly dialect: "pg" | "mysql"
  readonly url: URL
}

const parseUrl = (text: string): Effect.Effect<Target, CliError> =>
  Effect.gen(function*() {
    let url: URL
    try {
      url = new URL(text)
    } catch {
      return yield* new CliError({
        message: `invalid database URL: expected postgres://user@host:port/db or mysql://user@host:port/db`
      })
    }
    switch (url.protocol) {
      case "postgres:":
      case "postgresql:":
        return { dialect: "pg", url }
      case "mysql:":
      case "mariadb:": {
        const mysql = new URL(url.toString().replace(/^mariadb:/, "mysql:"))
        return { dialect: "mysql", url: mysql }
      }
      default:
        return yield* new CliError({
          message: `unsupported database URL scheme "${url.protocol}": use postgres://, postgresql://, mysql:// or mariadb://`
        })
    }
  })

/** The client of the URL's dialect; only that driver is loaded. */
const clientLayer = (target: Target): Layer.Layer<SqlClient.SqlClient, CliError> => {
  const layer = Layer.unwrapEffect(
    target.dialect === "pg"
      ? Effect.promise(() => import("@effect/sql-pg/PgClient")).pipe(Effect.map((PgClient) =>
        PgClient.layer({
          url: Redacted.make(target.url.toString()),
          maxConnections: 3,
          connectTimeout: "10 seconds",
          applicationName: "sqlane-cli"
        })
      ))
      : Effect.promise(() => import("@effect/sql-mysql2/MysqlClient")).pipe(Effect.map((MysqlClient) =>
        MysqlClient.layer({ url: Redacted.make(target.url.toString()), maxConnections: 3 })
      ))
  )
  return Layer.mapError(layer, (error) => {
    const cause = (error as { cause?: unknown }).cause
    const detail = cause instanceof Error ? cause.message || (cause as any).code : String(cause ?? error)
    return new CliError({ message: `cannot connect to ${safeUrl(target.url)}: ${detail}` })
  }) as Layer.Layer<SqlClient.SqlClient, CliError>
}

// ---------------------------------------------------------------------------------------------
// Shared options

const databaseUrl = Options.text("database-url").pipe(
  Options.withDescription("postgres://… or mysql://… (default: the DATABASE_URL environment variable)"),
  Options.withFallbackConfig(Config.string("DATABASE_URL")),
  Options.optional
)
const prefix = Options.text("prefix").pipe(
  Options.withDescription("table prefix (default: SQLANE_PREFIX or sqlane_)"),
  Options.withFallbackConfig(Config.string("SQLANE_PREFIX")),
  Options.withDefault("sqlane_")
)
const json = Options.boolean("json").pipe(Options.withDescription("print JSON instead of a table"))

const common = { databaseUrl, prefix, json }

interface Common {
  readonly databaseUrl: Option.Option<string>
  readonly prefix: string
  readonly json: boolean
}

const connect = (c: Common) =>
  Effect.gen(function*() {
    if (Option.isNone(c.databaseUrl) || c.databaseUrl.value.trim() === "") {
      return yield* new CliError({ message: "no database URL: pass --database-url or set DATABASE_URL" })
    }
    return clientLayer(yield* parseUrl(c.databaseUrl.value))
  })

/** Runs `body` against the database, after checking that the schema is fully migrated. */
const withAdmin = <A, E>(
  c: Common,
  body: Effect.Effect<A, E, Admin.Admin>
) =>
  Effect.gen(function*() {
    const client = yield* connect(c)
    // With migrate: false, QueueLive fails with SchemaNotMigrated when the tables are missing or behind.
    return yield* body.pipe(Effect.provide(QueueLive({ prefix: c.prefix, migrate: false })), Effect.provide(client))
  })

// ---------------------------------------------------------------------------------------------
// Output

const printJson = (value: unknown) => Console.log(JSON.stringify(value, null, 2))

const cell = (u: unknown): string => {
  if (u === undefined || u === null) return ""
  if (u instanceof Date) return u.toISOString()
  return String(u).replace(/\s+/g, " ")
}

/** A plain text table: a header row and left-aligned columns, long cells cut at 60 characters. */
const table = (header: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<unknown>>): string => {
  const cells = rows.map((r) => r.map((c) => {
    const s = cell(c)
    return s.length > 60 ? s.slice(0, 59) + "…" : s
  }))
  const widths = header.map((h, i) => Math.max(h.length, ...cells.map((r) => r[i]?.length ?? 0)))
  const line = (r: ReadonlyArray<string>) => r.map((c, i) => c.padEnd(widths[i])).join("  ").trimEnd()
  return [line(header), ...cells.map(line)].join("\n")
}

const age = (ms: number | undefined): string => {
  if (ms === undefined) return ""
  if (ms < 1000) return `${ms}ms`
  const s = Math.floor(ms / 1000)
  if (s < 60) return `${s}s`
  const m = Math.floor(s / 60)
  if (m < 60) return `${m}m${s % 60 ? `${s % 60}s` : ""}`
  const h = Math.floor(m / 60)
  if (h < 48) return `${h}h${m % 60 ? `${m % 60}m` : ""}`
  return `${Math.floor(h / 24)}d${h % 24 ? `${h % 24}h` : ""}`
}

const progressText = (p: Admin.Progress | undefined) =>
  p === undefined ? "" : p.message === undefined ? String(p.value) : `${p.value} ${p.message}`

const iso = (d: Date | undefined) => (d === undefined ? null : d.toISOString())

const summaryJson = (j: Admin.JobSummary) => ({
  id: j.id,
  name: j.name,
  state: j.state,
  attempts: j.attempts,
  priority: j.priority,
  runAt: iso(j.runAt),
  createdAt: iso(j.createdAt),
  claimedAt: iso(j.claimedAt),
  finishedAt: iso(j.finishedAt),
  workerId: j.workerId ?? null,
  lastError: j.lastError ?? null,
  progress: j.progress === undefined ? null : progressJson(j.progress)
})

const progressJson = (p: Admin.Progress) => ({
  value: p.value,
  message: p.message ?? null,
  attempt: p.attempt,
  at: p.at
})

// ---------------------------------------------------------------------------------------------
// Commands

const migrate = Command.make(
  "migrate",
  { ...common, dryRun: Options.boolean("dry-run").pipe(Options.withDescription("print the SQL, change nothing")) },
  (c) =>
    Effect.gen(function*() {
      const client = yield* connect(c)
      yield* Effect.gen(function*() {
        if (c.dryRun) {
          const pending = yield* Migrations.dryRun(c.prefix)
          if (c.json) return yield* printJson({ pending })
          if (pending.length === 0) return yield* Console.log(`-- the schema with prefix ${c.prefix} is up to date`)
          for (const m of pending) {
            yield* Console.log(`-- migration ${m.id}_${m.name}\n${m.sql.join("\n")}\n`)
          }
          return
        }
        const applied = yield* Migrations.run(c.prefix)
        const list = applied.map(([id, name]) => ({ id, name }))
        if (c.json) return yield* printJson({ applied: list })
        yield* Console.log(
          list.length === 0
            ? `the schema with prefix ${c.prefix} is up to date`
            : `applied ${list.map((m) => `${m.id}_${m.name}`).join(", ")}`
        )
      }).pipe(Effect.provide(client))
    })
).pipe(Command.withDescription("apply sqlane's migrations (--dry-run prints their SQL)"))

const status = Command.make("status", common, (c) =>
  withAdmin(
    c,
    Effect.gen(function*() {
      const admin = yield* Admin.Admin
      const s = yield* admin.status
      if (c.json) {
        return yield* printJson({
          names: s.names.map((n) => ({ ...n, oldestDueMs: n.oldestDueMs ?? null })),
          running: s.running.map(summaryJson)
        })
      }
      yield* Console.log(
        s.names.length === 0
          ? "no jobs"
          : table(
            ["NAME", "PENDING", "DUE", "RUNNING", "COMPLETED", "DEAD", "CANCELLED", "OLDEST DUE", "PAUSED"],
            s.names.map((n) => [
              n.name,
              n.pending,
              n.due,
              n.running,
              n.completed,
              n.dead,
              n.cancelled,
              age(n.oldestDueMs),
              n.paused ? "paused" : ""
            ])
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

const stateChoice = ["pending", "running", "completed", "dead", "cancelled"] as const

const jobsList = Command.make(
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

/** The most characters of a payload, result, message, stack or properties `jobs show` prints without `--full`. */
const shownLength = 4_096

/** `s` as `jobs show` prints it: cut at {@link shownLength} characters (unless `full`), saying how long it is. */
const clip = (s: string, full: boolean): string => {
  if (full || s.length <= shownLength) return s
  let cut = s.slice(0, shownLength)
  // Do not leave half a surrogate pair at the cut.
  if (/[\ud800-\udbff]$/.test(cut)) cut = cut.slice(0, -1)
  return `${cut}… (${s.length.toLocaleString("en-US")} characters; --full shows all)`
}

/** A text of several lines, each after `indent`. */
const indented = (s: string, indent: string) => s.split("\n").map((line) => indent + line).join("\n")

const jobsShow = Command.make(
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

const jobs = Command.make("jobs").pipe(
  Command.withDescription("list and inspect jobs"),
  Command.withSubcommands([jobsList, jobsShow])
)

/** `retry`/`cancel` check every id before changing any: an unknown one changes nothing, and says so. */
const nothingChanged = <A, E, R>(action: Effect.Effect<A, E | JobNotFound, R>) =>
  Effect.catchIf(
    action,
    (e): e is JobNotFound => e instanceof JobNotFound,
    (e) => new CliError({ message: `${e.message}: nothing changed` })
  )

/**
 * An attempt's error as `Tag: message`, the tag once: the stored message of a typed failure already
 * starts with its tag (`Boom: {…}`, see `describe`), a defect's with its name (`Error: nope`).
 */
const withTag = (tag: string | undefined, message: string) =>
  tag === undefined || message === tag || message.startsWith(`${tag}:`) ? message : `${tag}: ${message}`

/**
 * `--json`: one object per id, `{ id, changed, before, state }`: the state before the action and the
 * state it left (`pending` after a retry, `cancelled` after a cancel; unchanged jobs keep theirs).
 */
const actionOutput = (
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

const retry = Command.make(
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

const cancel = Command.make(
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

const pause = Command.make(
  "pause",
  { ...common, name: Args.text({ name: "name" }) },
  (c) =>
    withAdmin(
      c,
      Effect.gen(function*() {
        const admin = yield* Admin.Admin
        const changed = yield* admin.pause(c.name)
        // A name that no job has and no live worker handles is likely a typo; a deploy may still pause
        // a name before its first job, so it is paused all the same.
        const jobs = yield* Effect.option(admin.list({ name: c.name, limit: 1 }))
        const handled = yield* Effect.option(admin.handledNames)
        if (
          Option.isSome(jobs) && jobs.value.length === 0 && Option.isSome(handled) && !handled.value.has(c.name)
        ) {
          yield* Console.error(
            `sqlane: warning: no job named ${JSON.stringify(c.name)} is in the jobs table and no live worker ` +
              "handles it; paused it anyway (check the name)"
          )
        }
        yield* c.json
          ? printJson({ name: c.name, paused: true, changed })
          : Console.log(changed ? `paused ${c.name}` : `${c.name} was already paused`)
      })
    )
).pipe(Command.withDescription("stop claiming jobs of a name in every worker; running jobs finish"))

const resume = Command.make(
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

const durationOption = (name: string, fallback: string) =>
  Options.text(name).pipe(
    Options.withDescription(`keep ${name.replace(/^keep-/, "")} jobs this long (default ${fallback})`),
    Options.withDefault(fallback),
    Options.mapEffect((text) => {
      // "infinity" keeps that state forever, like `Duration.infinity` in QueueLive's retention.
      if (/^\s*(infinity|forever)\s*$/i.test(text)) return Effect.succeed(Duration.infinity)
      // A bare 0 (as `retention: { completed: 0 }` in QueueLive) needs no unit.
      if (/^\s*0+\s*$/.test(text)) return Effect.succeed(Duration.zero)
      // Duration reads "-5 days" as zero, which would delete every job of that state: refused.
      const d = /^\s*-/.test(text) ? Option.none() : Duration.decodeUnknown(text)
      return Option.isSome(d)
        ? Effect.succeed(d.value)
        : Effect.fail(ValidationError.invalidValue(
          HelpDoc.p(
            `--${name}: not a duration: ${JSON.stringify(text)} (e.g. "1 day", "12 hours", "0 seconds", "infinity")`
          )
        ))
    })
  )

const prune = Command.make(
  "prune",
  {
    ...common,
    keepCompleted: durationOption("keep-completed", "1 day"),
    keepDead: durationOption("keep-dead", "7 days"),
    keepCancelled: durationOption("keep-cancelled", "7 days"),
    batchSize: Options.integer("batch-size").pipe(
      Options.withDescription("the most jobs one statement deletes (1–50000)"),
      Options.withDefault(1000)
    )
  },
  (c) =>
    Effect.gen(function*() {
      if (c.batchSize < 1 || c.batchSize > Pruner.maxBatchSize) {
        return yield* new CliError({
          message: `--batch-size must be between 1 and ${Pruner.maxBatchSize}, got ${c.batchSize}`
        })
      }
      const client = yield* connect(c)
      const result = yield* Effect.flatMap(Admin.Admin, (admin) => admin.prune).pipe(
        Effect.provide(QueueLive({
          prefix: c.prefix,
          migrate: false,
          retention: { completed: c.keepCompleted, dead: c.keepDead, cancelled: c.keepCancelled },
          pruneBatchSize: c.batchSize
        })),
        Effect.provide(client)
      )
      if (c.json) return yield* printJson(result)
      yield* Console.log(
        result.ran
          ? `deleted ${result.deleted.completed} completed, ${result.deleted.dead} dead, ${result.deleted.cancelled} cancelled job(s) in ${result.batches} batch(es)`
          : "another pruner is running; nothing done"
      )
    })
).pipe(Command.withDescription("delete finished jobs older than their retention, in batches"))

/**
 * The `sqlane` command and its subcommands.
 *
 * @since 0.1.0
 * @category commands
 */
export const command = Command.make("sqlane").pipe(
  Command.withDescription("operate a sqlane job queue on PostgreSQL, MySQL or MariaDB"),
  Command.withSubcommands([migrate, status, jobs, retry, cancel, pause, resume, prune])
)

/**
 * Runs the CLI on `argv` (as `process.argv`: the first two entries are skipped).
 *
 * @since 0.1.0
 * @category commands
 */
export const run = Command.run(command, { name: "sqlane", version: "0.1.0" })

/**
 * One line describing a failure, for stderr.
 *
 * @since 0.1.0
 * @category errors
 */
export const describeError = (error: unknown): string => {
  if (typeof error === "object" && error !== null) {
    const e = error as { _tag?: string; message?: unknown; cause?: unknown }
    if (e._tag === "SqlError") {
      const cause = e.cause as { message?: string; code?: string } | undefined
      return `database error: ${cause?.message ?? String(e.message)}`.replace(/\s+/g, " ")
    }
    if (typeof e.message === "string" && e.message.length > 0) return e.message.replace(/\s+/g, " ")
    if (e._tag !== undefined) return e._tag
  }
  return String(error).replace(/\s+/g, " ")
}
