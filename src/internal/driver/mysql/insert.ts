/**
 * MySQL/MariaDB: inserting jobs (one, many in chunks that fit `max_allowed_packet`, with a unique
 * key) and the newest job id.
 *
 * @internal
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as MysqlText from "../../mysqlText.js"
import type { InsertOps, InsertRow, UniqueInsertResult, UniqueInsertRow } from "../Driver.js"
import { isUniqueViolation } from "../errors.js"
import { withoutUnreadSpans } from "../run.js"
import { firstId, insertUnique, newestId } from "../shared.js"
import type { MysqlContext } from "./context.js"

export const make = (ctx: MysqlContext): InsertOps => {
  const { autoIncrement, jobs, maxStatementBytes, run, sql, ts } = ctx
  // One job: a prepared insert (`.raw` gives the insert id), compiled once (as on PostgreSQL): only
  // its values change.
  const [insertOneText] = sql`INSERT INTO ${jobs} (name, payload, priority, run_at, created_at, mutex_key, limit_key, trace_context)
      VALUES (${"name"}, ${"payload"}, ${0}, ${ts(0)}, ${ts(0)}, ${null}, ${null}, ${null})`.compile()
  const insertOne = (r: InsertRow, nowUs: number) =>
    Effect.map(
      run(sql.unsafe(insertOneText, [r.name, r.payload, r.priority, r.runAtUs, nowUs, r.mutexKey, r.limitKey, r.traceContext]), "raw"),
      (result: any) => [String(result.insertId)]
    )
  // Several jobs: one unprepared multi-row INSERT, whatever the count (a prepared text per count
  // would fill the server's statement cache), then `LAST_INSERT_ID()` on the same connection: two
  // statements, not one multi-statement, so a connection opened without `multipleStatements` takes
  // them. The text is written here, its strings as mysqlText literals.
  const [jobsText] = sql`${jobs}`.compile()
  const epochUs = (us: number) => `TIMESTAMPADD(MICROSECOND, ${us}, '1970-01-01 00:00:00')`
  const insertHead = `INSERT INTO ${jobsText} (name, payload, priority, run_at, created_at, mutex_key, limit_key, trace_context) VALUES `
  const lastInsertIdText = "SELECT LAST_INSERT_ID() AS id"
  /**
   * `effect`'s statements on one connection, where `LAST_INSERT_ID()` reads the INSERT's: the
   * transaction's (the caller's, or the chunks' below), else one reserved from the pool for them.
   */
  const onOneConnection = <A, E>(effect: Effect.Effect<A, E>) =>
    Effect.flatMap(Effect.serviceOption(SqlClient.TransactionConnection), (tx) =>
      tx._tag === "Some"
        ? effect
        : Effect.scoped(Effect.flatMap(sql.reserve, (conn) =>
          Effect.provideService(effect, SqlClient.TransactionConnection, [conn, 0] as const))))
  const orNull = (s: string | null) => (s === null ? "NULL" : MysqlText.literal(s))
  const insertMany = (rows: ReadonlyArray<InsertRow>, nowUs: number) => {
    const created = epochUs(nowUs)
    let text = insertHead
    for (let i = 0; i < rows.length; i++) {
      const r = rows[i]
      text += `${i === 0 ? "" : ", "}(${MysqlText.literal(r.name)}, ${MysqlText.literal(r.payload)}, ${Number(r.priority)}, ${
        epochUs(Number(r.runAtUs))
      }, ${created}, ${orNull(r.mutexKey)}, ${orNull(r.limitKey)}, ${orNull(r.traceContext)})`
    }
    const insertAndFirstId = Effect.zipRight(
      run(sql.unsafe(text), "unprepared"),
      run(sql.unsafe<{ id: unknown }>(lastInsertIdText), "unprepared")
    )
    return Effect.map(
      onOneConnection(insertAndFirstId),
      (first) => {
        // A multi-row INSERT ... VALUES is a "simple insert": InnoDB gives its rows consecutive
        // ids (in steps of auto_increment_increment) in every autoinc lock mode; LAST_INSERT_ID()
        // is the first.
        const id = BigInt(first[0].id as string | number)
        return rows.map((_, i) => String(id + BigInt(i * autoIncrement)))
      }
    )
  }
  /** The most bytes of row values in one multi-row INSERT: well inside `max_allowed_packet`. */
  const insertBytes = Math.max(32_768, Math.min(maxStatementBytes ?? 16_777_216, 16_777_216) / 2)
  /** A row's bytes in the INSERT's text (its strings as literals, the rest at most 200 bytes). */
  const rowBytes = (r: InsertRow) =>
    MysqlText.literalBytes(r.payload) + MysqlText.literalBytes(r.name) +
    (r.mutexKey === null ? 0 : MysqlText.literalBytes(r.mutexKey)) +
    (r.limitKey === null ? 0 : MysqlText.literalBytes(r.limitKey)) +
    (r.traceContext === null ? 0 : MysqlText.literalBytes(r.traceContext)) + 200
  const insertChunk = (rows: ReadonlyArray<InsertRow>, nowUs: number) =>
    rows.length === 1 ? insertOne(rows[0], nowUs) : insertMany(rows, nowUs)
  /** Rows cut into runs that each fit one INSERT ({@link insertBytes}), in order. */
  const chunksOf = (rows: ReadonlyArray<InsertRow>): Array<ReadonlyArray<InsertRow>> => {
    const chunks: Array<Array<InsertRow>> = [[]]
    let bytes = 0
    for (const r of rows) {
      const size = rowBytes(r)
      if (bytes + size > insertBytes && chunks[chunks.length - 1].length > 0) {
        chunks.push([])
        bytes = 0
      }
      chunks[chunks.length - 1].push(r)
      bytes += size
    }
    return chunks
  }
  /**
   * After a duplicate key, with `replace` or `throttle`: the holder, when pending and of the same
   * name, takes the row's payload, priority, mutex key, trace context and `run_at` (`throttle`: the
   * earlier one). A current read of the holder through the unique index, locked, so a claim in
   * between leaves it as it is; `id = LAST_INSERT_ID(id)` gives its id with the update (the client
   * counts matched rows, `CLIENT_FOUND_ROWS`, so an update that changes nothing still says it
   * matched). A separate UPDATE rather than `INSERT … ON DUPLICATE KEY UPDATE`: the latter's
   * affected-rows count cannot tell an insert from a holder left alone under `CLIENT_FOUND_ROWS`.
   */
  const uniqueIndex = sql(`${ctx.prefix}jobs_unique`)
  /** Locks the job holding `key`, if any, for an update (through the unique index alone). */
  const lockHolder = (key: string) =>
    run(sql`SELECT id FROM ${jobs} FORCE INDEX (${uniqueIndex}) WHERE unique_active = ${key} FOR UPDATE`)
  const replaceHolder = (row: UniqueInsertRow) =>
    Effect.map(
      run(
        sql`UPDATE ${jobs} FORCE INDEX (${uniqueIndex}) SET id = LAST_INSERT_ID(id), payload = ${row.payload}, priority = ${row.priority},
          mutex_key = ${row.mutexKey}, limit_key = ${row.limitKey}, trace_context = ${row.traceContext},
          run_at = ${row.mode === "replace" ? ts(row.runAtUs) : sql`LEAST(run_at, ${ts(row.runAtUs)})`}
        WHERE unique_active = ${row.uniqueKey} AND state = 'pending' AND name = ${row.name}`,
        "raw"
      ),
      (result: any): UniqueInsertResult | undefined =>
        // `info` ("Rows matched: 1 …") also for a connection opened without CLIENT_FOUND_ROWS (`joinTransaction`)
        Number(result.affectedRows) > 0 || /Rows matched: [1-9]/.test(String(result.info ?? ""))
          ? { id: String(result.insertId), inserted: false, replaced: true }
          : undefined
    )
  return {
    jobInsertMany: (rows, nowUs) => {
      if (rows.length === 0) return Effect.succeed([])
      const chunks = chunksOf(rows)
      if (chunks.length === 1) return insertChunk(chunks[0], nowUs)
      return Effect.forEach(chunks, (c) => insertChunk(c, nowUs)).pipe(
        Effect.map((ids) => ids.flat()),
        sql.withTransaction,
        // Its `sql.transaction` span is unread with the built-in tracer.
        withoutUnreadSpans
      )
    },
    jobInsertUnique: (row, nowUs) => {
      // A plain INSERT: a duplicate key fails only this statement (InnoDB keeps the caller's
      // transaction), and then the holder is read with a locking read, which sees the latest
      // committed row whatever the isolation level. An uncommitted insert of the key makes the
      // INSERT wait for its transaction: if that rolls back, this insert goes through.
      const insert = sql`INSERT INTO ${jobs}
          (name, payload, priority, run_at, created_at, mutex_key, limit_key, trace_context, unique_key, unique_states)
        VALUES (${row.name}, ${row.payload}, ${row.priority}, ${ts(row.runAtUs)}, ${ts(nowUs)}, ${row.mutexKey},
          ${row.limitKey}, ${row.traceContext},
          ${row.uniqueKey}, ${row.uniqueStates})`
      const holder = run(sql<{ id: string }>`SELECT id FROM ${jobs} WHERE unique_active = ${row.uniqueKey}
        LOCK IN SHARE MODE`)
      const inserted = run(insert, "raw").pipe(
        Effect.map((result: any): UniqueInsertResult | undefined => ({ id: String(result.insertId), inserted: true, replaced: false })),
        Effect.catchIf(isUniqueViolation, () => Effect.succeed(undefined))
      )
      const replaces = row.mode === "replace" || row.mode === "throttle"
      const write = replaces
        ? Effect.flatMap(inserted, (r): Effect.Effect<UniqueInsertResult | undefined, SqlError> =>
          r === undefined ? replaceHolder(row) : Effect.succeed(r))
        : inserted
      // Where the key may be replaced, its holder is locked for the update first: the insert's
      // duplicate check would take a shared lock, and two transactions upgrading theirs deadlock.
      const written = replaces || row.lockKey === true ? Effect.zipRight(lockHolder(row.uniqueKey), write) : write
      return insertUnique(row.name, row.uniqueKey, written, Effect.map(holder, firstId))
    },
    jobNewestId: () => newestId(run, sql, jobs)
  }
}
