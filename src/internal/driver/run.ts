/**
 * How the drivers run their statements: `runner` (the hot statements directly on their connection),
 * `withoutUnreadSpans`, and `withTransientRetry`, which wraps a driver's operations.
 *
 * @internal
 */
import type { SqlError } from "@effect/sql/SqlError"
import type * as SqlConnection from "@effect/sql/SqlConnection"
import * as Statement from "@effect/sql/Statement"
import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"
import * as Option from "effect/Option"
import { builtInTracer } from "../tracing.js"
import type { Driver } from "./Driver.js"
import { retryTransient } from "./errors.js"

/** How a statement is run: as a query (rows), `raw` (the driver's result), or `unprepared`. */
export type RunMode = "execute" | "raw" | "unprepared"

export interface Run {
  <A extends object>(statement: Statement.Statement<A>, mode?: "execute" | "unprepared"): Effect.Effect<
    ReadonlyArray<A>,
    SqlError
  >
  (statement: Statement.Statement<any>, mode: "raw"): Effect.Effect<unknown, SqlError>
}

const viaStatement = (statement: Statement.Statement<any>, mode: RunMode): Effect.Effect<any, SqlError> =>
  mode === "raw" ? statement.raw : mode === "unprepared" ? statement.unprepared : statement

/**
 * Runs sqlane's hot statements (enqueue, probe, claim, completion, heartbeat).
 *
 * @effect/sql runs every statement inside a span (`sql.execute`) and a scope of its own: on
 * MySQL/MariaDB, callgrind counts about 420,000 instructions for those per statement, against
 * 540,000 for the driver's own work of a one-row INSERT (`mysql2` `execute`), so they are a third of an `enqueue`.
 * With `direct`, a statement runs on the connection @effect/sql would have used (the caller's
 * transaction's, or the pool's) without them — only when:
 * - the client is @effect/sql-pg's or @effect/sql-mysql2's, whose connection outside a transaction
 *   needs no scope (`direct`, decided by `QueueLive`);
 * - no tracer reads spans (Effect's built-in tracer, or tracing disabled): with any other tracer
 *   the `sql.execute` spans are made as usual;
 * - no statement transformer (`Statement.withTransformer`) is set.
 * Otherwise the statement runs as @effect/sql runs it (under a transformer, with its span skipped
 * while nobody reads it, as `withoutUnreadSpans` does).
 */
export const runner = (direct: boolean): Run => {
  if (!direct) return viaStatement as Run
  return ((statement: Statement.Statement<any>, mode: RunMode = "execute") =>
    Effect.withFiberRuntime<any, SqlError>((fiber) => {
      // The connection getter every statement of the client carries (not in @effect/sql's types).
      const acquirer = (statement as unknown as { readonly acquirer?: unknown }).acquirer
      const traced = fiber.currentTracer !== builtInTracer && fiber.getFiberRef(FiberRef.currentTracerEnabled)
      if (traced) return viaStatement(statement, mode)
      // The transformer (or an unexpected statement) needs @effect/sql's own path; its span is unread.
      if (Option.isSome(fiber.getFiberRef(Statement.currentTransformer)) || !Effect.isEffect(acquirer)) {
        return withoutUnreadSpans(viaStatement(statement, mode))
      }
      const [text, params] = statement.compile(mode === "raw")
      const transformRows = (statement as unknown as { readonly transformRows?: any }).transformRows
      // Typed with a Scope that these clients' connection getters never use (see above).
      return Effect.flatMap(
        acquirer as Effect.Effect<SqlConnection.Connection, SqlError>,
        (connection): Effect.Effect<any, SqlError> =>
          mode === "raw"
            ? connection.executeRaw(text, params)
            : mode === "unprepared"
            ? connection.executeUnprepared(text, params, transformRows)
            : connection.execute(text, params, transformRows)
      )
    })) as Run
}

/**
 * `effect` without the `sql.execute` spans of @effect/sql while the tracer is Effect's built-in one
 * (no exporter installed): nobody reads those spans, and making one took about a third of the
 * client's CPU for a statement (callgrind: 236k of 1,349k instructions for a one-row INSERT). With
 * any other tracer the spans are made as usual.
 */
export const withoutUnreadSpans = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.withFiberRuntime((fiber) =>
    fiber.currentTracer === builtInTracer && fiber.getFiberRef(FiberRef.currentTracerEnabled)
      ? Effect.withTracerEnabled(effect, false)
      : effect
  )

/**
 * The driver's operations retried on transient errors (`retryTransient`), without unread spans
 * (`withoutUnreadSpans`). `direct`: the driver was built with `direct` (see `runner`), so its hot
 * operations — those that run through `runner` (or, on MySQL/MariaDB, on a reserved connection) —
 * make no span to skip: they are only retried. What is not an operation (the statement texts, the
 * lock statement and name) is passed as it is. Every member of `Driver` is listed here: a new one
 * must be too (the type checker asks for each required one).
 */
