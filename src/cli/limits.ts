/**
 * `sqlane limit`: concurrency and rate limits set at run time, over those of the job definitions.
 * Each flag changes its own limit and leaves the others as they were; the command prints the
 * run-time limits the name has now.
 *
 * ```
 * sqlane limit                          # the run-time limits, and the slots held now
 * sqlane limit NAME N [--per-key K]     # at most N attempts of NAME at once (and K per key)
 * sqlane limit NAME --per-key K         # at most K attempts per key of NAME at once (N kept)
 * sqlane limit NAME --rate 100/1m       # at most 100 attempts of NAME start per minute
 * sqlane limit NAME --rate-per-key 10/1s  # at most 10 attempts per key start per second
 * sqlane limit NAME --clear-running     # the definition's running limit again (the others kept)
 * sqlane limit NAME --clear-per-key     # the definition's per-key limit again
 * sqlane limit NAME --clear-rate        # the definition's rate again
 * sqlane limit NAME --clear-rate-per-key  # the definition's per-key rate again
 * sqlane limit NAME --clear             # the definition's limits again, all of them
 * sqlane limit NAME --lift-holds        # lift the holds handlers asked for with RateLimited
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
import { warnIfNoKey, warnIfUnknownName } from "./actions.js"
import { CliError } from "./CliError.js"
import { common, withAdmin } from "./connection.js"
import { printJson, table } from "./output.js"
import { formatRate, parseRate, rateForm } from "./rateText.js"

const show = (c: { readonly json: boolean }) =>
  Effect.gen(function*() {
    const limits = yield* (yield* Admin.Admin).limits
    if (c.json) return yield* printJson(limits)
    if (limits.length === 0) return yield* Console.log("no limits set at run time (job definitions may have their own)")
    yield* Console.log(table(
      ["NAME", "RUNNING", "PER KEY", "RATE", "RATE PER KEY", "IN USE", "KEYS IN USE", "BUSIEST KEY", "SET AT"],
      limits.map((l) => [
        l.name,
        l.running ?? "(definition)",
        l.runningPerKey ?? "(definition)",
        l.rate === undefined ? "(definition)" : formatRate(l.rate),
        l.ratePerKey === undefined ? "(definition)" : formatRate(l.ratePerKey),
        l.inUse.running,
        l.inUse.keys,
        l.inUse.busiestKey === undefined ? "" : `${l.inUse.busiestKey} (${l.inUse.busiestKeyRunning})`,
        l.updatedAt.toISOString()
      ])
    ))
  })

/**
 * The run-time limits of `name` as one line: each limit, or the definition's where none is set (the
 * rates only when one of them is set at run time).
 */
const describeLimits = (name: string, l: Admin.RunTimeLimits) => {
  if (l.running === undefined && l.runningPerKey === undefined && l.rate === undefined && l.ratePerKey === undefined) {
    return `${name} has no run-time limits now: the definition's apply (every worker within one rescue interval)`
  }
  const parts = [
    l.running === undefined ? "the definition's running limit" : `${l.running} at once`,
    l.runningPerKey === undefined ? "the definition's per-key limit" : `${l.runningPerKey} per key at once`
  ]
  if (l.rate !== undefined || l.ratePerKey !== undefined) {
    parts.push(
      l.rate === undefined ? "the definition's rate" : `${formatRate(l.rate)} (starts per period)`,
      l.ratePerKey === undefined ? "the definition's per-key rate" : `${formatRate(l.ratePerKey)} per key`
    )
  }
  return `limited ${name}: ${parts.join(", ")} (every worker within one rescue interval)`
}

/** A limit typed as decimal digits, from 1 to `Job.maxLimit`; else a usage error naming the flag and what was typed. */
const wholeNumber = (flag: string, typed: string) => {
  const n = /^[0-9]{1,6}$/.test(typed) ? Number(typed) : NaN
  return n >= 1 && n <= Job.maxLimit
    ? Effect.succeed(n)
    : Effect.fail(
      new CliError({ message: `${flag} must be an integer from 1 to ${Job.maxLimit}, got ${typed}` })
    )
}

/** Both given: a usage error naming them. */
const either = (a: string, b: string) => new CliError({ message: `give either ${a} or ${b}, not both` })

/** A `--rate` or `--rate-per-key` that is not a rate: a usage error naming the flag and what was typed. */
const badRate = (flag: string, typed: string) =>
  new CliError({
    message: `${flag} must be ${rateForm}, with STARTS from 1 to ${Job.maxRateStarts} and PERIOD from 1ms to 366d ` +
      `in whole milliseconds; got ${JSON.stringify(typed)}`
  })

/** A rate flag as `Admin.setLimits` takes it: its rate, `null` (its clear flag) or undefined (neither). */
const rateChange = (flag: string, typed: Option.Option<string>, clear: boolean) =>
  Effect.gen(function*() {
    if (Option.isSome(typed) && clear) return yield* either(flag, `--clear-${flag.slice(2)}`)
    if (clear) return null
    if (Option.isNone(typed)) return undefined
    const rate = parseRate(typed.value)
    if (rate === undefined) return yield* badRate(flag, typed.value)
    return rate
  })

/** The command's flags, as the messages name them, by `InvalidLimit`'s `option`. */
const flags: Readonly<Record<string, string>> = {
  running: "running",
  runningPerKey: "--per-key",
  rate: "--rate",
  ratePerKey: "--rate-per-key"
}

