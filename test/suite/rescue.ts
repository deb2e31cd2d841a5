/**
 * What a rescue pass reads, on every database: the jobs of workers whose row or lock says they are
 * lost; every running job (its own among them) in the sweep, every `leaseTimeout`, and in the
 * passes of the 5 s after a claim of the worker failed (two at least) — a claim whose commit was
 * applied and whose answer was lost leaves its jobs running under the live worker's id, and only
 * those passes find them. A job whose worker has no row is lost once it was claimed a lease ago (or,
 * on MySQL/MariaDB, its worker's lock is free): a live worker writes its pruned row again at its
 * next heartbeat, and at once when it takes its lock again.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { Job, Queue, Worker } from "../../src/index.js"
import { Database } from "../../src/internal/Database.js"
import { cutLockConnection, pgLockHeldWhere, realSleep, waitUntil, withQueue } from "../support/helpers.js"
import { Noop, Slow } from "../support/jobs.js"
import type { Target } from "../support/targets.js"

export const rescue = (target: Target) => {
  const name = (title: string) => `[${target.id}] ${title}`
  describe("rescue passes", () => {
    it.live(
      name("after a claim of the worker fails, its own job unknown to it is rescued within two passes, not at the sweep"),
      () =>
        withQueue(target, (prefix) =>
          Effect.gen(function*() {
            const sql = (yield* SqlClient.SqlClient).withoutTransforms()
            const jobs = sql(`${prefix}jobs`)
            const queue = yield* Queue.Queue
            const startedMs = Date.now()
            yield* Worker.make({ id: "web-5", handlers: [Job.handler(Noop, () => Effect.void)] })
            // Past the first two passes (which read every running job): the sweep is 30 s away.
            yield* realSleep(1500)
            // What a claim leaves when its COMMIT was applied but its answer was lost.
            const lost = yield* queue.enqueue(Noop, { i: -1 }, { delay: "1 hour" })
            yield* sql`UPDATE ${jobs} SET state = 'running', attempts = 1, worker_id = ${"web-5"},
              claimed_at = created_at, run_at = created_at WHERE id = ${lost}`
            // A job due in a second, and a lock on the table that lets the worker's probe read it
            // but holds its claim (a locking read) until the test ends the claim's connection.
            yield* queue.enqueue(Noop, { i: 1 }, { delay: "1 second" })
            const locker = yield* sql.reserve
            const unlock = locker.executeRaw(target.dialect === "pg" ? "COMMIT" : "UNLOCK TABLES", [])
            // Unlocked whatever happens: a lock left held would stall the dropping of the tables.
            yield* Effect.acquireRelease(
              target.dialect === "pg"
                ? Effect.zipRight(
                  locker.executeRaw("BEGIN", []),
                  locker.executeRaw(`LOCK TABLE "${prefix}jobs" IN EXCLUSIVE MODE`, [])
                )
                : locker.executeRaw(`LOCK TABLES \`${prefix}jobs\` READ`, []),
              () => Effect.ignore(unlock)
            )
            const blocked = target.dialect === "pg"
              ? sql<{ id: number }>`SELECT pid AS id FROM pg_stat_activity
                  WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE ${`%${prefix}jobs%`}`
              : sql<{ id: number }>`SELECT id FROM information_schema.processlist
                  WHERE state LIKE 'Waiting for table%' AND info LIKE ${`%${prefix}jobs%`}`
            yield* waitUntil(Effect.map(blocked, (rows) => rows.length > 0), 10_000, "the worker's claim to wait for the lock")
            assert.strictEqual((yield* queue.get(lost)).state, "running", "rescued before any claim failed")
            for (const { id } of yield* blocked) {
              if (target.dialect === "pg") yield* sql`SELECT pg_terminate_backend(${id})`
              else yield* sql.unsafe(`KILL ${Number(id)}`)
            }
            const failedMs = Date.now()
            yield* unlock
            // The pool may hand out the ended connection once more: a failed read is read again.
            const state = Effect.map(Effect.either(queue.get(lost)), (j) => j._tag === "Right" ? j.right.state : "unread")
            yield* waitUntil(Effect.map(state, (s) => s === "completed"), 10_000, "the rescue")
            const rescuedMs = Date.now()
            // Two passes (500 ms apart) after the failure, long before the sweep (30 s after the start).
            assert.isBelow(rescuedMs - failedMs, 4000)
            assert.isBelow(rescuedMs - startedMs, 20_000)
            // Its handler never ran: the claim is released, not counted as a failed attempt.
            assert.strictEqual((yield* queue.get(lost)).attempts, 1)
          }).pipe(Effect.scoped)),
      30_000
    )

    it.live(
      name("a live worker whose row was pruned (stopped for minutes) writes it again at its next heartbeat; no sweep takes its running job"),
      () =>
        withQueue(target, (prefix) =>
          Effect.gen(function*() {
            const sql = (yield* SqlClient.SqlClient).withoutTransforms()
            const queue = yield* Queue.Queue
            const runs: Array<string> = []
            const handler = (worker: string) =>
              Job.handler(Slow, () => Effect.zipRight(Effect.sync(() => runs.push(worker)), realSleep(3500)))
            yield* Worker.make({ id: "paused-host", handlers: [handler("paused-host")] })
            const id = yield* queue.enqueue(Slow, {})
            yield* waitUntil(Effect.sync(() => runs.length === 1), 10_000, "the job to start")
            // A second worker, whose sweeps (every `leaseTimeout`, 2 s here) read every running job.
            yield* Worker.make({ id: "other", handlers: [handler("other")] })
            // What the prune of worker rows leaves after a worker was stopped for ten leases: no row.
            yield* sql`DELETE FROM ${sql(prefix + "workers")} WHERE id = ${"paused-host"}`
            const rowOf = Effect.map(
              sql<{ id: string }>`SELECT id FROM ${sql(prefix + "workers")} WHERE id = ${"paused-host"}`,
              (rows) => rows.length
            )
            // Written again by its next heartbeat (every 500 ms here).
            yield* waitUntil(Effect.map(rowOf, (n) => n === 1), 2_000, "the row to be written again")
            yield* waitUntil(Effect.map(queue.get(id), (j) => j.state === "completed"), 15_000, "the job to complete")
            // The job ran once, in the worker that claimed it, across the other worker's sweeps.
            assert.deepStrictEqual(runs, ["paused-host"])
            assert.strictEqual((yield* queue.get(id)).attempts, 1)
          }), { rescueInterval: "100 millis", heartbeatInterval: "500 millis", leaseTimeout: "2 seconds" }),
      30_000
    )

    it.live(
      name("a worker whose row was pruned and whose lock connection is cut writes its row again when it takes its lock again, not a heartbeat later"),
      () =>
        withQueue(target, (prefix) =>
          Effect.gen(function*() {
            const sql = (yield* SqlClient.SqlClient).withoutTransforms()
            yield* Worker.make({ id: "cut-off", handlers: [Job.handler(Noop, () => Effect.void)] })
            const relocksOf = Effect.map(
              sql<{ relocks: number }>`SELECT relocks FROM ${sql(prefix + "workers")} WHERE id = ${"cut-off"}`,
              (rows) => rows.length === 0 ? undefined : Number(rows[0].relocks)
            )
            assert.strictEqual(yield* relocksOf, 0)
            // What a worker cut off for minutes finds: its row pruned, its lock connection gone.
            yield* sql`DELETE FROM ${sql(prefix + "workers")} WHERE id = ${"cut-off"}`
            assert.isTrue(yield* cutLockConnection(target, "cut-off"))
            const cutMs = Date.now()
            // Back within its lock check and the retake (the next heartbeat is a minute away).
            yield* waitUntil(Effect.map(relocksOf, (n) => n !== undefined), 10_000, "the row to be written again")
            assert.isBelow(Date.now() - cutMs, 5_000)
          }), { heartbeatInterval: "1 minute", leaseTimeout: "5 minutes" }),
      30_000
    )

    it.live(
      name("a stopping worker marks its row ended while it still holds its lock: a process taking the id after it never has its row ended"),
      () =>
        withQueue(target, (prefix) =>
          Effect.gen(function*() {
            const sql = (yield* SqlClient.SqlClient).withoutTransforms()
            const lockName = (yield* Database).driver.workerLockName("leaving")
            // What the lock was when the row's heartbeat went to the epoch (the worker's end).
            yield* sql.unsafe(`CREATE TABLE ${prefix}ended (held INTEGER NOT NULL)`)
            if (target.dialect === "pg") {
              yield* sql.unsafe(`CREATE FUNCTION ${prefix}ended() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
                INSERT INTO ${prefix}ended SELECT count(*) FROM pg_locks WHERE ${pgLockHeldWhere(lockName)};
                RETURN NEW; END $$`)
              yield* sql.unsafe(`CREATE TRIGGER ${prefix}ended BEFORE UPDATE ON ${prefix}workers FOR EACH ROW
                WHEN (NEW.heartbeat_at < '1971-01-01') EXECUTE FUNCTION ${prefix}ended()`)
            } else {
              yield* sql.unsafe(`CREATE TRIGGER ${prefix}ended BEFORE UPDATE ON ${prefix}workers FOR EACH ROW
                BEGIN IF NEW.heartbeat_at < '1971-01-01' THEN
                  INSERT INTO ${prefix}ended VALUES (IS_USED_LOCK('${lockName}') IS NOT NULL); END IF; END`).unprepared
            }
            yield* Effect.scoped(Worker.make({ id: "leaving", handlers: [Job.handler(Noop, () => Effect.void)] }))
            const ended = yield* sql<{ held: number }>`SELECT held FROM ${sql(prefix + "ended")}`
            assert.deepStrictEqual(ended.map((r) => Number(r.held)), [1])
          }).pipe(Effect.ensuring(Effect.gen(function*() {
            const sql = yield* SqlClient.SqlClient
            yield* Effect.ignore(sql.unsafe(`DROP TABLE IF EXISTS ${prefix}ended`))
            if (target.dialect === "pg") yield* Effect.ignore(sql.unsafe(`DROP FUNCTION IF EXISTS ${prefix}ended() CASCADE`))
          })))),
      30_000
    )

    it.live(
      name("a worker writes its row again once it holds its id: marked ended between its registration and its lock (a worker of that id ending), the row is fresh when the start returns"),
      () =>
        withQueue(target, (prefix) =>
          Effect.gen(function*() {
            const sql = (yield* SqlClient.SqlClient).withoutTransforms()
            const rows = sql(prefix + "workers")
            // The registration's insert is marked ended, as the end of a worker that held the id
            // before would mark it; later writes are left alone.
            yield* sql.unsafe(`CREATE TABLE ${prefix}marked (n INTEGER NOT NULL)`)
            if (target.dialect === "pg") {
              yield* sql.unsafe(`CREATE FUNCTION ${prefix}marked() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
                IF NOT EXISTS (SELECT 1 FROM ${prefix}marked) THEN
                  INSERT INTO ${prefix}marked VALUES (1); NEW.heartbeat_at := '1970-01-01';
                END IF;
                RETURN NEW; END $$`)
              yield* sql.unsafe(`CREATE TRIGGER ${prefix}marked BEFORE INSERT ON ${prefix}workers FOR EACH ROW
                EXECUTE FUNCTION ${prefix}marked()`)
            } else {
              yield* sql.unsafe(`CREATE TRIGGER ${prefix}marked BEFORE INSERT ON ${prefix}workers FOR EACH ROW
                BEGIN IF NOT EXISTS (SELECT 1 FROM ${prefix}marked) THEN
                  INSERT INTO ${prefix}marked VALUES (1); SET NEW.heartbeat_at = '1970-01-01 00:00:00';
                END IF; END`).unprepared
            }
            yield* Worker.make({ id: "taker", handlers: [Job.handler(Noop, () => Effect.void)] })
            const [row] = yield* sql<{ fresh: number | boolean }>`SELECT (heartbeat_at > ${"1971-01-01"}) AS fresh
              FROM ${rows} WHERE id = ${"taker"}`
            // Without the write, the row would say "ended" until the first heartbeat, a minute away.
            assert.strictEqual(Number(row.fresh), 1)
            assert.strictEqual(Number((yield* sql<{ n: number }>`SELECT count(*) AS n FROM ${sql(prefix + "marked")}`)[0].n), 1)
          }).pipe(
            Effect.scoped,
            Effect.ensuring(Effect.gen(function*() {
              const sql = yield* SqlClient.SqlClient
              yield* Effect.ignore(sql.unsafe(`DROP TABLE IF EXISTS ${prefix}marked`))
              if (target.dialect === "pg") yield* Effect.ignore(sql.unsafe(`DROP FUNCTION IF EXISTS ${prefix}marked() CASCADE`))
            }))
          ), { heartbeatInterval: "1 minute", leaseTimeout: "5 minutes" }),
      30_000
    )
  })
}
