/**
 * PostgreSQL: the latest tick of each periodic job, and a tick's enqueue.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import type { SchedulesOps } from "../Driver.js"
import { noTick, num, toScheduleRow } from "../shared.js"
import { type PgContext, usText } from "./context.js"

export const make = (ctx: PgContext): SchedulesOps => {
  const { prefix, sql, ts, us } = ctx
  return {
    scheduleGet: (name) =>
      Effect.map(
        sql<{ us: string }>`SELECT ${us("last_tick_at")} AS us FROM ${sql(`${prefix}schedules`)} WHERE name = ${name}`,
        (rows) => (rows.length === 0 || noTick(num(rows[0].us)) ? undefined : num(rows[0].us))
      ),
    scheduleList: (limit) =>
      Effect.map(
        sql`SELECT name, ${sql.literal(usText("last_tick_at"))} AS last_tick_us, ${sql.literal(usText("updated_at"))} AS updated_at_us,
              job_name, expression, time_zone, ${sql.literal(usText("next_tick_at"))} AS next_tick_us
            FROM ${sql(`${prefix}schedules`)} ORDER BY name LIMIT ${sql.literal(String(Math.max(0, Math.floor(limit))))}`,
        (rows: ReadonlyArray<any>) => rows.map(toScheduleRow)
      ),
    scheduleDescribe: (name, d) =>
      sql`UPDATE ${sql(`${prefix}schedules`)} SET job_name = ${d.jobName}, expression = ${d.expression},
          time_zone = ${d.timeZone}, next_tick_at = ${ts(d.nextTickUs)} WHERE name = ${name}`.pipe(Effect.asVoid),
    scheduleFire: (name, tickUs, nowUs, enqueue) => {
      const schedules = sql(`${prefix}schedules`)
      return sql.withTransaction(Effect.gen(function*() {
        // A first tick's row is written here and locked; a row that exists is locked as it is.
        yield* sql`INSERT INTO ${schedules} (name, last_tick_at, updated_at)
            VALUES (${name}, TIMESTAMPTZ '-infinity', ${ts(nowUs)}) ON CONFLICT (name) DO NOTHING`
        const rows = yield* sql<{ us: string }>`SELECT ${us("last_tick_at")} AS us FROM ${schedules}
            WHERE name = ${name} FOR UPDATE`
        if (rows.length > 0 && num(rows[0].us) >= tickUs) return undefined
        const enqueued = yield* enqueue
        yield* sql`UPDATE ${schedules} SET last_tick_at = ${ts(tickUs)}, updated_at = ${ts(nowUs)} WHERE name = ${name}`
        return enqueued
      }))
    }
  }
}
