/**
 * A client that runs nothing: it records the statements sent through it (text and parameters), as
 * the dialect's compiler writes them (from the dialect's package: `SetupError` when it is not
 * installed), and answers each with no rows. `Migrations.dryRun` lists the
 * migrations' SQL with it; the bench's tools take the driver's statements from it, to run them on
 * clients of their own instead of copying their text.
 *
 * @internal
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import * as SqlClient from "@effect/sql/SqlClient"
import type * as SqlConnection from "@effect/sql/SqlConnection"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import type { SetupError } from "../../schema/Errors.js"
import * as DriverPackages from "../driverPackages.js"

export const recordingClient = (
  dialect: "pg" | "mysql",
  record: (text: string, params: ReadonlyArray<unknown>) => void
): Effect.Effect<SqlClient.SqlClient, SetupError> =>
  Effect.gen(function*() {
    const compiler = dialect === "pg"
      ? (yield* DriverPackages.load("pg", () => import("@effect/sql-pg/PgClient"))).makeCompiler()
      : (yield* DriverPackages.load("mysql", () => import("@effect/sql-mysql2/MysqlClient"))).makeCompiler()
    const answer = (text: string, params: ReadonlyArray<unknown>) =>
      Effect.sync(() => {
        record(text, params)
        return [] as Array<any>
      })
    const connection: SqlConnection.Connection = {
      execute: answer,
      executeRaw: answer,
      executeValues: answer,
      executeUnprepared: answer,
      executeStream: (text, params) => Stream.fromEffect(answer(text, params)).pipe(Stream.drain)
    }
    return yield* SqlClient.make({ acquirer: Effect.succeed(connection), compiler, spanAttributes: [] }).pipe(
      Effect.provide(Reactivity.layer)
    )
  })
