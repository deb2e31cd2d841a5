/**
 * A client that runs nothing: it records the statements sent through it (text and parameters), as
 * the dialect's compiler writes them, and answers each with no rows. `Migrations.dryRun` lists the
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

export const recordingClient = (
  dialect: "pg" | "mysql",
  record: (text: string, params: ReadonlyArray<unknown>) => void
): Effect.Effect<SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const compiler = dialect === "pg"
      ? (yield* Effect.promise(() => import("@effect/sql-pg/PgClient"))).makeCompiler()
      : (yield* Effect.promise(() => import("@effect/sql-mysql2/MysqlClient"))).makeCompiler()
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
