/**
 * sqlane for code outside Effect: a queue whose methods return Promises, on a database URL.
 *
 * `createQueue` builds a `QueueLive` and its SQL client in a `ManagedRuntime`; `enqueue`,
 * `enqueueMany` and `insert` write jobs (with `transaction`, inside a transaction your code began
 * on its own node-postgres or mysql2 connection); `work` starts an Effect `Worker` in that runtime
 * for one job name, with an `async` handler; `close` stops the workers and closes the pool. Jobs are
 * the same `Job.make` definitions Effect code uses, and so are the tables, retries, dead letters,
 * metrics and guarantees: underneath it is the Effect queue.
 *
 * Every Promise rejects with sqlane's typed errors themselves (`InvalidPayload`, `JobNotFound`,
 * `SetupError`, `QueueClosed`…, and `@effect/sql`'s `SqlError` for a failed statement): they are
 * `Error` subclasses, so `instanceof` and `error._tag` tell them apart. Guide: docs/promise.md.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { createQueue, Job } from "sqlane/promise"
 *
 * const SendEmail = Job.make("send-email", { payload: Schema.Struct({ to: Schema.String }) })
 *
 * const queue = await createQueue({ url: "postgres://postgres@127.0.0.1:5432/app" })
 * const worker = await queue.work(SendEmail, async ({ to }) => { await mailer.send(to) }, { concurrency: 5 })
 * const id = await queue.enqueue(SendEmail, { to: "bob@example.com" })
 * // … on shutdown:
 * await queue.close() // stops the worker (running jobs finish), writes their ends, closes the pool
 * ```
 *
 * @since 0.2.0
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Option from "effect/Option"
import type { CallerConnection } from "./internal/callerConnection.js"
import { clientLayer, connectProblem, parseDatabaseUrl } from "./internal/databaseUrl.js"
import * as PromiseWorker from "./internal/promiseWorker.js"
import { settle } from "./internal/promiseWorker.js"
import { QueueLive, type Services } from "./layers/QueueLive.js"
import { QueueClosed, type SchemaNotMigrated, SetupError, type UnsupportedDatabase } from "./schema/Errors.js"
import * as Job from "./schema/Job.js"
import type { AttemptError, JobInfo, JobState } from "./schema/JobInfo.js"
import * as Queue from "./services/Queue.js"
import type { QueueOptions } from "./services/QueueConfig.js"
import type { WorkerOptions } from "./services/Worker.js"

/**
 * Job definitions, the same module as `Job` of `sqlane`: `Job.make("name", { payload: Schema… })`.
 *
 * @since 0.2.0
 */
export * as Job from "./schema/Job.js"
/**
 * sqlane's typed errors, the same classes as `Errors` of `sqlane`: `error instanceof JobNotFound`.
 *
 * @since 0.2.0
 */
export {
  InvalidEnqueueOption,
  InvalidJobDefinition,
  InvalidPayload,
  InvalidWorkerOptions,
  JobNotFound,
  QueueClosed,
  SchemaNotMigrated,
  SetupError,
  UniqueKeyContended,
  UnsupportedDatabase
} from "./schema/Errors.js"
/**
 * The error of a statement the database or its driver refused (`error.cause` is the driver's own
 * error, e.g. node-postgres' `DatabaseError` with its `code`).
 *
 * @example
 * ```ts
 * try { await queue.enqueue(SendEmail, { to }) } catch (e) { if (e instanceof SqlError) log(e.cause) }
 * ```
 *
 * @since 0.2.0
 */
export { SqlError } from "@effect/sql/SqlError"
/**
 * The connection a `transaction` option takes: a node-postgres `Client`/`PoolClient` or a mysql2
 * connection, in a transaction your code began (`Queue.joinTransaction` in `sqlane`).
 *
 * @since 0.2.0
 */
export type { CallerConnection } from "./internal/callerConnection.js"

