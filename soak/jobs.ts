/**
 * The soak's job kinds, shared by the driver (which enqueues them) and the worker processes (which
 * run them), and what each one must end as.
 *
 * Every handler that succeeds records its run in `soak_ledger` in a transaction of its own:
 * `(job_id, attempt, worker_pid, started_us, finished_us, mutex_key, limit_key, rate_key, claimed_us)`,
 * times in µs of the machine's wall clock. A failing attempt records nothing. `claimed_us` (the
 * `rated` kind only) is the attempt's `claimed_at` as its job row holds it while the handler runs: the
 * instant of the claim, whose rate window the start counts in.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import { Job } from "../src/index.js"

/** Microseconds since the epoch, comparable across the processes of this machine. */
export const nowUs = () => Math.round((performance.timeOrigin + performance.now()) * 1000)

const retry = Job.attempts(20, Schedule.spaced("200 millis").pipe(Schedule.jittered))
export class Designed extends Schema.TaggedError<Designed>()("Designed", { message: Schema.String }) {}

const Seq = Schema.Struct({ seq: Schema.Number })

/** Records its run and ends: the bulk of the soak. */
export const Quick = Job.make("soak-quick", { payload: Seq, retry })
/** One of 8 mutex keys; runs 10–40 ms. No two runs of one key may overlap. */
export const Mutex = Job.make("soak-mutex", {
  payload: Schema.Struct({ seq: Schema.Number, key: Schema.String }),
  retry,
  mutexKey: (p) => p.key
})
/** The limits of the `limited` kind: 8 at once in all, 3 per key. */
export const limitedLimits = { running: 8, runningPerKey: 3 } as const
/** At most 3 running per key (of 4 keys) and 8 in all; runs 10–40 ms. No instant may have more. */
export const Limited = Job.make("soak-limited", {
  payload: Schema.Struct({ seq: Schema.Number, key: Schema.String }),
  retry,
  limits: { ...limitedLimits, key: (p) => p.key }
})
/** The rates of the `rated` kind: 10 starts a second in all, 2 per key per half second. */
export const ratedRates = {
  rate: { starts: 10, per: "1 second", perUs: 1_000_000 },
  ratePerKey: { starts: 2, per: "500 millis", perUs: 500_000 }
} as const
/** At most 10 starts per 1 s window and 2 per key (of 4 keys) per 0.5 s window. No window may have more. */
export const Rated = Job.make("soak-rated", {
  payload: Schema.Struct({ seq: Schema.Number, key: Schema.String }),
  retry,
  limits: {
    key: (p) => p.key,
    rate: { starts: ratedRates.rate.starts, per: ratedRates.rate.per },
    ratePerKey: { starts: ratedRates.ratePerKey.starts, per: ratedRates.ratePerKey.per }
  }
})
/** Enqueued three times at once with the key `soak:u:<seq>`, guarded in every state: one row per key. */
export const Unique = Job.make("soak-unique", { payload: Seq, retry })
/** Enqueued with a delay of 1–15 s. */
export const Delayed = Job.make("soak-delayed", { payload: Seq, retry })
/** Fails its first two attempts, then succeeds. */
export const Flaky = Job.make("soak-flaky", { payload: Seq, retry, failure: Designed })
/** Always fails; 3 attempts, then dead. */
export const Poison = Job.make("soak-poison", {
  payload: Seq,
  failure: Designed,
  retry: Job.attempts(3, Schedule.spaced("100 millis"))
})
/** Times out (300 ms) on its first attempt by sleeping 5 s, then succeeds. */
export const Timeout = Job.make("soak-timeout", { payload: Seq, retry, timeout: "300 millis" })

export type Kind = "quick" | "mutex" | "limited" | "rated" | "unique" | "delayed" | "flaky" | "poison" | "timeout"

/** The share of each kind among the soak's jobs (sums to 1). */
export const mix: ReadonlyArray<readonly [Kind, number]> = [
  ["quick", 0.41],
  ["mutex", 0.12],
  ["limited", 0.08],
  ["rated", 0.06],
  ["unique", 0.1],
  ["delayed", 0.06],
  ["flaky", 0.09],
  ["poison", 0.04],
  ["timeout", 0.04]
]

export const jobOf = {
  quick: Quick,
  mutex: Mutex,
  limited: Limited,
  rated: Rated,
  unique: Unique,
  delayed: Delayed,
  flaky: Flaky,
  poison: Poison,
  timeout: Timeout
} as const

export const names = Object.values(jobOf).map((j) => j.name)

/** How a job of each kind must end: its state, and (for dead letters) its exact attempt count. */
export const expected: Record<Kind, { readonly state: "completed" | "dead"; readonly attempts?: number }> = {
  quick: { state: "completed" },
  mutex: { state: "completed" },
  limited: { state: "completed" },
  rated: { state: "completed" },
  unique: { state: "completed" },
  delayed: { state: "completed" },
  flaky: { state: "completed" },
  poison: { state: "dead", attempts: 3 },
  timeout: { state: "completed" }
}

