/**
 * The enqueue path of `Queue`: each payload encoded and checked, the options resolved, the rows
 * written (the driver cuts rows that do not fit one statement), counted, and told to the Notifier.
 * For a synchronous payload schema (nearly all) everything before the statement is plain code: it
 * runs for every job.
 *
 * @internal
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import type * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { InvalidEnqueueOption, type InvalidPayload, type UniqueKeyContended } from "../schema/Errors.js"
import type { Job } from "../schema/Job.js"
import { JobState } from "../schema/JobInfo.js"
import { ofJobName } from "../services/Metrics.js"
import type { Enqueued, NotifierShape } from "../services/Notifier.js"
import type { EnqueueManyOptions, EnqueueOptions, InsertResult } from "../services/Queue.js"
import type { Driver, InsertRow } from "./driver/Driver.js"
import { stateBits } from "./driver/shared.js"
import { resolveEnqueueOptions } from "./options.js"
import { checkKey, encodePayload, limitKeyOf, mutexKeyOf, nameProblem, statementOverheadBytes } from "./payload.js"

/** Now, in microseconds since the epoch, from the fiber's `Clock` (as `nowMicros`, without an effect). */
const nowOf = (fiber: Fiber.RuntimeFiber<unknown, unknown>): number =>
  Number(Context.get(fiber.currentDefaultServices, Clock.Clock).unsafeCurrentTimeNanos() / 1000n)

/** Whether the fiber runs inside a `sql.withTransaction`. */
const inTransactionOf = (fiber: Fiber.RuntimeFiber<unknown, unknown>): boolean =>
  Option.isSome(Context.getOption(fiber.currentContext, SqlClient.TransactionConnection))

/** What the Notifier is told of written rows: one entry per (name, priority) due now, one per name of delayed rows. */
const signalOf = (rows: ReadonlyArray<InsertRow>, nowUs: number): ReadonlyArray<Enqueued> => {
  if (rows.length === 1) return [rows[0].runAtUs <= nowUs ? [rows[0].name, rows[0].priority] : rows[0].name]
  const entries = new Map<string, Enqueued>()
  let previous: InsertRow | undefined
  for (const r of rows) {
    // Rows of one job name, priority and run_at (an enqueueMany) give one entry.
    if (previous !== undefined && r.name === previous.name && r.priority === previous.priority && r.runAtUs === previous.runAtUs) continue
    previous = r
    const e: Enqueued = r.runAtUs <= nowUs ? [r.name, r.priority] : r.name
    entries.set(typeof e === "string" ? e : `${e[1]}:${e[0]}`, e)
  }
  return Array.from(entries.values())
}

/** What `Queue` enqueues with; the errors are those of `QueueShape.insert` and `enqueueMany`. */
export interface Enqueuer {
  readonly insert: <J extends Job.Any>(
    job: J,
    payload: Job.Payload<J>,
    options: EnqueueOptions | undefined
  ) => Effect.Effect<InsertResult, InvalidPayload | InvalidEnqueueOption | UniqueKeyContended | SqlError>
  readonly insertMany: <J extends Job.Any>(
    job: J,
    payloads: Iterable<Job.Payload<J>>,
    options: EnqueueManyOptions | undefined
  ) => Effect.Effect<ReadonlyArray<string>, InvalidPayload | InvalidEnqueueOption | SqlError>
}

