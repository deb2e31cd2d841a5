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
import { InvalidEnqueueOption, type InvalidPayload, type UniqueKeyContended } from "../schema/Errors.js"
import type { Job } from "../schema/Job.js"
import { ofJobName } from "../services/Metrics.js"
import type { Enqueued, NotifierShape } from "../services/Notifier.js"
import type { EnqueueManyOptions, EnqueueOptions, InsertResult, UniqueMode } from "../services/Queue.js"
import type { Driver, InsertRow, UniqueInsertResult, UniqueInsertRow } from "./driver/Driver.js"
import { retryTransient } from "./driver/errors.js"
import { resolveEnqueueOptions } from "./options.js"
import { encodePayload, limitKeyOf, mutexKeyOf, nameProblem, statementOverheadBytes } from "./payload.js"
import { describe } from "./sanitize.js"
import { resolveUnique } from "./unique.js"

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

/** What `insert` says of a unique insert: `replaced` only with a mode that replaces, for a duplicate. */
const resultOf = (result: UniqueInsertResult, mode: UniqueMode): InsertResult =>
  result.inserted
    ? { id: result.id, duplicate: false }
    : mode === "skip"
    ? { id: result.id, duplicate: true }
    : { id: result.id, duplicate: true, replaced: result.replaced }

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
    options: EnqueueManyOptions<Job.Payload<J>> | undefined
  ) => Effect.Effect<ReadonlyArray<string>, InvalidPayload | InvalidEnqueueOption | UniqueKeyContended | SqlError>
  readonly insertManyResults: <J extends Job.Any>(
    job: J,
    payloads: Iterable<Job.Payload<J>>,
    options: EnqueueManyOptions<Job.Payload<J>> | undefined
  ) => Effect.Effect<ReadonlyArray<InsertResult>, InvalidPayload | InvalidEnqueueOption | UniqueKeyContended | SqlError>
}

