/**
 * The driver of the database one `QueueLive` runs on, and what is known of that database (its
 * version, the session's identity, whether it answers).
 *
 * @internal
 */
import * as Context from "effect/Context"
import type { Reachability } from "./outage.js"
import type { Driver } from "./driver/Driver.js"

export interface DatabaseShape {
  /** The driver of this database (driver/pg, driver/mysql), its operations retried on transient errors. */
  readonly driver: Driver
  /** The server's version string, e.g. `15.19` or `10.11.19-MariaDB`. */
  readonly version: string
  /**
   * Which database this is (server address and database name): in-process hints and cancellations
   * reach only workers on the same database and table prefix.
   */
  readonly identity: string
  /** Whether the database answers, as this queue's background fibers see it (internal/outage.ts). */
  readonly reachability: Reachability
}

export class Database extends Context.Tag("sqlane/internal/Database")<Database, DatabaseShape>() {}

/**
 * The most connections the client's pool opens (`maxConnections` of `@effect/sql-pg` and
 * `@effect/sql-mysql2`), when the client says; undefined for other clients and for the drivers'
 * default (10).
 */
export const poolSizeOf = (client: object): number | undefined => {
  const max = (client as { readonly config?: { readonly maxConnections?: unknown } }).config?.maxConnections
  return typeof max === "number" && Number.isFinite(max) ? max : undefined
}