/** The enqueue path over `driver`, telling `notifier` of what it wrote. */
export const makeEnqueuer = (driver: Driver, notifier: NotifierShape): Enqueuer => {
  const { maxStatementBytes } = driver.capabilities
  /** The largest payload (UTF-8 bytes of JSON) one statement can carry on this database, if limited. */
  const maxPayloadBytes = maxStatementBytes === undefined ? undefined : maxStatementBytes - statementOverheadBytes

  /**
   * Writes `rows` and tells the Notifier; returns their ids in order. `inTransaction`: whether the
   * statement runs inside a caller's transaction (whose commit sqlane cannot see).
   */
  const write = (
    rows: ReadonlyArray<InsertRow>,
    nowUs: number,
    inTransaction: boolean
  ): Effect.Effect<ReadonlyArray<string>, SqlError> => {
    // Jobs due now are announced with their priority (a worker claims them without probing);
    // delayed jobs by name (a worker probes to learn when they are due).
    const signal = signalOf(rows, nowUs)
    const notify = notifier.takeNotifyPayload(signal)
    // The driver cuts rows that do not fit one statement (`maxStatementBytes`) into several, in one transaction.
    return Effect.flatMap(
      driver.jobInsertMany(rows, nowUs, notify),
      (ids) => announce(rows, signal, notify, inTransaction, ids)
    )
  }

  /**
   * After `rows` were written: counts them and tells the Notifier (at once when the write committed;
   * inside a caller's transaction, after `hintDelay`). Succeeds with `value`.
   */
  const announce = <A>(
    rows: ReadonlyArray<InsertRow>,
    signal: ReadonlyArray<Enqueued>,
    notify: string | undefined,
    inTransaction: boolean,
    value: A
  ): Effect.Effect<A> => {
    // One update per run of one job name (an enqueueMany is one run).
    let from = 0
    for (let i = 1; i <= rows.length; i++) {
      if (i === rows.length || rows[i].name !== rows[from].name) {
        ofJobName(rows[from].name).enqueued.unsafeUpdate(i - from, [])
        from = i
      }
    }
    if (inTransaction) return Effect.as(notifier.enqueued(signal, false, notify !== undefined), value)
    notifier.hintCommitted(signal, notify !== undefined)
    return Effect.succeed(value)
  }

  /** One job whose payload is encoded (`json`): its row, then the write. */
  const insertEncoded = <J extends Job.Any>(
    job: J,
    payload: Job.Payload<J>,
    json: string,
    options: EnqueueOptions | undefined
  ): Effect.Effect<InsertResult, InvalidPayload | InvalidEnqueueOption | UniqueKeyContended | SqlError> =>
    Effect.withFiberRuntime((fiber) => {
      const mutexKey = mutexKeyOf(job, payload)
      if (Either.isLeft(mutexKey)) return Effect.fail(mutexKey.left)
      const limitKey = limitKeyOf(job, payload)
      if (Either.isLeft(limitKey)) return Effect.fail(limitKey.left)
      const nowUs = nowOf(fiber)
      const resolved = resolveEnqueueOptions(job, options, nowUs, fiber)
      if (Either.isLeft(resolved)) return Effect.fail(resolved.left)
      const { priority, runAtUs, traceContext } = resolved.right
      const row: InsertRow = {
        name: job.name,
        payload: json,
        priority,
        runAtUs,
        mutexKey: mutexKey.right,
        limitKey: limitKey.right,
        traceContext
      }
      const inTransaction = inTransactionOf(fiber)
      const unique = options?.unique
      if (unique === undefined) return Effect.map(write([row], nowUs, inTransaction), (ids) => ({ id: ids[0], duplicate: false }))
      const uniqueKey = typeof unique === "string"
        ? checkKey(job, "the unique key", "unique", unique)
        : checkKey(job, "the unique key", "unique.key", unique.key)
      if (Either.isLeft(uniqueKey)) return Effect.fail(uniqueKey.left)
      let uniqueStates = stateBits.pending | stateBits.running
      for (const state of (typeof unique === "string" ? undefined : unique.states) ?? []) {
        if (!Schema.is(JobState)(state)) {
          return new InvalidEnqueueOption({
            job: job.name,
            path: "unique.states",
            reason: "type",
            message: `unknown job state in unique.states: ${state}`
          })
        }
        uniqueStates |= stateBits[state]
      }
      const signal = signalOf([row], nowUs)
      const notify = notifier.takeNotifyPayload(signal)
      return Effect.flatMap(
        driver.jobInsertUnique({ ...row, uniqueKey: uniqueKey.right, uniqueStates }, nowUs, notify),
        (result): Effect.Effect<InsertResult> => {
          const r = { id: result.id, duplicate: !result.inserted }
          return result.inserted ? announce([row], signal, notify, inTransaction, r) : Effect.succeed(r)
        }
      )
    })

  /**
   * One job. Everything before the statement is plain code for a synchronous payload schema (nearly
   * all): each `Effect.gen` step cost about a microsecond, and an enqueue had about twenty.
   */
  const insertOne = <J extends Job.Any>(
    job: J,
    payload: Job.Payload<J>,
    options: EnqueueOptions | undefined
  ): Effect.Effect<InsertResult, InvalidPayload | InvalidEnqueueOption | UniqueKeyContended | SqlError> => {
    const badName = nameProblem(job)
    if (badName !== undefined) return badName
    const json = encodePayload(job, payload, maxPayloadBytes) as
      | Either.Either<string, InvalidPayload>
      | Effect.Effect<string, InvalidPayload>
    if (Either.isEither(json)) {
      return Either.isLeft(json) ? Effect.fail(json.left) : insertEncoded(job, payload, json.right, options)
    }
    return Effect.flatMap(json, (json) => insertEncoded(job, payload, json, options))
  }

  return {
    insert: insertOne,
    insertMany: (job, payloads, options) =>
      Effect.gen(function*() {
        const badName = nameProblem(job)
        if (badName !== undefined) return yield* badName
        // Plain JavaScript callers: what the types refuse.
        if (typeof payloads === "string" || payloads === null || typeof payloads !== "object") {
          return yield* new InvalidEnqueueOption({
            job: job.name,
            path: "payloads",
            reason: "type",
            message: `enqueueMany takes an iterable of payloads (an array), got ${typeof payloads}`
          })
        }
        if ((options as EnqueueOptions | undefined)?.unique !== undefined) {
          return yield* new InvalidEnqueueOption({
            job: job.name,
            path: "unique",
            reason: "conflict",
            message: "enqueueMany takes no unique key (use enqueue or insert for each job)"
          })
        }
        const items = Array.from(payloads)
        const json: Array<string> = []
        for (const p of items) {
          const encoded = encodePayload(job, p, maxPayloadBytes)
          json.push(
            Either.isEither(encoded) && Either.isRight(encoded) ? encoded.right as string : yield* encoded
          )
        }
        if (json.length === 0) return []
        // A check per payload, not an effect step: this loop runs for every job of the batch.
        const mutexKeys: Array<string | null> = []
        const limitKeys: Array<string | null> = []
        for (const p of items) {
          const key = mutexKeyOf(job, p)
          if (Either.isLeft(key)) return yield* Effect.fail(key.left)
          mutexKeys.push(key.right)
          const limitKey = limitKeyOf(job, p)
          if (Either.isLeft(limitKey)) return yield* Effect.fail(limitKey.left)
          limitKeys.push(limitKey.right)
        }
        const fiber = yield* Effect.withFiberRuntime<Fiber.RuntimeFiber<unknown, unknown>>((fiber) => Effect.succeed(fiber))
        const nowUs = nowOf(fiber)
        const { priority, runAtUs, traceContext } = yield* resolveEnqueueOptions(job, options, nowUs, fiber)
        return yield* write(
          json.map((payload, i) => ({
            name: job.name,
            payload,
            priority,
            runAtUs,
            mutexKey: mutexKeys[i],
            limitKey: limitKeys[i],
            traceContext
          })),
          nowUs,
          inTransactionOf(fiber)
        )
      })
  }
}