/**
 * The options of {@link createQueue}: the database URL, the pool, and every option of `QueueLive`
 * (`prefix`, `migrate`, `pollInterval`, `retention`…; README, "QueueLive").
 *
 * @example
 * ```ts
 * await createQueue({ url: "mysql://app:secret@db:3306/app", prefix: "jobs_", maxConnections: 20, pollInterval: "2 seconds" })
 * ```
 *
 * @since 0.2.0
 * @category models
 */
export interface CreateQueueOptions extends QueueOptions {
  /**
   * `postgres://user:password@host:port/database` (or `postgresql://`), or `mysql://…` (or
   * `mariadb://…`) for MySQL 8.0+ and MariaDB 10.6+. Query parameters go to the driver (e.g.
   * `?sslmode=require`).
   */
  readonly url: string | URL
  /**
   * Most connections of the pool. Default 10. Each `work` holds one for its worker's life (its
   * lock), so a pool of `n` takes at most `n - 1` workers; migrating on MySQL/MariaDB needs 2.
   */
  readonly maxConnections?: number | undefined
  /** PostgreSQL's `application_name` of the pool's connections. Default `"sqlane"`. */
  readonly applicationName?: string | undefined
}

/**
 * The options of `enqueue` and `insert`: those of the Effect `Queue.enqueue` (`runAt`, `delay`,
 * `priority`, `unique`), and the transaction to join.
 *
 * @example
 * ```ts
 * await queue.enqueue(SendEmail, { to }, { delay: "10 minutes", priority: -1, unique: `welcome:${to}` })
 * await queue.enqueue(SendEmail, { to }, { transaction: client }) // client: a pg PoolClient after BEGIN
 * ```
 *
 * @since 0.2.0
 * @category models
 */
export interface EnqueueOptions extends Queue.EnqueueOptions {
  /**
   * A connection on which your code began a transaction (`BEGIN`): a node-postgres `Client` or
   * `PoolClient`, or a mysql2 connection (callback or promise API). The job is inserted on it, inside
   * that transaction: it exists once you `COMMIT`, and never if you `ROLLBACK`. sqlane sends no
   * `BEGIN` or `COMMIT` of its own; do not run other statements on the connection until the Promise
   * settles. See `Queue.joinTransaction` for the details.
   */
  readonly transaction?: CallerConnection | undefined
}

/**
 * The options of `enqueueMany`: as {@link EnqueueOptions}, with `unique` a function of each payload
 * (and its index) that gives its unique key, `{ key, … }`, or `undefined` (see the Effect
 * `Queue.EnqueueManyOptions`).
 *
 * @example
 * ```ts
 * const ids = await queue.enqueueMany(SendEmail, recipients.map((to) => ({ to })), { delay: "1 minute" })
 * await queue.enqueueMany(SendEmail, recipients.map((to) => ({ to })), { unique: (p) => `welcome:${p.to}` })
 * ```
 *
 * @since 0.2.0
 * @category models
 */
export interface EnqueueManyOptions<P = any> extends Queue.EnqueueManyOptions<P> {
  /** As {@link EnqueueOptions.transaction}. */
  readonly transaction?: CallerConnection | undefined
}

/**
 * What a handler of `work` gets besides the payload: the attempt's {@link Job.JobContext}, an
 * `AbortSignal`, and a way to report progress.
 *
 * @example
 * ```ts
 * await queue.work(FetchPage, async ({ url }, ctx) => {
 *   const response = await fetch(url, { signal: ctx.signal }) // stops when the attempt is cancelled or times out
 *   await ctx.progress(50, `attempt ${ctx.attempt}: downloaded`)
 *   return response.status
 * })
 * ```
 *
 * @since 0.2.0
 * @category models
 */
