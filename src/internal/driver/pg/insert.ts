/**
 * PostgreSQL: inserting jobs (one, many, with a unique key) and the newest job id.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import type { InsertOps } from "../Driver.js"
import { firstId, insertUnique, newestId, uniqueGuard } from "../shared.js"
import type { PgContext } from "./context.js"

/** Joins payloads sent as one text (U+001E, record separator; never raw in JSON text). */
const payloadSeparator = "\u001e"

export const make = (ctx: PgContext): InsertOps => {
  const { jobs, prefix, run, sql, ts } = ctx
  // The one-job insert, compiled once: its parameters are, in order, name, payload, priority,
  // run_at (µs), created_at (µs), mutex key, concurrency key, trace context (and the NOTIFY channel
  // and payload).
  const insertOne = sql`INSERT INTO ${jobs} (name, payload, priority, run_at, created_at, mutex_key, limit_key, trace_context)
          VALUES (${"name"}, ${"payload"}, ${0}, ${ts(0)}, ${ts(0)}, ${null}, ${null}, ${null})
          RETURNING id`
  const [insertOneText] = insertOne.compile()
  const [insertOneNotifyText] = sql`WITH ins AS (${insertOne})
      SELECT ins.id FROM ins CROSS JOIN (SELECT pg_notify(${"channel"}, ${"payload"})) AS n`.compile()
  /**
   * What a unique insert does when the key is held: nothing (`skip`), or, when the holder is pending
   * and of the same name, it takes the new row's payload, priority, mutex and concurrency keys, trace context and
   * `run_at` (`replace`) or the earlier `run_at` of the two (`throttle`). The conflict target is the
   * partial index `jobs_unique` (its predicate, as the index holds it); the update's `WHERE` sees the
   * holder's latest committed version (READ COMMITTED), locked, so a claim in between leaves it as it is.
   */
  const onHeld = (mode: "skip" | "replace" | "throttle" | undefined) =>
    mode === undefined || mode === "skip"
      ? sql`ON CONFLICT DO NOTHING`
      : sql`ON CONFLICT (unique_key) WHERE unique_key IS NOT NULL AND ${sql.literal(uniqueGuard())}
        DO UPDATE SET payload = EXCLUDED.payload, priority = EXCLUDED.priority, mutex_key = EXCLUDED.mutex_key,
          limit_key = EXCLUDED.limit_key, trace_context = EXCLUDED.trace_context,
          run_at = ${mode === "replace" ? sql`EXCLUDED.run_at` : sql`LEAST(${jobs}.run_at, EXCLUDED.run_at)`}
        WHERE ${jobs}.state = 'pending' AND ${jobs}.name = EXCLUDED.name`
  return {
    jobInsertMany: (rows, nowUs, notify) => {
      if (rows.length === 1) {
        // One job (the common `enqueue`): a plain VALUES insert, cheaper to plan than the unnest; its
        // text is compiled once (see `insertOneText`), only the values change.
        const r = rows[0]
        const params: Array<unknown> = [r.name, r.payload, r.priority, r.runAtUs, nowUs, r.mutexKey, r.limitKey, r.traceContext]
        if (notify !== undefined) params.push(`${prefix}jobs`, notify)
        return Effect.map(
          run(sql.unsafe<{ id: string }>(notify === undefined ? insertOneText : insertOneNotifyText, params)),
          (rows) => [String(rows[0].id)]
        )
      }
      const first = rows[0]
      const uniform = rows.every((r) =>
        r.name === first.name && r.priority === first.priority && r.runAtUs === first.runAtUs &&
        r.traceContext === first.traceContext
      )
      // One job name, priority, run_at and trace (every `enqueueMany`): those as scalars, and only
      // the payloads and keys as arrays.
      // The payloads travel as one text, joined by U+001E: JSON text never holds a raw control
      // character (JSON.stringify escapes them), and a text[] parameter costs an escaping pass over
      // every payload in the driver and a parse of the array literal in the server.
      const joinable = rows.every((r) => r.mutexKey === null && r.limitKey === null && !r.payload.includes(payloadSeparator))
      const insert = uniform && joinable
        ? sql`INSERT INTO ${jobs} (name, payload, priority, run_at, created_at, trace_context)
          SELECT ${first.name}, v.payload, ${first.priority}, ${ts(first.runAtUs)}, ${ts(nowUs)}, ${first.traceContext}
          FROM unnest(string_to_array(${rows.map((r) => r.payload).join(payloadSeparator)}::text, chr(30)))
               WITH ORDINALITY AS v(payload, ord)
          ORDER BY v.ord
          RETURNING id`
        : uniform
        ? sql`INSERT INTO ${jobs} (name, payload, priority, run_at, created_at, mutex_key, limit_key, trace_context)
          SELECT ${first.name}, v.payload, ${first.priority}, ${ts(first.runAtUs)}, ${ts(nowUs)}, v.mutex_key,
            v.limit_key, ${first.traceContext}
          FROM unnest(${rows.map((r) => r.payload)}::text[], ${rows.map((r) => r.mutexKey)}::text[],
                      ${rows.map((r) => r.limitKey)}::text[])
               WITH ORDINALITY AS v(payload, mutex_key, limit_key, ord)
          ORDER BY v.ord
          RETURNING id`
        : sql`INSERT INTO ${jobs} (name, payload, priority, run_at, created_at, mutex_key, limit_key, trace_context)
        SELECT v.name, v.payload, v.priority, TIMESTAMPTZ 'epoch' + v.run_at * INTERVAL '1 microsecond', ${ts(nowUs)},
          v.mutex_key, v.limit_key, v.trace_context
        FROM unnest(${rows.map((r) => r.name)}::text[], ${rows.map((r) => r.payload)}::text[],
                    ${rows.map((r) => r.priority)}::int[], ${rows.map((r) => r.runAtUs)}::bigint[],
                    ${rows.map((r) => r.mutexKey)}::text[], ${rows.map((r) => r.limitKey)}::text[],
                    ${rows.map((r) => r.traceContext)}::text[])
             WITH ORDINALITY AS v(name, payload, priority, run_at, mutex_key, limit_key, trace_context, ord)
        ORDER BY v.ord
        RETURNING id`
      // The ids come back as one text, in ascending order: one row to parse instead of one per job.
      const statement = notify === undefined
        ? sql<{ ids: string }>`WITH ins AS (${insert}) SELECT string_agg(id::text, ',' ORDER BY id) AS ids FROM ins`
        : sql<{ ids: string }>`WITH ins AS (${insert})
            SELECT string_agg(ins.id::text, ',' ORDER BY ins.id) AS ids
            FROM ins CROSS JOIN (SELECT pg_notify(${`${prefix}jobs`}, ${notify})) AS n`
      return Effect.map(run(statement), (r) => (r[0]?.ids ?? "") === "" ? [] : r[0].ids.split(","))
    },
    jobInsertUnique: (row, nowUs, notify) => {
      // ON CONFLICT DO NOTHING (or DO UPDATE of a pending holder of the same name, see `onHeld`),
      // then read the holder in a new statement (a new snapshot at READ COMMITTED: the holder may
      // have committed while the insert waited for it). If the holder left its guarded states in
      // between, insert again.
      const insert = sql`INSERT INTO ${jobs}
          (name, payload, priority, run_at, created_at, mutex_key, limit_key, trace_context, unique_key, unique_states)
        VALUES (${row.name}, ${row.payload}, ${row.priority}, ${ts(row.runAtUs)}, ${ts(nowUs)}, ${row.mutexKey},
          ${row.limitKey}, ${row.traceContext},
          ${row.uniqueKey}, ${row.uniqueStates})
        ${onHeld(row.mode)}
        RETURNING id, xmax = 0 AS inserted`
      const statement = notify === undefined
        ? sql<{ id: string; inserted: boolean }>`WITH ins AS (${insert}) SELECT id, inserted FROM ins`
        : sql<{ id: string; inserted: boolean }>`WITH ins AS (${insert})
            SELECT ins.id, ins.inserted FROM ins CROSS JOIN (SELECT pg_notify(${`${prefix}jobs`}, ${notify})) AS n`
      const holder = sql<{ id: string }>`SELECT id FROM ${jobs}
        WHERE unique_key = ${row.uniqueKey} AND ${sql.literal(uniqueGuard())}`
      const written = Effect.map(run(statement), (rows) =>
        rows.length === 0
          ? undefined
          : { id: String(rows[0].id), inserted: rows[0].inserted, replaced: !rows[0].inserted })
      return insertUnique(row.name, row.uniqueKey, written, Effect.map(run(holder), firstId))
    },
    jobNewestId: () => newestId(run, sql, jobs)
  }
}
