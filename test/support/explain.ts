/**
 * The plans of sqlane's probe and claims on the queue's database (`Explain`, built by each driver
 * from the statements it runs), for the plans suite.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import type { Explain } from "../../src/internal/driver/Driver.js"
import * as MysqlDriver from "../../src/internal/driver/mysql/index.js"
import * as PgDriver from "../../src/internal/driver/pg/index.js"
import type { Target } from "./targets.js"

export const explainer = (target: Target, prefix: string): Effect.Effect<Explain, never, SqlClient.SqlClient> =>
  Effect.map(SqlClient.SqlClient, (client) => {
    const sql = client.withoutTransforms()
    return target.dialect === "pg" ? PgDriver.explain(sql, prefix) : MysqlDriver.explain(sql, prefix)
  })
