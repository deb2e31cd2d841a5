/**
 * MySQL/MariaDB: sqlane's own tables, as versioned, append-only migrations (never edit one that has
 * shipped: add the next number), the list of those applied, and the lock that serializes runs.
 *
 * @internal
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import { SetupError } from "../../../schema/Errors.js"
import { poolSizeOf } from "../../Database.js"
import type { Migration, MigrationsOps } from "../Driver.js"
import { attemptsCheck, migrationDropAll, migrationList, stateCheck, uniqueGuard } from "../shared.js"
import type { MysqlContext } from "./context.js"

export const migrations = (prefix: string): Record<string, Migration> => ({
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
  "3_pending_index": Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    yield* sql`ALTER TABLE ${sql(`${prefix}jobs`)}
      ADD KEY ${sql(`${prefix}jobs_pending`)} (state, name, priority, run_at, id),
      DROP KEY ${sql(`${prefix}jobs_probe`)},
      DROP KEY ${sql(`${prefix}jobs_claim`)}`
  }),
  "4_keys": Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    // MySQL has no partial indexes: generated columns that are NULL outside the guarded states,
    // under unique indexes (NULLs never conflict).
    yield* sql`ALTER TABLE ${sql(`${prefix}jobs`)}
      ADD COLUMN unique_key VARCHAR(255) NULL,
      ADD COLUMN unique_states SMALLINT NULL,
      ADD COLUMN mutex_key VARCHAR(255) NULL,
      ADD COLUMN unique_active VARCHAR(255) GENERATED ALWAYS AS
        (CASE WHEN ${sql.literal(uniqueGuard())} THEN unique_key END) STORED,
      ADD COLUMN mutex_running VARCHAR(255) GENERATED ALWAYS AS
        (CASE WHEN state = 'running' THEN mutex_key END) STORED,
      ADD UNIQUE KEY ${sql(`${prefix}jobs_unique`)} (unique_active),
      ADD UNIQUE KEY ${sql(`${prefix}jobs_mutex`)} (mutex_running)`
  }),
  "5_schedules": Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    yield* sql`CREATE TABLE ${sql(`${prefix}schedules`)} (
      name VARCHAR(255) NOT NULL,
      last_tick_at DATETIME(6) NOT NULL,
      updated_at DATETIME(6) NOT NULL,
      PRIMARY KEY (name)
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
  }),
  "7_trace_context": Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    yield* sql`ALTER TABLE ${sql(`${prefix}jobs`)} ADD COLUMN trace_context VARCHAR(128) NULL`
  }),
  "8_checks": Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    // As on PostgreSQL. MariaDB and MySQL 8.0.16+ enforce CHECK constraints (MySQL 8.0.1–8.0.15
    // parse and ignore them); adding one copies the table (ALGORITHM=COPY), blocking writes to it
    // for as long as the copy takes — see docs/limits.md.
    yield* sql`ALTER TABLE ${sql(`${prefix}jobs`)}
      ADD CONSTRAINT ${sql(`${prefix}jobs_state_check`)} CHECK (${sql.literal(stateCheck)}),
      ADD CONSTRAINT ${sql(`${prefix}jobs_attempts_check`)} CHECK (${sql.literal(attemptsCheck)})`
  }),
  "9_drop_running_index": Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    // Running jobs are found by the range state = 'running' of jobs_finished (state, finished_at), as
    // well as by jobs_running (state, worker_id): one secondary index less to write on every insert,
    // claim and end. Dropping an index is in place (no table copy) on MySQL 8.0+ and MariaDB 10.6+.
    yield* sql`ALTER TABLE ${sql(`${prefix}jobs`)} DROP KEY ${sql(`${prefix}jobs_running`)}`
  }),
  "10_worker_relocking": Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    // As on PostgreSQL (BOOLEAN is TINYINT(1) on MySQL and MariaDB). The table holds a row per worker.
    yield* sql`ALTER TABLE ${sql(`${prefix}workers`)}
      ADD COLUMN relocking BOOLEAN NOT NULL DEFAULT FALSE,
      ADD COLUMN relocks INT NOT NULL DEFAULT 0,
      ADD COLUMN job_names TEXT NULL`
  }),
  "11_limits": Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    // As on PostgreSQL, with generated columns for the partial indexes (NULL unless the row is
    // running with a slot). The name's slot leads its index, so a name's running slots are one
    // range (`IS NOT NULL`) of it; `limit_key_running` (the key of a running row holding a key
    // slot) makes a key's running slots one lookup (name, key). Neither read walks rows that have
    // stopped running.
    yield* sql`ALTER TABLE ${sql(`${prefix}jobs`)}
      ADD COLUMN limit_key VARCHAR(255) NULL,
      ADD COLUMN name_slot INT NULL,
      ADD COLUMN key_slot INT NULL,
      ADD COLUMN name_slot_running INT GENERATED ALWAYS AS (CASE WHEN state = 'running' THEN name_slot END) STORED,
      ADD COLUMN limit_key_running VARCHAR(255) GENERATED ALWAYS AS
        (CASE WHEN state = 'running' AND key_slot IS NOT NULL THEN limit_key END) STORED,
      ADD UNIQUE KEY ${sql(`${prefix}jobs_name_slot`)} (name_slot_running, name),
      ADD UNIQUE KEY ${sql(`${prefix}jobs_key_slot`)} (name, limit_key_running, key_slot)`
    yield* sql`ALTER TABLE ${sql(`${prefix}workers`)} ADD COLUMN job_limits TEXT NULL`
    yield* sql`CREATE TABLE ${sql(`${prefix}limits`)} (
      name VARCHAR(255) NOT NULL,
      running INT NULL,
      running_per_key INT NULL,
      updated_at DATETIME(6) NOT NULL,
      PRIMARY KEY (name)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`
  }),
  "12_rates": Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    // As on PostgreSQL. `rate_key` '' is the job name's own row; a concurrency key is 1–255
    // characters, compared as the jobs' keys are (utf8mb4_bin).
    yield* sql`CREATE TABLE ${sql(`${prefix}rates`)} (
      name VARCHAR(255) NOT NULL,
      rate_key VARCHAR(255) NOT NULL,
      window_us BIGINT NOT NULL,
      starts INT NOT NULL,
      blocked_until_us BIGINT NULL,
      PRIMARY KEY (name, rate_key),
      KEY ${sql(`${prefix}rates_blocked`)} (name, blocked_until_us)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`
  }),
  "13_fair_shares": Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    // Fair shares, as on PostgreSQL; without partial indexes every row has an entry (the jobs
    // without a key under NULL, so those of a name with fair shares are one range too).
    yield* sql`ALTER TABLE ${sql(`${prefix}jobs`)}
      ADD KEY ${sql(`${prefix}jobs_pending_key`)} (state, name, priority, limit_key, run_at, id)`
  }),
  "14_stats": Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    // As on PostgreSQL; names compare as the jobs' names do (utf8mb4_bin).
    yield* sql`CREATE TABLE ${sql(`${prefix}stats`)} (
      minute_us BIGINT NOT NULL,
      name VARCHAR(255) NOT NULL,
      completed INT NOT NULL DEFAULT 0,
      failed INT NOT NULL DEFAULT 0,
      pickup_le_1 INT NOT NULL DEFAULT 0, pickup_le_2 INT NOT NULL DEFAULT 0, pickup_le_5 INT NOT NULL DEFAULT 0,
      pickup_le_10 INT NOT NULL DEFAULT 0, pickup_le_25 INT NOT NULL DEFAULT 0, pickup_le_50 INT NOT NULL DEFAULT 0,
      pickup_le_100 INT NOT NULL DEFAULT 0, pickup_le_250 INT NOT NULL DEFAULT 0, pickup_le_500 INT NOT NULL DEFAULT 0,
      pickup_le_1000 INT NOT NULL DEFAULT 0, pickup_le_2500 INT NOT NULL DEFAULT 0, pickup_le_5000 INT NOT NULL DEFAULT 0,
      pickup_le_10000 INT NOT NULL DEFAULT 0, pickup_le_30000 INT NOT NULL DEFAULT 0, pickup_le_60000 INT NOT NULL DEFAULT 0,
      pickup_le_300000 INT NOT NULL DEFAULT 0, pickup_le_900000 INT NOT NULL DEFAULT 0, pickup_le_3600000 INT NOT NULL DEFAULT 0,
      pickup_more INT NOT NULL DEFAULT 0,
      PRIMARY KEY (minute_us, name)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`
  }),
  "15_schedule_descriptions": Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    // As on PostgreSQL (the names as long as the jobs').
    yield* sql`ALTER TABLE ${sql(`${prefix}schedules`)} ADD COLUMN job_name VARCHAR(255) NULL, ADD COLUMN expression TEXT NULL,
      ADD COLUMN time_zone VARCHAR(255) NULL, ADD COLUMN next_tick_at DATETIME(6) NULL`
  }),
  "16_list_indexes": Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    // The job lists, as on PostgreSQL. InnoDB writes a secondary index only when its columns change:
    // (unique_key, id) once per job (every job has an entry, NULL for those without a key), the two
    // holding the state on every state change. The finished index gains the name: the overview's
    // counts of a state read it alone, not each row too. Added in place, without blocking writes
    // (MySQL 8.0, MariaDB 10.6+).
    yield* sql`ALTER TABLE ${sql(`${prefix}jobs`)}
      ADD KEY ${sql(`${prefix}jobs_name_state`)} (name, state, id),
      ADD KEY ${sql(`${prefix}jobs_state`)} (state, id),
      ADD KEY ${sql(`${prefix}jobs_unique_key`)} (unique_key, id),
      DROP KEY ${sql(`${prefix}jobs_finished`)},
      ADD KEY ${sql(`${prefix}jobs_finished`)} (state, finished_at, name)`
  }),
  "17_runtime_rates": Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    // As on PostgreSQL (nullable columns at the end: added in place, MySQL 8.0 and MariaDB 10.3+).
    yield* sql`ALTER TABLE ${sql(`${prefix}limits`)} ADD COLUMN rate_starts INT NULL, ADD COLUMN rate_per_ms BIGINT NULL,
      ADD COLUMN rate_per_key_starts INT NULL, ADD COLUMN rate_per_key_per_ms BIGINT NULL`
  })
})

export const make = (ctx: MysqlContext): MigrationsOps => {
  const { prefix, sql } = ctx
  return {
    migrations: migrations(prefix),
    migrationList: migrationList(sql, prefix, "DATABASE()"),
    migrationDropAll: migrationDropAll(sql, prefix),
    // DDL commits implicitly, so a transaction cannot hold the lock: a session lock (`GET_LOCK`) is
    // held on a reserved connection while the Migrator uses another one. Migrating therefore needs a
    // pool of at least 2 connections.
    migrationLocked: (migrate) =>
      Effect.gen(function*() {
        // With one connection the Migrator would wait forever for the one the lock holds.
        const poolSize = poolSizeOf(sql)
        if (poolSize !== undefined && poolSize < 2) {
          return yield* new SetupError({
            message: `migrating on MySQL/MariaDB needs a pool of at least 2 connections (the migration lock holds ` +
              `one while the migrations run on another); maxConnections is ${poolSize}. Raise it, or run ` +
              "`sqlane migrate` at deploy time and pass `migrate: false`"
          })
        }
        const name = `sqlane:migrate:${prefix}`
        const conn = yield* sql.reserve
        yield* Effect.acquireRelease(
          // Waits up to 10 minutes for another process's migration.
          conn.executeValues("SELECT GET_LOCK(?, 600)", [name]).pipe(
            Effect.flatMap((rows: ReadonlyArray<ReadonlyArray<unknown>>) =>
              Number(rows[0]?.[0]) === 1
                ? Effect.void
                : Effect.fail(new SetupError({ message: `timed out waiting for the migration lock ${name}` }))
            )
          ),
          () => Effect.ignore(conn.executeRaw("SELECT RELEASE_LOCK(?)", [name]))
        )
        return yield* migrate
      }).pipe(Effect.scoped)
  }
}
