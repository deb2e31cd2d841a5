/**
 * What the driver suite's tests share: a driver on a table prefix of its own, a fixed clock, and
 * small builders of rows, groups and ends. Jobs are put in a state through the driver's own
 * operations (insert, claim, end, cancel), so every fixture is a row the driver itself wrote.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type * as SqlConnection from "@effect/sql/SqlConnection"
import * as Effect from "effect/Effect"
import { Database } from "../../src/internal/Database.js"
import type { ClaimedRow, Driver, Finish, Group, InsertRow } from "../../src/internal/driver/Driver.js"
import type { QueueOptions } from "../../src/services/QueueConfig.js"
import { withQueue } from "../support/helpers.js"
import type { Target } from "../support/targets.js"

/** What a test of the suite gets: the driver, its table prefix and the client (no name transforms). */
export interface DriverTest {
  readonly driver: Driver
  readonly prefix: string
  readonly sql: SqlClient.SqlClient
}

/**
 * Runs `body` with the driver of a fresh QueueLive on its own table prefix (migrated, no pruner),
 * and drops the prefix's tables afterwards. The driver is the one the services use
 * (`Database.statements`).
 */
export const withDriver = <A, E>(
  target: Target,
  body: (t: DriverTest) => Effect.Effect<A, E, any>,
  options: QueueOptions = {}
) =>
  withQueue(
    target,
    (prefix) =>
      Effect.gen(function*() {
        const { driver } = yield* Database
        const sql = (yield* SqlClient.SqlClient).withoutTransforms()
        return yield* body({ driver, prefix, sql })
      }),
    { prune: false, ...options }
  )

/** The suite's clock: 2026-01-01T00:00:00Z in µs. Every time the tests write is relative to it. */
export const t0 = Date.UTC(2026, 0, 1) * 1000
/** `n` seconds in µs. */
export const s = (n: number) => n * 1_000_000

/** A row to insert: job name `name`, payload `{}`, priority 0, due at `t0`, no key, no trace. */
export const row = (name: string, fields: Partial<InsertRow> = {}): InsertRow => ({
  name,
  payload: "{}",
  priority: 0,
  runAtUs: t0,
  mutexKey: null,
  limitKey: null,
  traceContext: null,
  ...fields
})

/** The claim's groups of job names at priority 0. */
export const groups = (...names: ReadonlyArray<string>): ReadonlyArray<Group> => names.map((name) => ({ name, priority: 0 }))

/** Inserts `rows` at `t0`; returns their ids in order. */
export const insert = (driver: Driver, ...rows: ReadonlyArray<InsertRow>) => driver.jobInsertMany(rows, t0, undefined)

/** Inserts `n` jobs of `name`, due one second apart before `t0`, in that order; returns their ids. */
export const insertDue = (driver: Driver, name: string, n: number) =>
  insert(driver, ...Array.from({ length: n }, (_, i) => row(name, { runAtUs: t0 - s(n - i) })))

/** Claims up to `limit` due jobs of `name` (priority 0) at `t0` for worker `workerId`. */
export const claim = (driver: Driver, name: string, limit = 100, workerId = "w1") =>
  driver.jobClaim(groups(name), limit, t0, workerId)

/**
 * The end of `job`'s attempt in `state`: finished at `t0 + 1 s` when it ends there (completed, dead),
 * nothing else written unless `fields` says.
 */
export const end = (
  job: Pick<ClaimedRow, "id" | "attempts">,
  state: Finish["state"],
  fields: Partial<Finish> = {}
): Finish => ({
  id: job.id,
  attempt: job.attempts,
  state,
  runAtUs: null,
  finishedAtUs: state === "completed" || state === "dead" ? t0 + s(1) : null,
  lastError: null,
  errors: null,
  result: null,
  ...fields
})

/** Inserts one job of `name` and ends its first attempt in `state` (with `fields`); returns its id. */
export const ended = (driver: Driver, name: string, state: "completed" | "dead", fields: Partial<Finish> = {}) =>
  Effect.gen(function*() {
    const [id] = yield* insert(driver, row(name))
    const [job] = yield* driver.jobClaim(groups(name), 1, t0, "w1")
    if (job?.id !== id) return yield* Effect.dieMessage(`expected to claim job ${id}`)
    yield* driver.jobFinishMany([end(job, state, fields)])
    return id
  })

/** The state of job `id` (`undefined`: no row). */
export const stateOf = (driver: Driver, id: string) => Effect.map(driver.jobGet(id), (job) => job?.state)

/** A connection of the pool of its own for the test's scope (a session for locks). */
export const session = Effect.flatMap(SqlClient.SqlClient, (sql) => sql.reserve)

/** Runs a lock statement (`[sql, params]`) on `conn`; whether its one value says taken (true or 1). */
export const runLock = (conn: SqlConnection.Connection, [text, params]: readonly [string, ReadonlyArray<unknown>]) =>
  Effect.map(conn.executeValues(text, params), (rows) => {
    const value = rows[0]?.[0]
    return value === true || Number(value) === 1
  })

/** The connection id of `conn`'s session (`connectionIdStatement`). */
export const connectionId = (driver: Driver, conn: SqlConnection.Connection) =>
  Effect.map(conn.executeValues(driver.connectionIdStatement, []), (rows) => Number(rows[0]?.[0]))

/** Sorts rows by a key, for operations whose order is not part of their contract. */
export const sortBy = <A>(rows: ReadonlyArray<A>, key: (a: A) => string | number): Array<A> =>
  [...rows].sort((a, b) => {
    const x = key(a)
    const y = key(b)
    return x < y ? -1 : x > y ? 1 : 0
  })
