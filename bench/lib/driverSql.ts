/**
 * The driver's statements for the bench's tools: what sqlane's driver sends for an operation (text and
 * parameters, on a namespace's tables), taken from a recording client, so that a tool that runs them on
 * a client of its own (the raw `pg` / `mysql2` driver, EXPLAIN) runs sqlane's SQL, not a copy of it.
 */
import * as Effect from "effect/Effect"
import type { Driver } from "../../src/internal/driver/Driver.js"
import * as MysqlDriver from "../../src/internal/driver/mysql/index.js"
import * as PgDriver from "../../src/internal/driver/pg/index.js"
import { recordingClient } from "../../src/internal/driver/recorder.js"

export interface DriverStatement {
  readonly text: string
  readonly params: Array<unknown>
}

/**
 * A driver on the tables of `prefix` (e.g. `${ns}_`) whose operations run nothing: `statements`
 * returns what an operation sends, in order. Every statement is answered with no rows, so an
 * operation that needs an answer to go on stops there (its failure is ignored).
 */
export const recorder = async (dialect: "pg" | "mysql", prefix: string) => {
  let recorded: Array<DriverStatement> = []
  const sql = await Effect.runPromise(recordingClient(dialect, (text, params) => void recorded.push({ text, params: [...params] })))
  const driver = dialect === "pg" ? PgDriver.make(sql, prefix, "") : MysqlDriver.make(sql, prefix, "")
  return {
    statements: async (operation: (driver: Driver) => Effect.Effect<unknown, unknown>): Promise<Array<DriverStatement>> => {
      recorded = []
      await Effect.runPromise(Effect.ignore(Effect.catchAllDefect(operation(driver), () => Effect.void)))
      return recorded
    }
  }
}

/**
 * The one statement `operation` sends, and its parameters with the values marked by `slot` replaced
 * by those of each call.
 */
export const statementOf = async <K extends string>(
  dialect: "pg" | "mysql",
  prefix: string,
  operation: (driver: Driver, slot: (key: K) => any) => Effect.Effect<unknown, unknown>
): Promise<{ readonly text: string; readonly params: (values: Record<K, unknown>) => Array<any> }> => {
  const mark = "\u0000slot:"
  const [statement] = await (await recorder(dialect, prefix)).statements((driver) =>
    operation(driver, (key) => `${mark}${key}`)
  )
  const keys = statement.params.map((p) => (typeof p === "string" && p.startsWith(mark) ? p.slice(mark.length) as K : undefined))
  return {
    text: statement.text,
    params: (values) => statement.params.map((p, i) => (keys[i] === undefined ? p : values[keys[i]!]))
  }
}

/** One job of name `bench`, due at `runAtUs`, for the driver's insert (`jobInsertMany`). */
export const benchRow = (payload: string, runAtUs: number) => ({
  name: "bench",
  payload,
  priority: 0,
  runAtUs,
  mutexKey: null,
  limitKey: null,
  traceContext: null
})
