/**
 * MySQL/MariaDB: the writes of the ends of attempts — one update, or with `deleteCompleted` a delete
 * of the completed jobs' rows and an update of the others — and, when such a write changed fewer
 * rows than it had ends, the same ends written exactly in a transaction of their own.
 *
 * @internal
 */
import type { SqlError } from "@effect/sql/SqlError"
import type * as SqlConnection from "@effect/sql/SqlConnection"
import * as Effect from "effect/Effect"
import * as MysqlText from "../../mysqlText.js"
import type { Finish, StaleEnds } from "../Driver.js"
import { endKey, handoversOf, num, splitEnds, withUnhanded } from "../shared.js"
import type { MysqlContext } from "./context.js"

/** The rows changed by the statements of a multi-statement's results (MySQL/MariaDB). */
export const affectedRowsOf = (results: ReadonlyArray<unknown>): number => {
  let n = 0
  for (const r of results) {
    const affected = Array.isArray(r) ? undefined : (r as { affectedRows?: unknown } | null)?.affectedRows
    if (typeof affected === "number") n += affected
  }
  return n
}

/**
 * The statements that write a batch of ends (`text`, one or more statements), and how to read their
 * results: the rows the ends changed, and the ends whose name slot did not pass (`handKey`).
 */
export interface EndsText {
  readonly text: string
  readonly params: ReadonlyArray<unknown>
  /** How many statements `text` holds (each has a result). */
  readonly statements: number
  /** Of the results of `text`'s statements (and no others): the rows the ends changed. */
  readonly changed: (results: ReadonlyArray<unknown>) => number
  /** Of the same results: `stale` with the ends whose slot did not pass. */
  readonly report: (results: ReadonlyArray<unknown>, stale: StaleEnds) => StaleEnds
}