export const withTransientRetry = (driver: Driver, direct = false): Driver => {
  /** An operation retried on transient errors, its unread spans skipped. */
  const cold = <A extends Array<any>, B, E>(f: (...args: A) => Effect.Effect<B, E>) =>
    (...args: A): Effect.Effect<B, E> => withoutUnreadSpans(retryTransient(f(...args)))
  /** A hot operation: retried, and its unread spans skipped unless it runs directly. */
  const hot = direct
    ? <A extends Array<any>, B, E>(f: (...args: A) => Effect.Effect<B, E>) =>
      (...args: A): Effect.Effect<B, E> => retryTransient(f(...args))
    : cold
  const d = driver
  return {
    capabilities: d.capabilities,
    // Hot
    jobInsertMany: hot(d.jobInsertMany),
    jobInsertUnique: hot(d.jobInsertUnique),
    jobProbe: hot(d.jobProbe),
    jobPendingGroups: cold(d.jobPendingGroups),
    jobClaim: hot(d.jobClaim),
    jobClaimKeyed: hot(d.jobClaimKeyed),
    jobClaimRated: hot(d.jobClaimRated),
    jobFinishMany: hot(d.jobFinishMany),
    ...(d.jobFinishManyAndClaim === undefined ? {} : { jobFinishManyAndClaim: hot(d.jobFinishManyAndClaim) }),
    workerHeartbeat: hot(d.workerHeartbeat),
    jobNewestId: hot(d.jobNewestId),
    ...(d.slotsHeld === undefined ? {} : { slotsHeld: hot(d.slotsHeld) }),
    // The rest
    jobCountDue: cold(d.jobCountDue),
    jobEndsNotHeld: cold(d.jobEndsNotHeld),
    jobGet: cold(d.jobGet),
    jobCancel: cold(d.jobCancel),
    jobRetry: cold(d.jobRetry),
    jobStaleAttempts: cold(d.jobStaleAttempts),
    jobListOrphaned: cold(d.jobListOrphaned),
    workerRegister: cold(d.workerRegister),
    workerJobNames: cold(d.workerJobNames),
    workerJobLimits: cold(d.workerJobLimits),
    workerRelocking: cold(d.workerRelocking),
    workerRelocked: cold(d.workerRelocked),
    workerRemove: cold(d.workerRemove),
    workerPrune: cold(d.workerPrune),
    scheduleGet: cold(d.scheduleGet),
    scheduleList: cold(d.scheduleList),
    scheduleDescribe: cold(d.scheduleDescribe),
    workerList: cold(d.workerList),
    scheduleFire: (name, tickUs, nowUs, enqueue) =>
      // Its error is the enqueue's or a SqlError; only a transient SqlError is retried.
      withoutUnreadSpans(retryTransient(d.scheduleFire(name, tickUs, nowUs, enqueue) as Effect.Effect<any, SqlError, any>)),
    workerLockHolder: cold(d.workerLockHolder),
    endConnection: cold(d.endConnection),
    pausedList: cold(d.pausedList),
    pausedInsert: cold(d.pausedInsert),
    pausedDelete: cold(d.pausedDelete),
    limitList: cold(d.limitList),
    limitSet: cold(d.limitSet),
    limitDelete: cold(d.limitDelete),
    rateHoldsLift: cold(d.rateHoldsLift),
    limitUse: cold(d.limitUse),
    jobCountHeldByKey: cold(d.jobCountHeldByKey),
    rateHold: cold(d.rateHold),
    rateNameList: cold(d.rateNameList),
    ratePrune: cold(d.ratePrune),
    statsAdd: cold(d.statsAdd),
    statsRead: cold(d.statsRead),
    statsPrune: cold(d.statsPrune),
    jobList: cold(d.jobList),
    jobStats: cold(d.jobStats),
    jobDelete: cold(d.jobDelete),
    jobCountByState: cold(d.jobCountByState),
    jobRetryByName: cold(d.jobRetryByName),
    jobKeyedIdsByName: cold(d.jobKeyedIdsByName),
    jobProgressSet: cold(d.jobProgressSet),
    jobProgressGet: cold(d.jobProgressGet),
    jobPruneFinished: cold(d.jobPruneFinished),
    migrationList: cold(d.migrationList),
    migrationDropAll: cold(d.migrationDropAll),
    channelNotify: cold(d.channelNotify),
    // Not retried: data, the migration lock (migrations are not retried), the LISTEN connection
    // (opened again by its caller, on a schedule), and the lock statements' texts
    migrations: d.migrations,
    migrationLocked: d.migrationLocked,
    channelListen: d.channelListen,
    workerLockStatement: d.workerLockStatement,
    workerUnlockSql: d.workerUnlockSql,
    workerLockName: d.workerLockName,
    connectionIdStatement: d.connectionIdStatement,
    connectionCheckStatement: d.connectionCheckStatement,
    prunerLock: d.prunerLock
  }
}