export interface HandlerContext extends Job.JobContext {
  /**
   * Aborted when the attempt is interrupted: the job was cancelled (`cancel`), ran past its job's
   * `timeout`, or is still running when its worker stops and `shutdownTimeout` has passed. The
   * attempt ends then whatever the handler does; pass the signal to `fetch` and the like so the work
   * stops too.
   */
  readonly signal: AbortSignal
  /** Records the attempt's progress (a finite number and a short text; Effect's `Queue.progress`). Never rejects. */
  readonly progress: (value: number, message?: string) => Promise<void>
}

/**
 * The options of `work`: those of the Effect `Worker` (`WorkerOptions`) that apply to one job name —
 * `concurrency` (default 10), `prefetch` (jobs claimed ahead while a backlog lasts, default `max(20 × concurrency, 200)`),
 * `id` (default a random UUID), `shutdownTimeout` (default 30 seconds),
 * `logs` (`"quiet"` turns off the lines of failed attempts and dead letters).
 *
 * @example
 * ```ts
 * await queue.work(SendEmail, send, { concurrency: 20, id: `mailer-${hostname()}`, shutdownTimeout: "10 seconds" })
 * ```
 *
 * @since 0.2.0
 * @category models
 */
export type WorkOptions = Pick<WorkerOptions<never>, "concurrency" | "prefetch" | "id" | "shutdownTimeout" | "logs">

/**
 * A running worker, from `work`.
 *
 * @example
 * ```ts
 * const worker = await queue.work(SendEmail, send)
 * await worker.drain() // every due job ran
 * await worker.stop()
 * ```
 *
 * @since 0.2.0
 * @category models
 */
export interface WorkerHandle {
  /** The worker's id, recorded on the jobs it claims. */
  readonly id: string
  /** Jobs claimed and not yet finished (running, or their end not yet written). */
  readonly running: () => Promise<number>
  /**
   * Resolves once the worker is idle: it holds no job, and no job of its name is due (pending with
   * `run_at` now or earlier; a paused name counts as idle). Jobs due later — delayed ones, and
   * retries waiting for their backoff — are not waited for. The worker keeps running. It also
   * resolves when the worker stops (`stop`, `close`), whatever is left.
   */
  readonly drain: () => Promise<void>
  /**
   * Stops the worker: it claims no more jobs, lets running ones finish for up to `shutdownTimeout`,
   * interrupts and releases the rest (back to pending, the attempt not counted), writes every end and
   * releases its lock. Calling it again returns the same Promise.
   */
  readonly stop: () => Promise<void>
}

/**
 * A job as stored, from `get`.
 *
 * @example
 * ```ts
 * const job = await queue.get(id)
 * if (job.state === "dead") console.error(job.lastError, job.errors.at(-1)?.stack)
 * ```
 *
 * @since 0.2.0
 * @category models
 */
export interface JobDetails {
  readonly id: string
  readonly name: string
  readonly state: JobState
  /** The payload as stored (encoded by the job's payload schema, e.g. a `Date` as its ISO string). */
  readonly payload: unknown
  readonly priority: number
  /** Attempts started so far. */
  readonly attempts: number
  readonly runAt: Date
  readonly createdAt: Date
  readonly claimedAt: Date | undefined
  readonly finishedAt: Date | undefined
  readonly lastError: string | undefined
  /** Every failed attempt, oldest first. */
  readonly errors: ReadonlyArray<AttemptError>
  /** The handler's result as stored (encoded by the job's success schema); `undefined` when none. */
  readonly result: unknown
}

/**
 * A queue on one database and table prefix, from {@link createQueue}.
 *
 * @example
 * ```ts
 * const queue = await createQueue({ url })
 * const worker = await queue.work(Resize, async ({ path }) => ({ bytes: await resize(path) }))
 * const id = await queue.enqueue(Resize, { path: "a.png" })
 * await worker.drain()
 * console.log((await queue.get(id)).result) // { bytes: … }, encoded by Resize's success schema
 * await queue.close()
 * ```
 *
 * @since 0.2.0
 * @category models
 */
