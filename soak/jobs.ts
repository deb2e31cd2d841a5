/**
 * The soak's job kinds, shared by the driver (which enqueues them) and the worker processes (which
 * run them), and what each one must end as.
 *
 * Every handler that succeeds records its run in `soak_ledger` in a transaction of its own:
 * `(job_id, attempt, worker_pid, started_us, finished_us, mutex_key, limit_key, rate_key, claimed_us,
 * capped_start)`, times in µs of the machine's wall clock. A failing attempt records nothing.
 * `claimed_us` (the `rated` kind only) is the attempt's `claimed_at` as its job row holds it while the
 * handler runs: the instant of the claim, whose rate window the start counts in. `capped_start` (the
 * `capped` kind only, and its marker) says whether the job row held a slot of its name's limit when
 * the run started: `slotted`, or `unslotted` — a job claimed ahead that started in a slot an ended
 * attempt passed on before the write of that end reached the database.
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
/** The limit of the `capped` kind: 4 at once, by `running` alone. */
export const cappedLimits = { running: 4 } as const
/**
 * At most 4 running (`running` alone: no key, per-key limit or rate); runs 2–10 ms. No instant may
 * have more. Its slots pass from an ended attempt to a job its worker claimed ahead without one.
 */
export const Capped = Job.make("soak-capped", { payload: Seq, retry, limits: cappedLimits })
/**
 * How many `capped` jobs the driver enqueues at once (the backlog's, and then whenever as many are
 * due by the pace): a burst beyond the limit, so that jobs wait for slots and ended attempts pass
 * theirs on, which an even trickle of short jobs would seldom make them do.
 */
export const cappedBurst = 50
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

export type Kind =
  | "quick"
  | "mutex"
  | "limited"
  | "capped"
  | "rated"
  | "unique"
  | "delayed"
  | "flaky"
  | "poison"
  | "timeout"

/** The share of each kind among the soak's jobs (sums to 1). */
export const mix: ReadonlyArray<readonly [Kind, number]> = [
  ["quick", 0.35],
  ["mutex", 0.12],
  ["limited", 0.08],
  ["capped", 0.06],
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
  capped: Capped,
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
  capped: { state: "completed" },
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

/**
 * The job names each worker process runs in a `Worker` of their own. A worker passes slots only when
 * none of its names has a mutex key or a limit other than `running` alone (a job waiting ahead would
 * hold a key, a slot or a start another worker could use): with the other kinds, `capped` would be
 * claimed only for a free slot, and no slot would pass.
 */
export const ownWorker: ReadonlySet<string> = new Set([Capped.name])

/** What a run records besides its times, by kind (left out: not of that kind; recorded as NULL). */
interface Marks {
  readonly mutexKey?: string
  readonly limitKey?: string
  readonly rateKey?: string
  readonly cappedStart?: "slotted" | "unslotted"
}

/** The handlers, for a worker process whose SqlClient reaches the soak database. */
export const handlers = (sql: SqlClient.SqlClient) => {
  const ledger = sql("soak_ledger")
  // The attempt's claim instant in µs, from its job row (NULL when the row holds another attempt).
  const claimedUs = sql.onDialectOrElse({
    pg: () => sql.literal("(EXTRACT(EPOCH FROM claimed_at) * 1000000)::bigint"),
    orElse: () => sql.literal("TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', claimed_at)")
  })
  /** The attempt's row, while it holds that attempt. */
  const ownRow = (id: string, attempt: number) =>
    sql`${sql("soak_jobs")} WHERE id = ${Number(id)} AND attempts = ${attempt} AND state = 'running'`
  /** The slot of its name's limit the attempt's job row holds now (null: none). */
  const nameSlot = (id: string, attempt: number) =>
    sql<{ name_slot: number | null }>`SELECT name_slot FROM ${ownRow(id, attempt)}`.pipe(
      Effect.map((rows) => rows[0]?.name_slot ?? null),
      // A database error fails the attempt (a defect, retried), as a ledger write's does.
      Effect.orDie
    )
  const record = (id: string, attempt: number, startedUs: number, marks: Marks = {}) =>
    sql.withTransaction(
      sql`INSERT INTO ${ledger} (job_id, attempt, worker_pid, started_us, finished_us, mutex_key, limit_key, rate_key,
            claimed_us, capped_start)
          VALUES (${Number(id)}, ${attempt}, ${process.pid}, ${startedUs}, ${nowUs()}, ${marks.mutexKey ?? null}, ${
        marks.limitKey ?? null
      }, ${marks.rateKey ?? null}, ${
        marks.rateKey === undefined ? null : sql`(SELECT ${claimedUs} FROM ${ownRow(id, attempt)})`
      }, ${marks.cappedStart ?? null})`
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
  /** Sleeps `min`–`max` ms, then records the run (started before the sleep). */
  const after = (min: number, max: number, id: string, attempt: number, startedUs: number, marks: Marks) =>
    Effect.sleep(min + Math.floor(Math.random() * (max - min))).pipe(Effect.zipRight(record(id, attempt, startedUs, marks)))
  return [
    Job.handler(Quick, (_, ctx) => record(ctx.id, ctx.attempt, nowUs())),
    Job.handler(Unique, (_, ctx) => record(ctx.id, ctx.attempt, nowUs())),
    Job.handler(Delayed, (_, ctx) => record(ctx.id, ctx.attempt, nowUs())),
    Job.handler(Mutex, (p, ctx) => Effect.suspend(() => after(10, 40, ctx.id, ctx.attempt, nowUs(), { mutexKey: p.key }))),
    Job.handler(Limited, (p, ctx) => Effect.suspend(() => after(10, 40, ctx.id, ctx.attempt, nowUs(), { limitKey: p.key }))),
    Job.handler(Capped, (_, ctx) =>
      Effect.suspend(() => {
        const startedUs = nowUs()
        return nameSlot(ctx.id, ctx.attempt).pipe(
          Effect.flatMap((slot) =>
            after(2, 10, ctx.id, ctx.attempt, startedUs, { cappedStart: slot === null ? "unslotted" : "slotted" })
          )
        )
      })),
    Job.handler(Rated, (p, ctx) => record(ctx.id, ctx.attempt, nowUs(), { rateKey: p.key })),
    Job.handler(Flaky, (_, ctx) =>
      ctx.attempt < firstSucceedingAttempt.flaky!
        ? Effect.fail(new Designed({ message: `designed failure of attempt ${ctx.attempt}` }))
        : record(ctx.id, ctx.attempt, nowUs())),
    Job.handler(Poison, (_, ctx) => Effect.fail(new Designed({ message: `poison, attempt ${ctx.attempt}` }))),
    Job.handler(Timeout, (_, ctx) =>
      Effect.suspend(() => {
        const startedUs = nowUs()
        return (ctx.attempt < firstSucceedingAttempt.timeout! ? Effect.sleep("5 seconds") : Effect.void).pipe(
          Effect.zipRight(record(ctx.id, ctx.attempt, startedUs))
        )
      }))
  ]
}
