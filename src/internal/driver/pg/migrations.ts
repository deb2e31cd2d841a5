/**
 * PostgreSQL: sqlane's own tables, as versioned, append-only migrations (never edit one that has
 * shipped: add the next number), the list of those applied, and the lock that serializes runs.
 *
 * @internal
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import type { Migration, MigrationsOps } from "../Driver.js"
import { attemptsCheck, migrationDropAll, migrationList, stateCheck, uniqueGuard } from "../shared.js"
import type { PgContext } from "./context.js"

export const migrations = (prefix: string): Record<string, Migration> => ({
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
    // many times it took it again. Rescuers read both (see the rescuer, internal/worker/rescuer.ts).
    // job_names: the job names it has handlers for, as a JSON array (`sqlane pause` reads them).
    yield* sql`ALTER TABLE ${sql(`${prefix}workers`)}
      ADD COLUMN relocking boolean NOT NULL DEFAULT false,
      ADD COLUMN relocks integer NOT NULL DEFAULT 0,
      ADD COLUMN job_names text NULL`
  }),
  "11_limits": Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    const jobs = sql(`${prefix}jobs`)
    // limit_key: the job's concurrency key; name_slot, key_slot: the slots a running attempt holds
    // under its name's and its key's concurrency limits (numbered from 0, below the limit). A slot
    // is held while the row is running: the unique indexes make two running attempts with one slot
    // impossible, and a row that stops running frees it, whoever wrote that.
    yield* sql`ALTER TABLE ${jobs} ADD COLUMN limit_key text, ADD COLUMN name_slot integer, ADD COLUMN key_slot integer`
    yield* sql`CREATE UNIQUE INDEX ${sql(`${prefix}jobs_name_slot`)} ON ${jobs} (name, name_slot)
      WHERE state = 'running' AND name_slot IS NOT NULL`
    yield* sql`CREATE UNIQUE INDEX ${sql(`${prefix}jobs_key_slot`)} ON ${jobs} (name, limit_key, key_slot)
      WHERE state = 'running' AND key_slot IS NOT NULL`
    // job_limits: the limits of the job definitions a worker has handlers for, as JSON
    // ({ name: { running, runningPerKey } }: `sqlane status` reads them).
    yield* sql`ALTER TABLE ${sql(`${prefix}workers`)} ADD COLUMN job_limits text NULL`
    // Limits set at run time (`sqlane limit`), over those of the job definitions; null: the definition's.
    yield* sql`CREATE TABLE ${sql(`${prefix}limits`)} (
      name text PRIMARY KEY,
      running integer,
      running_per_key integer,
      updated_at timestamptz NOT NULL
    )`
  }),
  "12_rates": Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    // The rate windows: per job name (rate_key '') and per concurrency key, the window a claim
    // last counted in (window_us, µs since the epoch, a multiple of the rate's period) and the
    // attempts started in it; blocked_until_us: no attempt of the name (or key) starts before
    // then (a handler's `RateLimited`). One row per (name, key), reset when a new window begins.
    yield* sql`CREATE TABLE ${sql(`${prefix}rates`)} (
      name text NOT NULL,
      rate_key text NOT NULL,
      window_us bigint NOT NULL,
      starts integer NOT NULL,
      blocked_until_us bigint,
      PRIMARY KEY (name, rate_key)
    )`
    // The keys of a name held back (`RateLimited`), for the claim that skips them to learn when to come back.
    yield* sql`CREATE INDEX ${sql(`${prefix}rates_blocked`)} ON ${sql(`${prefix}rates`)} (name, blocked_until_us)`
  }),
  "13_fair_shares": Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    // Fair shares: the keyed claim reads the concurrency keys of a (name, priority) with pending
    // jobs one index entry each (a loose index scan), then each key's due jobs in run_at order.
    // Partial: jobs without a concurrency key add no entry.
    yield* sql`CREATE INDEX ${sql(`${prefix}jobs_pending_key`)} ON ${sql(`${prefix}jobs`)} (name, priority, limit_key, run_at, id)
      WHERE state = 'pending' AND limit_key IS NOT NULL`
  }),
  "14_stats": Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    // Per job name and UTC minute (minute_us: its start, µs since the epoch), what the workers of
    // every process counted: attempts completed, attempts failed, and attempts started by pickup
    // latency, one column per bucket (pickup_le_<ms>, then pickup_more). Each process adds its
    // counts every few seconds. The minute leads the key: the last hour is one range of it, and
    // pruning deletes from its start.
    yield* sql`CREATE TABLE ${sql(`${prefix}stats`)} (
      minute_us bigint NOT NULL,
      name text NOT NULL,
      completed integer NOT NULL DEFAULT 0,
      failed integer NOT NULL DEFAULT 0,
      pickup_le_1 integer NOT NULL DEFAULT 0, pickup_le_2 integer NOT NULL DEFAULT 0, pickup_le_5 integer NOT NULL DEFAULT 0,
      pickup_le_10 integer NOT NULL DEFAULT 0, pickup_le_25 integer NOT NULL DEFAULT 0, pickup_le_50 integer NOT NULL DEFAULT 0,
      pickup_le_100 integer NOT NULL DEFAULT 0, pickup_le_250 integer NOT NULL DEFAULT 0, pickup_le_500 integer NOT NULL DEFAULT 0,
      pickup_le_1000 integer NOT NULL DEFAULT 0, pickup_le_2500 integer NOT NULL DEFAULT 0, pickup_le_5000 integer NOT NULL DEFAULT 0,
      pickup_le_10000 integer NOT NULL DEFAULT 0, pickup_le_30000 integer NOT NULL DEFAULT 0, pickup_le_60000 integer NOT NULL DEFAULT 0,
      pickup_le_300000 integer NOT NULL DEFAULT 0, pickup_le_900000 integer NOT NULL DEFAULT 0, pickup_le_3600000 integer NOT NULL DEFAULT 0,
      pickup_more integer NOT NULL DEFAULT 0,
      PRIMARY KEY (minute_us, name)
    )`
  }),
  "15_schedule_descriptions": Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    // Before the list indexes (in the same transaction): the schedules table is locked first, as a
    // tick locks its row before it inserts its job. The other order deadlocks with a tick of a running
    // scheduler: it would hold its row and wait for the jobs table, which the index build holds.
    // What the schedulers of a periodic job run (for the dashboard): the job they enqueue, the cron
    // expression and time zone as given, the next tick they wait for. Null until a scheduler of a
    // version that writes them starts.
    yield* sql`ALTER TABLE ${sql(`${prefix}schedules`)} ADD COLUMN job_name text NULL, ADD COLUMN expression text NULL,
      ADD COLUMN time_zone text NULL, ADD COLUMN next_tick_at timestamptz NULL`
  }),
  "16_list_indexes": Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    const jobs = sql(`${prefix}jobs`)
    // The job lists (the dashboard's, `sqlane jobs`), newest first with keyset pages on id: each
    // filter is one index range in id order. A name and a state: one range of (name, state, id); a
    // name alone: one range per state, merged; a state alone: one range of (state, id); a unique key:
    // (unique_key, id), partial (jobs without a key add no entry); a created-time range: an id range
    // (see driver/createdIds.ts). Running jobs (as many as the workers run at once) are left out of
    // the first two and read from jobs_running: a claim writes no entry in them, and the claim's
    // reads of running jobs (slots, mutex keys) keep to their own indexes. Every other state change
    // writes a new entry in each (state is in the partial indexes' predicates, so no update of it is
    // HOT): one per enqueue and end. Built as the migrations before (writes to the table wait meanwhile).
    yield* sql`CREATE INDEX ${sql(`${prefix}jobs_name_state`)} ON ${jobs} (name, state, id) WHERE state <> 'running'`
    yield* sql`CREATE INDEX ${sql(`${prefix}jobs_state`)} ON ${jobs} (state, id) WHERE state <> 'running'`
    yield* sql`CREATE INDEX ${sql(`${prefix}jobs_unique_key`)} ON ${jobs} (unique_key, id) WHERE unique_key IS NOT NULL`
  }),
  "17_runtime_rates": Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    // Rate limits set at run time (`sqlane limit --rate`), over those of the job definitions, beside
    // the concurrency limits: `starts` per window of `per_ms` milliseconds, of the name and per
    // concurrency key; null: the definition's. A rate is read only with both of its columns.
    yield* sql`ALTER TABLE ${sql(`${prefix}limits`)} ADD COLUMN rate_starts integer NULL, ADD COLUMN rate_per_ms bigint NULL,
      ADD COLUMN rate_per_key_starts integer NULL, ADD COLUMN rate_per_key_per_ms bigint NULL`
  }),
  "18_finished_index_without_completed": Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    const jobs = sql(`${prefix}jobs`)
    // An end that keeps its job's row writes a new entry in every index whose predicate the row's new
    // state meets (state is in the predicates, so no such update is HOT), and completed rows are most
    // of the ends. The finished index now holds dead and cancelled jobs only: completed jobs are
    // counted and pruned through the completed range of (state, id) (the pruner in id order, bounded
    // by the ids created before its cutoff). Built as the migrations before (writes to the table
    // wait meanwhile).
    yield* sql`DROP INDEX ${sql(`${prefix}jobs_finished`)}`
    yield* sql`CREATE INDEX ${sql(`${prefix}jobs_finished`)} ON ${jobs} (state, finished_at) WHERE state IN ('dead', 'cancelled')`
  })
})

export const make = (ctx: PgContext): MigrationsOps => {
  const { prefix, sql } = ctx
  return {
    migrations: migrations(prefix),
    migrationList: migrationList(sql, prefix, "current_schema()"),
    migrationDropAll: migrationDropAll(sql, prefix),
    // A transaction holding `pg_advisory_xact_lock`, on one connection (the Migrator's own
    // transaction nests inside it as a savepoint). The migrations table is created first, inside
    // the lock, so the Migrator's probe for it cannot abort the transaction.
    migrationLocked: (migrate) =>
      sql`SELECT pg_advisory_xact_lock(hashtext(${`sqlane:migrate:${prefix}`}))`.pipe(
        Effect.zipRight(sql`CREATE TABLE IF NOT EXISTS ${sql(`${prefix}migrations`)} (
          migration_id integer primary key,
          created_at timestamp with time zone not null default now(),
          name text not null
        )`),
        Effect.zipRight(migrate),
        sql.withTransaction
      )
  }
}
