/**
 * MySQL/MariaDB: the latest tick of each periodic job, and a tick's enqueue.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import type { SchedulesOps } from "../Driver.js"
import { num } from "../shared.js"
import type { MysqlContext } from "./context.js"

export const make = (ctx: MysqlContext): SchedulesOps => {
  const { prefix, sql, ts, usOf } = ctx
  return {
    scheduleGet: (name) =>
      Effect.map(
        sql<{ us: number }>`SELECT ${sql.literal(usOf("last_tick_at"))} AS us FROM ${sql(`${prefix}schedules`)}
          WHERE name = ${name}`,
        (rows) => (rows.length === 0 ? undefined : num(rows[0].us))
      ),
    scheduleFire: (name, tickUs, nowUs, enqueue) => {
      const schedules = sql(`${prefix}schedules`)
      return sql.withTransaction(Effect.gen(function*() {
        // A first tick's row is written here; either way the row is locked (the no-op update locks
        // an existing one), and the locking read sees the latest committed tick.
        yield* sql`INSERT INTO ${schedules} (name, last_tick_at, updated_at)
            VALUES (${name}, '1000-01-01 00:00:00', ${ts(nowUs)}) ON DUPLICATE KEY UPDATE name = name`
        const rows = yield* sql<{ us: number }>`SELECT ${sql.literal(usOf("last_tick_at"))} AS us FROM ${schedules}
            WHERE name = ${name} FOR UPDATE`
        if (rows.length > 0 && num(rows[0].us) >= tickUs) return undefined
        const enqueued = yield* enqueue
        yield* sql`UPDATE ${schedules} SET last_tick_at = ${ts(tickUs)}, updated_at = ${ts(nowUs)} WHERE name = ${name}`
        return enqueued
      }))
    }
  }
}