export const mutexKeys = 8
/** The concurrency keys of the `limited` kind, and its limits. */
export const limitKeys = 4
/** The concurrency keys of the `rated` kind. */
export const rateKeys = 4

/**
 * The first attempt of a kind that can record a run: its earlier attempts fail by design (flaky:
 * a typed failure; timeout: interrupted by its 300 ms timeout while it sleeps 5 s), so a ledger row
 * of an earlier attempt is a violation (soak/check.ts).
 */
export const firstSucceedingAttempt: Partial<Record<Kind, number>> = { flaky: 3, timeout: 2 }


/** The handlers, for a worker process whose SqlClient reaches the soak database. */
export const handlers = (sql: SqlClient.SqlClient) => {
  const ledger = sql("soak_ledger")
  // The attempt's claim instant in µs, from its job row (NULL when the row holds another attempt).
  const claimedUs = sql.onDialectOrElse({
    pg: () => sql.literal("(EXTRACT(EPOCH FROM claimed_at) * 1000000)::bigint"),
    orElse: () => sql.literal("TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', claimed_at)")
  })
  const record = (
    id: string,
    attempt: number,
    startedUs: number,
    mutexKey: string | null,
    limitKey: string | null = null,
    rateKey: string | null = null
  ) =>
    sql.withTransaction(
      sql`INSERT INTO ${ledger} (job_id, attempt, worker_pid, started_us, finished_us, mutex_key, limit_key, rate_key, claimed_us)
          VALUES (${Number(id)}, ${attempt}, ${process.pid}, ${startedUs}, ${nowUs()}, ${mutexKey}, ${limitKey}, ${rateKey}, ${
        rateKey === null
          ? null
          : sql`(SELECT ${claimedUs} FROM ${sql("soak_jobs")} WHERE id = ${Number(id)} AND attempts = ${attempt} AND state = 'running')`
      })`
    ).pipe(
      Effect.asVoid,
      // A database error fails the attempt (a defect, retried), with the driver's message in the job's
      // error history. `withTransaction` fails with the INSERT's error (the transaction rolled back)
      // but dies with the COMMIT's (the COMMIT may have been applied): the checks tell them apart.
      Effect.catchAllCause((cause) => {
        const died = Cause.dieOption(cause)
        const error: any = Option.isSome(died) ? died.value : Cause.squash(cause)
        const message = `${String(error?.message ?? error)}: ${String(error?.cause?.message ?? error?.cause ?? "")}`
        return Option.isSome(died)
          ? Effect.die(new Error(`COMMIT failed: ${message}`))
          : Effect.die(new Error(`ledger write failed: ${message}`))
      })
    )
  return [
    Job.handler(Quick, (_, ctx) => record(ctx.id, ctx.attempt, nowUs(), null)),
    Job.handler(Unique, (_, ctx) => record(ctx.id, ctx.attempt, nowUs(), null)),
    Job.handler(Delayed, (_, ctx) => record(ctx.id, ctx.attempt, nowUs(), null)),
    Job.handler(Mutex, (p, ctx) =>
      Effect.suspend(() => {
        const startedUs = nowUs()
        return Effect.sleep(10 + Math.floor(Math.random() * 30)).pipe(
          Effect.zipRight(record(ctx.id, ctx.attempt, startedUs, p.key))
        )
      })),
    Job.handler(Limited, (p, ctx) =>
      Effect.suspend(() => {
        const startedUs = nowUs()
        return Effect.sleep(10 + Math.floor(Math.random() * 30)).pipe(
          Effect.zipRight(record(ctx.id, ctx.attempt, startedUs, null, p.key))
        )
      })),
    Job.handler(Rated, (p, ctx) => record(ctx.id, ctx.attempt, nowUs(), null, null, p.key)),
    Job.handler(Flaky, (_, ctx) =>
      ctx.attempt < firstSucceedingAttempt.flaky!
        ? Effect.fail(new Designed({ message: `designed failure of attempt ${ctx.attempt}` }))
        : record(ctx.id, ctx.attempt, nowUs(), null)),
    Job.handler(Poison, (_, ctx) => Effect.fail(new Designed({ message: `poison, attempt ${ctx.attempt}` }))),
    Job.handler(Timeout, (_, ctx) =>
      Effect.suspend(() => {
        const startedUs = nowUs()
        return (ctx.attempt < firstSucceedingAttempt.timeout! ? Effect.sleep("5 seconds") : Effect.void).pipe(
          Effect.zipRight(record(ctx.id, ctx.attempt, startedUs, null))
        )
      }))
  ]
}
