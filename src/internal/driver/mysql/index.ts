/**
 * The MySQL 8.0+ / MariaDB 10.6+ driver, built from one module per area, each given the same
 * context (client, tables, run mode, options). MySQL cannot select inside an update of the same
 * table, so the claim is one locking read (`FOR UPDATE SKIP LOCKED`) and one update, in a
 * transaction. Its statements use only syntax that MySQL 8.0+ and MariaDB 10.6+ both accept.
 *
 * @internal
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import type { Driver, Explain } from "../Driver.js"
import { ListenError } from "../errors.js"
import * as Admin from "./admin.js"
import { makeContext, type MysqlOptions } from "./context.js"
import * as Insert from "./insert.js"
import * as Jobs from "./jobs.js"
import * as Limits from "./limits.js"
import * as Migrations from "./migrations.js"
import * as Rates from "./rates.js"
import * as Schedules from "./schedules.js"
import * as Stats from "./stats.js"
import * as Workers from "./workers.js"

export type { MysqlOptions } from "./context.js"

/** `database`: the database's name (`DATABASE()`), which scopes worker lock names. */
export const make = (sql: SqlClient.SqlClient, prefix: string, database: string, options: MysqlOptions = {}): Driver => {
  const ctx = makeContext(sql, prefix, database, options)
  const { explainClaim, explainClaimKeyed, explainProbe, explainStatement, ...jobs } = Jobs.make(ctx)
  return {
    capabilities: {
      listenNotify: false,
      claimsRideOnEnds: true,
      maxStatementBytes: ctx.maxStatementBytes,
      padSpaceKeys: true,
      multiStatements: options.multiStatements ?? true
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
    // No notifications between sessions: the Notifier reads the newest job id instead.
    channelListen: () => Effect.fail(new ListenError("MySQL/MariaDB have no LISTEN")),
    channelNotify: () => Effect.void
  }
}

/** The plans of the probe, the claims and the dashboard's reads as this driver runs them (`Explain`): for tests only. */
export const explain = (sql: SqlClient.SqlClient, prefix: string, options: MysqlOptions = {}): Explain => {
  const ctx = makeContext(sql, prefix, "", options)
  const { explainClaim, explainClaimKeyed, explainProbe, explainStatement } = Jobs.make(ctx)
  const countByState = Admin.countByStateStatement(ctx)
  const list = Admin.listStatement(ctx)
  const pruneRead = Admin.pruneReadStatement(ctx)
  return {
    explainJobList: (filter) => Effect.flatMap(list(filter), explainStatement),
    explainPrune: (state, cutoffUs, limit) => explainStatement(pruneRead(state, cutoffUs, limit)),
    explainClaim,
    explainClaimKeyed,
    explainProbe,
    explainCountByState: (state, cap) => explainStatement(countByState(state, cap)),
    explainStatsRead: (sinceUs, limit) => explainStatement(Stats.readStatement(ctx)(sinceUs, limit))
  }
}
