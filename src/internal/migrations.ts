/**
 * sqlane's own tables, as versioned, append-only migrations per dialect. Never edit a
 * migration that has shipped: add the next number.
 *
 * @internal
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

type Migration = Effect.Effect<void, unknown, SqlClient.SqlClient>

/**
 * The bit of each job state in a row's `unique_states` mask: the states in which the row holds its
 * unique key (pending and running always).
 */
export const stateBits = { pending: 1, running: 2, completed: 4, dead: 8, cancelled: 16 } as const

/**
 * Whether a row holds its unique key in its current state: its `unique_states` mask has the bit
 * of its state ({@link stateBits}). The same text (both dialects) is used by the index and by the
 * statements that read the holder of a key; shipped indexes hold it, so it never changes.
 * `alias` qualifies the columns, e.g. `"o."`.
 */
export const uniqueGuard = (alias = "") =>
  `(${alias}unique_states & CASE ${alias}state ${
    Object.entries(stateBits).map(([state, bit]) => `WHEN '${state}' THEN ${bit}`).join(" ")
  } ELSE 0 END) <> 0`

/** The states a job row may hold (migration 8): the database refuses any other. */
const stateCheck = "state IN ('pending', 'running', 'completed', 'dead', 'cancelled')"
/** Attempt counts are never negative (migration 8). */
const attemptsCheck = "attempts >= 0 AND attempt_base >= 0"

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
  "3_pending_index": Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    const jobs = sql(`${prefix}jobs`)
    // One index for both the probe (a loose index scan over (name, priority)) and the claim (one
    // range per (name, priority), in run_at order): fewer bytes per waiting job, fewer index
    // writes per enqueue, and no plan that sorts the backlog.
    yield* sql`CREATE INDEX ${sql(`${prefix}jobs_pending`)} ON ${jobs} (name, priority, run_at, id) WHERE state = 'pending'`
    yield* sql`DROP INDEX ${sql(`${prefix}jobs_probe`)}`
    yield* sql`DROP INDEX ${sql(`${prefix}jobs_claim`)}`
  }),
  "4_keys": Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    const jobs = sql(`${prefix}jobs`)
    // unique_states: a bit mask of the states in which this row holds its unique key
    // (pending 1, running 2, completed 4, dead 8, cancelled 16); pending and running are always set.
    yield* sql`ALTER TABLE ${jobs} ADD COLUMN unique_key text, ADD COLUMN unique_states smallint,
      ADD COLUMN mutex_key text`
    // At most one job per unique key among the rows in one of their guarded states.
    yield* sql`CREATE UNIQUE INDEX ${sql(`${prefix}jobs_unique`)} ON ${jobs} (unique_key)
      WHERE unique_key IS NOT NULL AND ${sql.literal(uniqueGuard())}`
    // At most one running job per mutex key: two claims of one key cannot both commit.
    yield* sql`CREATE UNIQUE INDEX ${sql(`${prefix}jobs_mutex`)} ON ${jobs} (mutex_key)
      WHERE state = 'running' AND mutex_key IS NOT NULL`
  }),
  "5_schedules": Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    // One row per periodic job: the latest tick enqueued, so a restart knows which ticks it missed.
    yield* sql`CREATE TABLE ${sql(`${prefix}schedules`)} (
      name text PRIMARY KEY,
      last_tick_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL
    )`
  }),
  // Operations: paused job names, progress, and the index pruning reads.
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
  }),
  "7_trace_context": Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    // The span that enqueued the job (`<trace id>:<span id>:<sampled>`): the job's span links to it.
    yield* sql`ALTER TABLE ${sql(`${prefix}jobs`)} ADD COLUMN trace_context text`
  }),
  "8_checks": Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    // A row edited by hand into a state no statement reads, or a negative attempt count, is refused
    // by the database (as Oban's, pg-boss's and River's job-state enums do). Validates the rows
    // already there (a scan under the table's lock; no rewrite).
    yield* sql`ALTER TABLE ${sql(`${prefix}jobs`)}
      ADD CONSTRAINT ${sql(`${prefix}jobs_state_check`)} CHECK (${sql.literal(stateCheck)}),
      ADD CONSTRAINT ${sql(`${prefix}jobs_attempts_check`)} CHECK (${sql.literal(attemptsCheck)})`
  }),
  // MySQL/MariaDB only (a full index there); PostgreSQL's jobs_running is partial, running jobs only.
  "9_drop_running_index": Effect.void,
  "10_worker_relocking": Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    // relocking: the worker found its lock connection lost and is taking its lock again; relocks: how
    // many times it took it again. Rescuers read both (see the rescuer in services/Worker.ts).
    // job_names: the job names it has handlers for, as a JSON array (`sqlane pause` reads them).
    yield* sql`ALTER TABLE ${sql(`${prefix}workers`)}
      ADD COLUMN relocking boolean NOT NULL DEFAULT false,
      ADD COLUMN relocks integer NOT NULL DEFAULT 0,
      ADD COLUMN job_names text NULL`
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
  })
})

/** The migrations of a dialect, keyed `<id>_<name>` as `Migrator.fromRecord` reads them. */
export const forDialect = (dialect: "pg" | "mysql", prefix: string): Record<string, Migration> =>
  dialect === "pg" ? pg(prefix) : mysql(prefix)
