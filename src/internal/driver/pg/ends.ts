/**
 * PostgreSQL: the ends of attempts as common table expressions (an update; with `deleteCompleted`,
 * a delete of the completed jobs' rows and an update of the others), for a statement alone or with
 * a claim riding on it (`jobs.ts`).
 *
 * @internal
 */
import type { Finish } from "../Driver.js"
import { splitEnds } from "../shared.js"
import { numbers, type PgContext, texts } from "./context.js"

export const make = (ctx: PgContext) => {
  const { jobs, options, sql } = ctx
  // The ends of attempts, guarded by id, attempt and state: a stale attempt changes nothing.
  /**
   * The ends of attempts, as common table expressions for a `WITH` (data-modifying statements must
   * be at its top level): `ended`, an update; with `deleteCompleted`, `removed` deletes the rows of
   * completed jobs instead (those not `keep`, see `Finish`), and `ended` updates the others, if any.
   * Both return the (id, attempt) of the ends they wrote (`written`, a relation over both); `applied` is a one-row subquery over them:
   * its column `applied` is null when every end was written, else those ends as `id:attempt,…`
   * (read with `staleEnds`).
   */
  const finishCtes = (finishes: ReadonlyArray<Finish>) => {
    const { removed, rest } = splitEnds(finishes, options.deleteCompleted === true)
    const ended = () => sql`ended AS (${finishUpdate(rest)})`
    const remove = () => sql`removed AS (DELETE FROM ${jobs} AS j
        USING unnest(${numbers(removed.map((f) => f.id))}::bigint[], ${numbers(removed.map((f) => f.attempt))}::int[])
          AS v(id, attempt)
        WHERE j.id = v.id AND j.attempts = v.attempt AND j.state = 'running'
        RETURNING v.id, v.attempt)`
    const ctes = removed.length === 0 ? ended() : rest.length === 0 ? remove() : sql`${remove()}, ${ended()}`
    const written = removed.length === 0
      ? sql.literal("ended")
      : rest.length === 0
      ? sql.literal("removed")
      : sql.literal("(SELECT id, attempt FROM removed UNION ALL SELECT id, attempt FROM ended)")
    // One row: null when every end was written (the common case), else the ends written.
    const applied = sql`(SELECT CASE WHEN count(*) < ${sql.literal(String(finishes.length))}
        THEN (SELECT coalesce(string_agg(w.id::text || ':' || w.attempt::text, ','), '') FROM ${written} AS w) END
        AS applied FROM ${written} AS e)`
    return { ctes, applied, written }
  }
  const finishUpdate = (finishes: ReadonlyArray<Finish>) =>
    sql`UPDATE ${jobs} AS j SET
        state = CASE WHEN v.state = 'released' THEN 'pending' ELSE v.state END,
        attempts = CASE WHEN v.state = 'released' THEN j.attempts - 1 ELSE j.attempts END,
        run_at = COALESCE(TIMESTAMPTZ 'epoch' + v.run_at_us * INTERVAL '1 microsecond', j.run_at),
        finished_at = TIMESTAMPTZ 'epoch' + v.finished_at_us * INTERVAL '1 microsecond',
        last_error = COALESCE(v.last_error, j.last_error),
        errors = COALESCE(v.errors, j.errors),
        result = v.result,
        worker_id = NULL
      FROM unnest(${numbers(finishes.map((f) => f.id))}::bigint[], ${numbers(finishes.map((f) => f.attempt))}::int[],
                  ${numbers(finishes.map((f) => f.state))}::text[], ${numbers(finishes.map((f) => f.runAtUs))}::bigint[],
                  ${numbers(finishes.map((f) => f.finishedAtUs))}::bigint[], ${texts(finishes.map((f) => f.lastError))}::text[],
                  ${texts(finishes.map((f) => f.errors))}::text[], ${texts(finishes.map((f) => f.result))}::text[])
           AS v(id, attempt, state, run_at_us, finished_at_us, last_error, errors, result)
      WHERE j.id = v.id AND j.attempts = v.attempt AND j.state = 'running'
      RETURNING v.id, v.attempt`
  return { finishCtes }
}