export const make = (ctx: MysqlContext) => {
  const { deleteCompleted, jobs, sql, usOf } = ctx
  // The ends of attempts, guarded by id, attempt and state: a stale attempt changes nothing.
  /**
   * The ends of attempts: one update; with `deleteCompleted`, a delete of the rows of completed jobs
   * (those not `keep`, see `Finish`) and an update of the others, if any, in one text.
   */
  /** The ends alone: the text, its parameters, and how many statements it holds. */
  const endsOnly = (finishes: ReadonlyArray<Finish>): readonly [string, ReadonlyArray<unknown>, number] => {
    const { removed, rest } = splitEnds(finishes, deleteCompleted)
    if (removed.length === 0) return [...finishStatement(finishes).compile(true), 1]
    // Through the primary key, named: MariaDB reads a lone row equality `(id, attempts) IN ((?, ?))`
    // through no key, and with few running rows prefers the `(state, finished_at)` index for
    // `state = 'running'` even beside `id IN` — and at REPEATABLE READ locks that range and the gap
    // after it, where every new pending job's entry goes. (Index hints need the multi-table form.)
    const [remove, removeParams] = sql`DELETE j FROM ${jobs} j FORCE INDEX (PRIMARY)
        WHERE j.id IN ${sql.in(removed.map((f) => f.id))}
          AND (j.id, j.attempts) IN (${sql.join(", ", false)(removed.map((f) => sql`(${f.id}, ${f.attempt})`))})
          AND j.state = 'running'`.compile(true)
    if (rest.length === 0) return [remove, removeParams, 1]
    const [update, updateParams] = finishStatement(rest).compile(true)
    return [`${remove}; ${update}`, [...removeParams, ...updateParams], 2]
  }
  /**
   * The writes of `finishes`: the ends (`endsOnly`), and, when name slots pass (`Finish.handTo`),
   * before them in the same transaction: each giver still running with its attempt and its slot
   * marks the slot as passing (the number `-1 - slot`, which no claim takes and which leaves the
   * slot's entry in the unique index of running slots); each receiver still running without a slot
   * takes the slot its giver marked; after them, a read of the receivers that hold a slot now. A
   * giver marked is written by the ends (its row is locked by the mark), and then holds nothing.
   */
  const finishStatements = (finishes: ReadonlyArray<Finish>): EndsText => {
    const [ends, endsParams, endStatements] = endsOnly(finishes)
    const handovers = handoversOf(finishes)
    if (handovers.length === 0) {
      return {
        text: ends,
        params: endsParams,
        statements: endStatements,
        changed: affectedRowsOf,
        report: (_, stale) => stale
      }
    }
    const [mark, markParams] = sql`UPDATE ${jobs} FORCE INDEX (PRIMARY) SET name_slot = -1 - name_slot
        WHERE id IN ${sql.in(handovers.map((h) => h.giverId))}
          AND (id, attempts, name_slot) IN (${
      sql.join(", ", false)(handovers.map((h) => sql`(${h.giverId}, ${h.giverAttempt}, ${h.slot})`))
    })
          AND state = 'running'`.compile(true)
    const pairs = handovers.map((h, i) =>
      i === 0
        ? sql`SELECT CAST(${h.receiverId} AS SIGNED) AS receiver, CAST(${h.receiverAttempt} AS SIGNED) AS rattempt,
              CAST(${h.giverId} AS SIGNED) AS giver, CAST(${h.slot} AS SIGNED) AS slot`
        : sql`SELECT ${h.receiverId}, ${h.receiverAttempt}, ${h.giverId}, ${h.slot}`
    )
    const [receive, receiveParams] = sql`UPDATE ${jobs} r FORCE INDEX (PRIMARY)
        JOIN (${sql.join(" UNION ALL ", false)(pairs)}) v ON r.id = v.receiver AND r.attempts = v.rattempt
        JOIN ${jobs} g FORCE INDEX (PRIMARY) ON g.id = v.giver
        SET r.name_slot = v.slot
        WHERE r.id IN ${sql.in(handovers.map((h) => h.receiverId))} AND r.state = 'running' AND r.name_slot IS NULL
          AND g.state = 'running' AND g.name = r.name AND g.name_slot = -1 - v.slot`.compile(true)
    const [read, readParams] = sql`SELECT id, name_slot FROM ${jobs} FORCE INDEX (PRIMARY)
        WHERE id IN ${sql.in(handovers.map((h) => h.receiverId))} AND state = 'running'`.compile(true)
    return {
      text: `${mark}; ${receive}; ${ends}; ${read}`,
      params: [...markParams, ...receiveParams, ...endsParams, ...readParams],
      statements: endStatements + 3,
      changed: (results) => affectedRowsOf(results.slice(2, 2 + endStatements)),
      report: (results, stale) => {
        const rows = (results[results.length - 1] ?? []) as ReadonlyArray<any>
        const holding = new Map(rows.map((r) => [String(r.id), r.name_slot === null ? null : num(r.name_slot)]))
        const received = handovers.filter((h) => holding.get(h.receiverId) === h.slot)
        if (received.length === handovers.length) return stale
        return withUnhanded(stale, handovers, [], new Set(received.map((h) => endKey(h.giverId, h.giverAttempt))))
      }
    }
  }
  const finishStatement = (finishes: ReadonlyArray<Finish>) => {
    const rows = finishes.map((f, i) =>
      i === 0
        ? sql`SELECT CAST(${f.id} AS SIGNED) AS id, CAST(${f.attempt} AS SIGNED) AS attempt, ${f.state} AS state,
              CAST(${f.runAtUs} AS SIGNED) AS run_at_us, CAST(${f.finishedAtUs} AS SIGNED) AS finished_at_us,
              ${f.lastError} AS last_error, ${f.errors} AS errors, ${f.result} AS result`
        : sql`SELECT ${f.id}, ${f.attempt}, ${f.state}, ${f.runAtUs}, ${f.finishedAtUs}, ${f.lastError}, ${f.errors}, ${f.result}`
    )
    // Only the ends' rows, through the primary key (`j.id IN`, as the delete above): with a batch that
    // is a large share of the running rows, MariaDB read the jobs first, every running row, and
    // locked each, so an end waited for (or deadlocked with) a transaction holding an unrelated
    // running job (an app's cancel, a handler's own update).
    return sql`UPDATE ${jobs} j FORCE INDEX (PRIMARY) JOIN (${sql.join(" UNION ALL ", false)(rows)}) v
          ON j.id = v.id AND j.attempts = v.attempt
        SET j.attempts = CASE WHEN v.state = 'released' THEN j.attempts - 1 ELSE j.attempts END,
          j.state = CASE WHEN v.state = 'released' THEN 'pending' ELSE v.state END,
          j.run_at = COALESCE(TIMESTAMPADD(MICROSECOND, v.run_at_us, '1970-01-01 00:00:00'), j.run_at),
          j.finished_at = TIMESTAMPADD(MICROSECOND, v.finished_at_us, '1970-01-01 00:00:00'),
          j.last_error = COALESCE(v.last_error, j.last_error),
          j.errors = COALESCE(v.errors, j.errors),
          j.result = v.result,
          j.worker_id = NULL
        WHERE j.id IN ${sql.in(finishes.map((f) => f.id))} AND j.state = 'running'`
  }
  /** What `notHeld` reads of the rows of `finishes`. */
  const endsRead = (finishes: ReadonlyArray<Finish>) =>
    sql`SELECT id, attempts, state, worker_id IS NULL AS free, ${sql.literal(usOf("run_at"))} AS run_at_us,
        ${sql.literal(usOf("finished_at"))} AS finished_at_us
      FROM ${jobs} FORCE INDEX (PRIMARY) WHERE id IN ${sql.in(finishes.map((f) => f.id))}`.compile(true)
  /**
   * The ends written exactly, in a transaction of their own on `conn` (no transaction open): the
   * rows of the attempts still running are locked first (`FOR UPDATE`), then only those ends are
   * written; the others are the stale ends. For a write that changed fewer rows than it had ends
   * (rows changed count only, not which; a row another attempt deleted is gone either way).
   */
  const finishExactly = (finishes: ReadonlyArray<Finish>, conn: SqlConnection.Connection): Effect.Effect<StaleEnds, SqlError> =>
    Effect.gen(function*() {
      const [lock, lockParams] = sql`SELECT id, attempts FROM ${jobs} FORCE INDEX (PRIMARY)
          WHERE id IN ${sql.in(finishes.map((f) => f.id))} AND state = 'running' FOR UPDATE`.compile(true)
      const results = yield* conn.executeUnprepared(`START TRANSACTION; ${lock}`, MysqlText.values(lockParams), undefined)
      const rows = (results[results.length - 1] ?? []) as ReadonlyArray<any>
      const running = new Set(rows.map((r) => endKey(String(r.id), num(r.attempts))))
      const live = finishes.filter((f) => running.has(endKey(f.id, f.attempt)))
      const stale = new Set<string>()
      for (const f of finishes) if (!running.has(endKey(f.id, f.attempt))) stale.add(endKey(f.id, f.attempt))
      if (live.length === 0) {
        yield* conn.executeUnprepared("COMMIT", [], undefined)
        // No slot passes from an end not written.
        return withUnhanded(stale, [], finishes, new Set())
      }
      const ends = finishStatements(live)
      const written = yield* conn.executeUnprepared(`${ends.text}; COMMIT`, MysqlText.values(ends.params), undefined)
      // Those of stale ends, and of live ends whose slot did not pass.
      return withUnhanded(ends.report(written.slice(0, ends.statements), stale), [], finishes.filter((f) => !live.includes(f)), new Set())
    })
  return { endsRead, finishExactly, finishStatements }
}