export interface PromiseQueue {
  /**
   * Inserts one job; resolves to its id (with a `unique` key a job already holds, that job's id).
   * Rejects with `InvalidPayload` (nothing written) when the payload does not encode with the job's
   * schema or an option is out of range, `UniqueKeyContended`, or `SqlError`.
   */
  readonly enqueue: <J extends Job.Job.Any>(job: J, payload: Job.Job.Payload<J>, options?: EnqueueOptions) => Promise<string>
  /** As `enqueue`; resolves to `{ id, duplicate }` (`duplicate`: a job held the unique key, nothing was written). */
  readonly insert: <J extends Job.Job.Any>(
    job: J,
    payload: Job.Job.Payload<J>,
    options?: EnqueueOptions
  ) => Promise<Queue.InsertResult>
  /**
   * Inserts many jobs of one name with multi-row inserts; resolves to their ids in input order (for a
   * payload whose unique key a job holds, that job's id).
   */
  readonly enqueueMany: <J extends Job.Job.Any>(
    job: J,
    payloads: Iterable<Job.Job.Payload<J>>,
    options?: EnqueueManyOptions<Job.Job.Payload<J>>
  ) => Promise<ReadonlyArray<string>>
  /** A job's state, attempts, times, errors and result. Rejects with `JobNotFound`. */
  readonly get: (id: string) => Promise<JobDetails>
  /** Cancels a pending or running job (`true`), or does nothing to an ended one (`false`). Rejects with `JobNotFound`. */
  readonly cancel: (id: string) => Promise<boolean>
  /** A dead or cancelled job back to pending with fresh attempts (`true`). Rejects with `JobNotFound`. */
  readonly retry: (id: string) => Promise<boolean>
  /**
   * Starts a worker of `job` in this queue's runtime: resolves once it holds its lock and claims.
   * `handler` gets the decoded payload and a {@link HandlerContext}; what it resolves to is the
   * job's result (encoded by its `success` schema and stored). A rejection or a throw is a failed
   * attempt, retried by the job's `retry` schedule and dead-lettered when it is done: a value of the
   * job's `failure` schema is a typed failure (`isPermanent` applies to it), anything else a defect
   * (its stack is stored with the attempt).
   */
  readonly work: <J extends Job.Job.Any>(
    job: J,
    handler: (payload: Job.Job.Payload<J>, context: HandlerContext) => Promise<Job.Job.Success<J>> | Job.Job.Success<J>,
    options?: WorkOptions
  ) => Promise<WorkerHandle>
  /**
   * Graceful shutdown: waits for the calls already made (enqueues, workers starting), stops every
   * worker (as `stop`), then closes the queue's services (the last ends written, the `LISTEN`
   * connection and background fibers stopped) and the pool. Later calls reject with `QueueClosed`;
   * calling `close` again returns the same Promise.
   */
  readonly close: () => Promise<void>
  /**
   * The Effect runtime underneath, for what this interface does not cover: `queue.runtime.runPromise(effect)`
   * runs an effect that needs `Queue`, `Admin`, `Events`, the `SqlClient`… (it rejects with a
   * `FiberFailure`, not the error itself).
   */
  readonly runtime: ManagedRuntime.ManagedRuntime<
    Services | SqlClient.SqlClient,
    SqlError | UnsupportedDatabase | SetupError | SchemaNotMigrated
  >
}

/**
 * Connects to the database at `options.url`, checks it, runs sqlane's migrations (unless
 * `migrate: false`) and resolves to the queue. Rejects with `SetupError` (a URL it cannot read or a
 * database it cannot reach, or an invalid option), `SchemaNotMigrated` (with `migrate: false`),
 * `UnsupportedDatabase`, or `SqlError`; nothing stays open then.
 *
 * Source: pg-boss's `new PgBoss(url)` + `start()` (connect, migrate), BullMQ's `Queue`/`Worker` pair.
 *
 * @example
 * ```ts
 * const queue = await createQueue({ url: process.env.DATABASE_URL!, prefix: "jobs_", maxConnections: 20 })
 * ```
 *
 * @since 0.2.0
 * @category constructors
 */
