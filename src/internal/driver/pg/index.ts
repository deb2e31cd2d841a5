/**
 * The PostgreSQL driver (PostgreSQL 9.5+): one statement per operation, built from one module per
 * area, each given the same context (client, tables, run mode, options).
 *
 * @internal
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import type { Driver, Explain } from "../Driver.js"
import * as Admin from "./admin.js"
import { makeContext, type PgOptions } from "./context.js"
import * as Insert from "./insert.js"
import * as Jobs from "./jobs.js"
import * as Limits from "./limits.js"
import * as Listen from "./listen.js"
import * as Migrations from "./migrations.js"
import * as Rates from "./rates.js"
import * as Schedules from "./schedules.js"
import * as Stats from "./stats.js"
import * as Workers from "./workers.js"

export type { PgOptions } from "./context.js"

/** `database`: the database's name (`current_database()`), which scopes worker lock names. */
export const make = (sql: SqlClient.SqlClient, prefix: string, database: string, options: PgOptions = {}): Driver => {
  const ctx = makeContext(sql, prefix, database, options)
  const { explainClaim, explainClaimKeyed, explainProbe, explainStatement, ...jobs } = Jobs.make(ctx)
  return {
    capabilities: {
      listenNotify: options.listen !== undefined,
      claimsRideOnEnds: true,
      maxStatementBytes: undefined,
      padSpaceKeys: false,
      multiStatements: true
    },
    ...Insert.make(ctx),
    ...jobs,
    ...Workers.make(ctx),
    ...Schedules.make(ctx),
    ...Admin.make(ctx),
    ...Limits.make(ctx),
    ...Rates.ops(ctx),
    ...Stats.make(ctx),
    ...Migrations.make(ctx),
    ...Listen.make(ctx)
  }
}

/** The plans of the probe, the claims and the dashboard's reads as this driver runs them (`Explain`): for tests only. */
export const explain = (sql: SqlClient.SqlClient, prefix: string, options: PgOptions = {}): Explain => {
  const ctx = makeContext(sql, prefix, "", options)
  const { explainClaim, explainClaimKeyed, explainProbe, explainStatement } = Jobs.make(ctx)
  const countByState = Admin.countByStateStatement(ctx)
  const list = Admin.listStatement(ctx)
  const prune = Admin.pruneStatement(ctx)
  return {
    explainJobList: (filter) => Effect.flatMap(list(filter), explainStatement),
    explainClaim,
    explainClaimKeyed,
    explainProbe,
    explainCountByState: (state, cap) => explainStatement(countByState(state, cap)),
    explainPrune: (state, cutoffUs, limit) => Effect.flatMap(prune(state, cutoffUs, limit), explainStatement),
    explainStatsRead: (sinceUs, limit) => explainStatement(Stats.readStatement(ctx)(sinceUs, limit))
  }
}
