/**
 * sqlane's own tables, as versioned, append-only migrations per dialect. Never edit a
 * migration that has shipped: add the next number.
 *
 * @internal
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

type Migration = Effect.Effect<void, unknown, SqlClient.SqlClient>

const pg = (prefix: string): Record<string, Migration> => ({
  "1_create_jobs": Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    const jobs = sql(`${prefix}jobs`)
    yield* sql`CREATE TABLE ${jobs} (
      id bigserial PRIMARY KEY,
      name text NOT NULL,
      state text NOT NULL DEFAULT 'pending',
      payload text NOT NULL,
      priority integer NOT NULL DEFAULT 0,
      run_at timestamptz NOT NULL,
      attempts integer NOT NULL DEFAULT 0,
      created_at timestamptz NOT NULL,
      claimed_at timestamptz,
      finished_at timestamptz,
      worker_id text,
      last_error text,
      errors text,
      result text
    )`
    // The probe's loose index scan walks this index, one entry per name with pending jobs.
    yield* sql`CREATE INDEX ${sql(`${prefix}jobs_probe`)} ON ${jobs} (name, run_at) WHERE state = 'pending'`
    // The claim reads due jobs in claim order.
    yield* sql`CREATE INDEX ${sql(`${prefix}jobs_claim`)} ON ${jobs} (priority, run_at, id) WHERE state = 'pending'`
    yield* sql`CREATE INDEX ${sql(`${prefix}jobs_running`)} ON ${jobs} (worker_id) WHERE state = 'running'`
  }),
  "2_workers": Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    // attempt_base: attempts made before the last manual retry; the retry schedule counts from it.
    yield* sql`ALTER TABLE ${sql(`${prefix}jobs`)} ADD COLUMN attempt_base integer NOT NULL DEFAULT 0`
    // One row per live worker: its heartbeat is the lease on every job it runs.
    yield* sql`CREATE TABLE ${sql(`${prefix}workers`)} (
      id text PRIMARY KEY,
      started_at timestamptz NOT NULL,
      heartbeat_at timestamptz NOT NULL,
      host text NOT NULL,
      pid integer NOT NULL
    )`
  }),
  // Operations (issue 6): paused job names, progress, and the index pruning reads.
  "6_operations": Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    const jobs = sql(`${prefix}jobs`)
    // A paused job name is not claimed by any worker; the row's existence is the pause.
    yield* sql`CREATE TABLE ${sql(`${prefix}paused`)} (
      name text PRIMARY KEY,
      paused_at timestamptz NOT NULL
    )`
    // The last progress a handler reported: JSON {"value","message","attempt","at"}.
    yield* sql`ALTER TABLE ${jobs} ADD COLUMN progress text`
    // Pruning walks finished jobs of one state, oldest first.
    yield* sql`CREATE INDEX ${sql(`${prefix}jobs_finished`)} ON ${jobs} (state, finished_at)
      WHERE state IN ('completed', 'dead', 'cancelled')`
  })
})

const mysql = (prefix: string): Record<string, Migration> => ({
  "1_create_jobs": Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    const jobs = sql(`${prefix}jobs`)
    yield* sql`CREATE TABLE ${jobs} (
      id BIGINT NOT NULL AUTO_INCREMENT,
      name VARCHAR(255) NOT NULL,
      state VARCHAR(16) NOT NULL DEFAULT 'pending',
      payload LONGTEXT NOT NULL,
      priority INT NOT NULL DEFAULT 0,
      run_at DATETIME(6) NOT NULL,
      attempts INT NOT NULL DEFAULT 0,
      created_at DATETIME(6) NOT NULL,
      claimed_at DATETIME(6) NULL,
      finished_at DATETIME(6) NULL,
      worker_id VARCHAR(64) NULL,
      last_error LONGTEXT NULL,
      errors LONGTEXT NULL,
      result LONGTEXT NULL,
      PRIMARY KEY (id),
      KEY ${sql(`${prefix}jobs_probe`)} (state, name, run_at),
      KEY ${sql(`${prefix}jobs_claim`)} (state, priority, run_at, id),
      KEY ${sql(`${prefix}jobs_running`)} (state, worker_id)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`
  }),
  "2_workers": Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    yield* sql`ALTER TABLE ${sql(`${prefix}jobs`)} ADD COLUMN attempt_base INT NOT NULL DEFAULT 0`
    yield* sql`CREATE TABLE ${sql(`${prefix}workers`)} (
      id VARCHAR(64) NOT NULL,
      started_at DATETIME(6) NOT NULL,
      heartbeat_at DATETIME(6) NOT NULL,
      host VARCHAR(255) NOT NULL,
      pid INT NOT NULL,
      PRIMARY KEY (id)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`
  }),
  "6_operations": Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    yield* sql`CREATE TABLE ${sql(`${prefix}paused`)} (
      name VARCHAR(255) NOT NULL,
      paused_at DATETIME(6) NOT NULL,
      PRIMARY KEY (name)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`
    yield* sql`ALTER TABLE ${sql(`${prefix}jobs`)} ADD COLUMN progress LONGTEXT NULL,
      ADD KEY ${sql(`${prefix}jobs_finished`)} (state, finished_at)`
  })
})

/** The migrations of a dialect, keyed `<id>_<name>` as `Migrator.fromRecord` reads them. */
export const forDialect = (dialect: "pg" | "mysql", prefix: string): Record<string, Migration> =>
  dialect === "pg" ? pg(prefix) : mysql(prefix)