export const createQueue = async (options: CreateQueueOptions): Promise<PromiseQueue> => {
  const { applicationName = "sqlane", maxConnections = 10, url, ...queueOptions } = options
  const target = parseDatabaseUrl(String(url))
  if (Either.isLeft(target)) throw new SetupError({ message: `createQueue: ${target.left}` })
  const client = Layer.mapError(
    clientLayer(target.right, { maxConnections, applicationName }),
    (error) => new SetupError({ message: `createQueue: ${connectProblem(target.right, error)}`, cause: error })
  )
  const runtime = ManagedRuntime.make(QueueLive(queueOptions).pipe(Layer.provideMerge(client)))
  const run = <A>(effect: Effect.Effect<A, unknown, Services | SqlClient.SqlClient>): Promise<A> =>
    runtime.runPromiseExit(effect).then(settle)
  let queue: Queue.QueueShape
  try {
    queue = await run(Queue.Queue)
  } catch (error) {
    await runtime.dispose()
    throw error
  }

  let closing: Promise<void> | undefined
  const workers = new Set<WorkerHandle>()
  /** Calls not yet settled (workers being started among them): `close` waits for them. */
  const calls = new Set<Promise<unknown>>()
  /** `f()` unless the queue is closing. */
  const open = <A>(method: string, f: () => Promise<A>): Promise<A> => {
    if (closing !== undefined) return Promise.reject(new QueueClosed({ method }))
    const call = f()
    calls.add(call)
    const settled = () => void calls.delete(call)
    call.then(settled, settled)
    return call
  }
  const inTransaction = <A, E>(effect: Effect.Effect<A, E>, transaction: CallerConnection | undefined) =>
    transaction === undefined ? effect : Queue.joinTransaction(transaction)(effect)
  const progress = (context: Job.JobContext, value: number, message?: string) =>
    run(queue.progress(context, value, message)).catch(() => undefined)

  const work: PromiseQueue["work"] = (job, handler, options = {}) =>
    open("work", () =>
      PromiseWorker.start(runtime, job, handler, options, progress, (w) => workers.delete(w)).then((handle) => {
        workers.add(handle)
        return handle
      }))

  return {
    enqueue: (job, payload, options) =>
      open("enqueue", () => {
        const { transaction, ...rest } = options ?? {}
        return run(inTransaction(queue.enqueue(job, payload, rest), transaction))
      }),
    insert: (job, payload, options) =>
      open("insert", () => {
        const { transaction, ...rest } = options ?? {}
        return run(inTransaction(queue.insert(job, payload, rest), transaction))
      }),
    enqueueMany: (job, payloads, options) =>
      open("enqueueMany", () => {
        const { transaction, ...rest } = options ?? {}
        return run(inTransaction(queue.enqueueMany(job, payloads, rest), transaction))
      }),
    get: (id) => open("get", () => run(Effect.map(queue.get(id), details))),
    cancel: (id) => open("cancel", () => run(queue.cancel(id))),
    retry: (id) => open("retry", () => run(queue.retry(id))),
    work,
    close: () => {
      closing ??= Promise.allSettled(Array.from(calls))
        .then(() => Promise.allSettled(Array.from(workers, (w) => w.stop())))
        .then(() => runtime.dispose())
      return closing
    },
    runtime
  }
}

/** A `JobInfo` as plain data: absent values `undefined`, not `Option`s. */
const details = (info: JobInfo): JobDetails => ({
  id: info.id,
  name: info.name,
  state: info.state,
  payload: info.payload,
  priority: info.priority,
  attempts: info.attempts,
  runAt: info.runAt,
  createdAt: info.createdAt,
  claimedAt: Option.getOrUndefined(info.claimedAt),
  finishedAt: Option.getOrUndefined(info.finishedAt),
  lastError: Option.getOrUndefined(info.lastError),
  errors: info.errors,
  result: Option.getOrUndefined(info.result)
})
