/**
 * `sqlane migrate` and `sqlane prune`: the schema and retention.
 *
 * @since 0.1.0
 */
import * as Command from "@effect/cli/Command"
import * as HelpDoc from "@effect/cli/HelpDoc"
import * as Options from "@effect/cli/Options"
import * as ValidationError from "@effect/cli/ValidationError"
import * as Console from "effect/Console"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { QueueLive } from "../layers/QueueLive.js"
import * as Admin from "../services/Admin.js"
import * as Migrations from "../services/Migrations.js"
import * as Pruner from "../services/Pruner.js"
import { CliError } from "./CliError.js"
import { common, connect } from "./connection.js"
import { printJson } from "./output.js"

export const migrate = Command.make(
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

export const durationOption = (name: string, fallback: string) =>
  Options.text(name).pipe(
    Options.withDescription(`keep ${name.replace(/^keep-/, "")} jobs this long (default ${fallback})`),
    Options.withDefault(fallback),
    Options.mapEffect((text) => {
      // "infinity" keeps that state forever, like `Duration.infinity` in QueueLive's retention.
      if (/^\s*(infinity|forever)\s*$/i.test(text)) return Effect.succeed(Duration.infinity)
      // A bare 0 (as `retention: { completed: 0 }` in QueueLive) needs no unit.
      if (/^\s*0+\s*$/.test(text)) return Effect.succeed(Duration.zero)
      // Duration reads "-5 days" as zero, which would delete every job of that state: refused.
      const negative = /^\s*-/.test(text)
      const d = negative ? Option.none() : Duration.decodeUnknown(text)
      return Option.isSome(d)
        ? Effect.succeed(d.value)
        : Effect.fail(ValidationError.invalidValue(
          HelpDoc.p(
            `--${name}: ${negative ? "must not be negative" : "not a duration"}: ${
              JSON.stringify(text)
            } (e.g. "1 day", "12 hours", "0 seconds", "infinity")`
          )
        ))
    })
  )

export const prune = Command.make(
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
          ? `deleted ${result.deleted.completed} completed, ${result.deleted.dead} dead, ${result.deleted.cancelled} cancelled job(s) in ${result.batches} batch(es)` +
            (result.rateRows > 0 ? `, and ${result.rateRows} old rate window row(s)` : "") +
            (result.statsRows > 0 ? `, and ${result.statsRows} old per-minute stats row(s)` : "")
          : "another pruner is running; nothing done"
      )
    })
).pipe(Command.withDescription("delete finished jobs older than their retention, and old rate window and stats rows, in batches"))