export const limit = Command.make(
  "limit",
  {
    ...common,
    name: Args.text({ name: "name" }).pipe(Args.optional),
    // Read as text: the integer parser also takes `0x10` and `1e3`.
    running: Args.text({ name: "running" }).pipe(
      Args.withDescription("at most this many attempts of the name at once, in every process"),
      Args.optional
    ),
    perKey: Options.text("per-key").pipe(
      Options.withDescription("at most this many attempts of one concurrency key at once"),
      Options.optional
    ),
    rate: Options.text("rate").pipe(
      Options.withDescription(
        "at most STARTS attempts of the name start per PERIOD, in every process: 100/1m (units ms, s, m, h, d, w)"
      ),
      Options.optional
    ),
    ratePerKey: Options.text("rate-per-key").pipe(
      Options.withDescription("at most STARTS attempts of one concurrency key start per PERIOD: 10/1s"),
      Options.optional
    ),
    clearRunning: Options.boolean("clear-running").pipe(
      Options.withDescription("remove the run-time running limit: the definition's applies (the others kept)")
    ),
    clearPerKey: Options.boolean("clear-per-key").pipe(
      Options.withDescription("remove the run-time per-key limit: the definition's applies (the others kept)")
    ),
    clearRate: Options.boolean("clear-rate").pipe(
      Options.withDescription("remove the run-time rate: the definition's applies (the others kept)")
    ),
    clearRatePerKey: Options.boolean("clear-rate-per-key").pipe(
      Options.withDescription("remove the run-time per-key rate: the definition's applies (the others kept)")
    ),
    clear: Options.boolean("clear").pipe(
      Options.withDescription("remove every run-time limit of the name: the definition's apply")
    ),
    liftHolds: Options.boolean("lift-holds").pipe(
      Options.withDescription("lift the holds of the name and its keys that handlers asked for with RateLimited")
    )
  },
  (c) =>
    withAdmin(
      c,
      Effect.gen(function*() {
        const admin = yield* Admin.Admin
        const changes = Option.isSome(c.running) || Option.isSome(c.perKey) || Option.isSome(c.rate) ||
          Option.isSome(c.ratePerKey) || c.clearRunning || c.clearPerKey || c.clearRate || c.clearRatePerKey
        if (Option.isNone(c.name)) {
          if (changes || c.clear) {
            return yield* new CliError({ message: "give the job name first: sqlane limit NAME N [--per-key K] [--rate S/P]" })
          }
          return yield* show(c)
        }
        const name = c.name.value
        if (c.liftHolds) {
          if (changes || c.clear) return yield* either("--lift-holds", "a change of the limits")
          const lifted = yield* admin.liftHolds(name)
          return yield* c.json
            ? printJson({ name, lifted })
            : Console.log(lifted === 0 ? `${name} had no holds` : `lifted ${lifted} hold${lifted === 1 ? "" : "s"} of ${name}`)
        }
        if (c.clear) {
          if (changes) return yield* either("--clear", "limits")
          const changed = yield* admin.clearLimits(name)
          return yield* c.json
            ? printJson({ name, cleared: changed })
            : Console.log(changed ? `cleared the run-time limits of ${name}` : `${name} had no run-time limits`)
        }
        if (!changes) {
          return yield* new CliError({
            message: "give a limit: sqlane limit NAME N [--per-key K] [--rate S/P] [--rate-per-key S/P], " +
              "--clear-running, --clear-per-key, --clear-rate, --clear-rate-per-key or --clear"
          })
        }
        if (Option.isSome(c.running) && c.clearRunning) return yield* either("N (the running limit)", "--clear-running")
        if (Option.isSome(c.perKey) && c.clearPerKey) return yield* either("--per-key", "--clear-per-key")
        // Only what is given changes: a value sets it, a --clear-… flag removes it (null), and the
        // others stay as they were.
        const running = Option.isSome(c.running) ? yield* wholeNumber("running", c.running.value) : c.clearRunning ? null : undefined
        const runningPerKey = Option.isSome(c.perKey) ? yield* wholeNumber("--per-key", c.perKey.value) : c.clearPerKey ? null : undefined
        const rate = yield* rateChange("--rate", c.rate, c.clearRate)
        const ratePerKey = yield* rateChange("--rate-per-key", c.ratePerKey, c.clearRatePerKey)
        const now = yield* admin.setLimits(name, { running, runningPerKey, rate, ratePerKey }).pipe(
          // Named as the command line has them (`--per-key`, not the option `runningPerKey`).
          Effect.catchIf(
            (e): e is InvalidLimit => e instanceof InvalidLimit && e.option in flags,
            (e) =>
              e.option === "rate" || e.option === "ratePerKey"
                ? badRate(flags[e.option], Option.getOrElse(e.option === "rate" ? c.rate : c.ratePerKey, () => ""))
                : new CliError({
                  message: `${flags[e.option]} must be an integer from 1 to ${Job.maxLimit}, got ${
                    e.option === "running" ? running : runningPerKey
                  }`
                })
          )
        )
        yield* warnIfUnknownName(name, "limited")
        if (typeof runningPerKey === "number") yield* warnIfNoKey(name, "--per-key")
        if (ratePerKey !== undefined && ratePerKey !== null) yield* warnIfNoKey(name, "--rate-per-key")
        yield* c.json
          ? printJson({
            name,
            running: now.running ?? null,
            runningPerKey: now.runningPerKey ?? null,
            rate: now.rate ?? null,
            ratePerKey: now.ratePerKey ?? null
          })
          : Console.log(describeLimits(name, now))
      })
    )
).pipe(Command.withDescription("set, clear or show the concurrency and rate limits of job names at run time"))