/** The enqueue path over `driver`, telling `notifier` of what it wrote. */
export const makeEnqueuer = (driver: Driver, notifier: NotifierShape, sql: SqlClient.SqlClient): Enqueuer => {
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
      const resolvedUnique = resolveUnique(job, unique, nowUs)
      if (Either.isLeft(resolvedUnique)) return Effect.fail(resolvedUnique.left)
      const { key, mode, states } = resolvedUnique.right
      const signal = signalOf([row], nowUs)
      const notify = notifier.takeNotifyPayload(signal)
      return Effect.flatMap(
        driver.jobInsertUnique({ ...row, uniqueKey: key, uniqueStates: states, mode }, nowUs, notify),
        (result): Effect.Effect<InsertResult> => {
          const r = resultOf(result, mode)
          // A replaced job is told of (its run_at may have moved) but not counted as enqueued.
          return result.inserted || result.replaced
            ? announce(result.inserted ? [row] : [], signal, notify, inTransaction, r)
            : Effect.succeed(r)
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

  /**
   * Jobs with unique keys of an `enqueueMany` (`keyed`: their rows and input indexes), with the rows
   * without a key (`plain`), in one transaction: the plain rows in one `jobInsertMany`, then one
   * `jobInsertUnique` per keyed row, ordered by key (concurrent batches take their keys' index
   * entries in one order) and in input order within a key (a later payload meets the earlier one as
   * a pending holder, as one enqueue after another would). Results in input order.
   */
  const writeKeyed = (
    plain: ReadonlyArray<readonly [number, InsertRow]>,
    keyed: ReadonlyArray<readonly [number, UniqueInsertRow]>,
    count: number,
    nowUs: number,
    inTransaction: boolean
  ): Effect.Effect<ReadonlyArray<InsertResult>, SqlError | UniqueKeyContended> => {
    const results: Array<InsertResult> = new Array(count)
    const written: Array<InsertRow> = []
    const counted: Array<InsertRow> = []
    const sorted = [...keyed].sort((a, b) => (a[1].uniqueKey < b[1].uniqueKey ? -1 : a[1].uniqueKey > b[1].uniqueKey ? 1 : a[0] - b[0]))
    // The first row of a key whose rows include one that replaces takes the key first (`lockKey`).
    const replacing = new Set(sorted.filter(([, r]) => r.mode === "replace" || r.mode === "throttle").map(([, r]) => r.uniqueKey))
    const ordered = sorted.map(([index, row], i): readonly [number, UniqueInsertRow] =>
      replacing.has(row.uniqueKey) && (i === 0 || sorted[i - 1][1].uniqueKey !== row.uniqueKey)
        ? [index, { ...row, lockKey: true }]
        : [index, row]
    )
    const body = Effect.zipRight(
      plain.length === 0 ? Effect.void : Effect.map(
        driver.jobInsertMany(plain.map(([, r]) => r), nowUs, undefined),
        (ids) => ids.forEach((id, i) => {
          results[plain[i][0]] = { id, duplicate: false }
        })
      ),
      Effect.forEach(ordered, ([index, row]) =>
        Effect.map(driver.jobInsertUnique(row, nowUs, undefined), (result) => {
          results[index] = resultOf(result, row.mode ?? "skip")
          if (result.inserted) counted.push(row)
          if (result.inserted || result.replaced) written.push(row)
        }), { discard: true })
    )
    // Retried as a whole on a transient error (a deadlock rolls the transaction back), but not in a
    // caller's transaction (retryTransient).
    return retryTransient(Effect.suspend(() => {
      written.length = 0
      counted.length = 0
      return sql.withTransaction(body)
    })).pipe(
      Effect.flatMap(() => {
        const rows = [...plain.map(([, r]) => r), ...written]
        if (rows.length === 0) return Effect.succeed(results)
        // The statements sent no NOTIFY: the Notifier sends a trailing one.
        return announce([...plain.map(([, r]) => r), ...counted], signalOf(rows, nowUs), undefined, inTransaction, results)
      })
    )
  }

  /** `enqueueMany` (`results` false: ids) and `insertMany` (`results` true). */
  const many = <J extends Job.Any>(
    job: J,
    payloads: Iterable<Job.Payload<J>>,
    options: EnqueueManyOptions<Job.Payload<J>> | undefined,
    results: boolean
  ): Effect.Effect<ReadonlyArray<string> | ReadonlyArray<InsertResult>, InvalidPayload | InvalidEnqueueOption | UniqueKeyContended | SqlError> =>
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
      const uniqueOf = options?.unique
      if (uniqueOf !== undefined && typeof uniqueOf !== "function") {
        return yield* new InvalidEnqueueOption({
          job: job.name,
          path: "unique",
          reason: "type",
          message: `enqueueMany takes unique as a function of the payload (and its index) giving a key, { key, … } or undefined, got ${typeof uniqueOf}`
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
      const { unique: _, ...rest } = options ?? {}
      const { priority, runAtUs, traceContext } = yield* resolveEnqueueOptions(job, rest, nowUs, fiber)
      const rows: Array<InsertRow> = json.map((payload, i) => ({
        name: job.name,
        payload,
        priority,
        runAtUs,
        mutexKey: mutexKeys[i],
        limitKey: limitKeys[i],
        traceContext
      }))
      if (uniqueOf === undefined) {
        const ids = yield* write(rows, nowUs, inTransactionOf(fiber))
        return results ? ids.map((id) => ({ id, duplicate: false })) : ids
      }
      // Every key is checked before any SQL: a refused one writes nothing.
      const plain: Array<readonly [number, InsertRow]> = []
      const keyed: Array<readonly [number, UniqueInsertRow]> = []
      for (let i = 0; i < items.length; i++) {
        let unique: unknown
        try {
          unique = uniqueOf(items[i], i)
        } catch (error) {
          return yield* new InvalidEnqueueOption({
            job: job.name,
            path: "unique",
            reason: "threw",
            message: `the unique function threw for payloads[${i}]: ${describe(error).slice(0, 200)}`
          })
        }
        if (unique === undefined) {
          plain.push([i, rows[i]])
          continue
        }
        const resolved = resolveUnique(job, unique, nowUs, `payloads[${i}]: `)
        if (Either.isLeft(resolved)) return yield* resolved.left
        const { key, mode, states } = resolved.right
        keyed.push([i, { ...rows[i], uniqueKey: key, uniqueStates: states, mode }])
      }
      if (keyed.length === 0) {
        const ids = yield* write(rows, nowUs, inTransactionOf(fiber))
        return results ? ids.map((id) => ({ id, duplicate: false })) : ids
      }
      const written = yield* writeKeyed(plain, keyed, items.length, nowUs, inTransactionOf(fiber))
      return results ? written : written.map((r) => r.id)
    })

  return {
    insert: insertOne,
    insertMany: (job, payloads, options) =>
      Effect.map(many(job, payloads, options, false), (ids) => ids as ReadonlyArray<string>),
    insertManyResults: (job, payloads, options) =>
      Effect.map(many(job, payloads, options, true), (results) => results as ReadonlyArray<InsertResult>)
  }
}
