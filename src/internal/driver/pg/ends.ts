/**
 * PostgreSQL: the ends of attempts as common table expressions (an update; with `deleteCompleted`,
 * a delete of the completed jobs' rows and an update of the others), for a statement alone or with
 * a claim riding on it (`jobs.ts`).
 *
 * @internal
 */
import type { Finish, StaleEnds } from "../Driver.js"
import { handoversOf, splitEnds, staleEnds, withUnhanded } from "../shared.js"
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
    const handovers = handoversOf(finishes)
    // One row: null when every end was written (the common case), else the ends written; and, when
    // slots pass, null when every slot passed (the common case), else the givers whose slot passed (`passed`).
    const applied = sql`(SELECT CASE WHEN count(*) < ${sql.literal(String(finishes.length))}
        THEN (SELECT coalesce(string_agg(w.id::text || ':' || w.attempt::text, ','), '') FROM ${written} AS w) END
        AS applied, ${
      handovers.length === 0 ? sql.literal("NULL::text") : sql`
        (SELECT CASE WHEN count(*) < ${sql.literal(String(handovers.length))}
          THEN coalesce(string_agg(h.giver::text || ':' || h.gattempt::text, ','), '') END FROM handed AS h)`
    } AS passed FROM ${written} AS e)`
    // A slot passes only from a giver whose end this statement wrote and whose row held it (its
    // snapshot), to a receiver still running without one. A receiver is updated only once its
    // giver's row came out of `written`, which that row's update has left: the unique index over
    // running slots never sees both holding it.
    const handed = sql`handed AS (UPDATE ${jobs} AS r SET name_slot = h.slot
        FROM unnest(${numbers(handovers.map((h) => h.giverId))}::bigint[], ${numbers(handovers.map((h) => h.giverAttempt))}::int[],
                    ${numbers(handovers.map((h) => h.receiverId))}::bigint[], ${numbers(handovers.map((h) => h.receiverAttempt))}::int[],
                    ${numbers(handovers.map((h) => h.slot))}::int[]) AS h(giver, gattempt, receiver, rattempt, slot)
        WHERE r.id = h.receiver AND r.attempts = h.rattempt AND r.state = 'running' AND r.name_slot IS NULL
          AND (h.giver, h.gattempt) IN (SELECT w.id, w.attempt FROM ${written} AS w)
          AND EXISTS (SELECT 1 FROM ${jobs} g WHERE g.id = h.giver AND g.name = r.name AND g.name_slot = h.slot)
        RETURNING h.giver, h.gattempt)`
    /**
     * What the statement's row (`applied`, `passed`) says: the stale ends, and the ends whose slot
     * did not pass (`handKey`).
     */
    const report = (row: { readonly applied: string | null; readonly passed?: string | null } | undefined): StaleEnds => {
      const stale = staleEnds(finishes, row?.applied ?? null)
      if (handovers.length === 0 || (row !== undefined && row.passed === null)) return stale
      const passed = new Set(row?.passed === undefined || row.passed === null || row.passed === "" ? [] : row.passed.split(","))
      return withUnhanded(stale, handovers, [], passed)
    }
    return {
      ctes: handovers.length === 0 ? ctes : sql`${ctes}, ${handed}`,
      applied,
      written,
      /** The rows whose slots the statement passes on (they still hold them): none, or `r.id` among the givers. */
      givers: handovers.length === 0 ? undefined : numbers(handovers.map((h) => h.giverId)),
      report
    }
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
