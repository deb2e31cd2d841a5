/**
 * A created-time range of the job list as a range of ids. Ids are given in enqueue order and
 * `created_at` is the enqueuer's clock at that moment, so the two rise together: the first job
 * created at or after a time is found by a binary search over the primary key (one lookup of the
 * first job at or after an id per step, about 20 steps for a million jobs), with no index on
 * `created_at`. The list then reads its index range between the two ids and still checks
 * `created_at`, so the range only bounds what is read.
 *
 * Each bound is searched a minute wide of the time asked (`createdSkewUs`): a job whose
 * `created_at` is out of order with its id by less than that (clocks of producers a little apart, a
 * job that waited for its insert) is still listed; one out of order by more may be missed at the
 * range's edges.
 *
 * @internal
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"

/** How far out of order with its id a job's `created_at` may be and still be listed (µs): a minute. */
export const createdSkewUs = 60_000_000

/**
 * For each id given, the first job with an id at or above it: its id and `created_at` (µs), or
 * `undefined` when there is none; in the order given (one statement).
 */
export type FirstAtOrAfter = (
  ids: ReadonlyArray<string>
) => Effect.Effect<ReadonlyArray<{ readonly id: string; readonly createdAtUs: number } | undefined>, SqlError>

/** Ids looked up per statement: each round narrows the range searched to a 64th. */
export const probes = 64

/**
 * The smallest id of a job created at or after `atUs`, searched over ids below `endId` (the newest
 * id plus one); `undefined` when no job is (given `created_at` rises with the id). Each round looks
 * up `probes` evenly spaced ids and keeps the stretch between the last job found created before
 * `atUs` and the next id looked up: about 4 statements for a million ids.
 */
const firstIdCreatedAt = (first: FirstAtOrAfter, atUs: number, endId: bigint) =>
  Effect.gen(function*() {
    // Every job below `lo` was created before `atUs`, and there is none in [hi, found).
    let lo = 0n
    let hi = endId
    let found: bigint | undefined
    while (lo < hi) {
      const span = hi - lo
      const n = span < BigInt(probes) ? Number(span) : probes
      const points = Array.from({ length: n }, (_, j) => lo + (span * BigInt(j)) / BigInt(n))
      const rows = yield* first(points.map(String))
      // The first id looked up whose job (the first at or above it, below `hi`) is missing or was
      // created at or after `atUs`; the jobs before it were created earlier.
      let lastBefore: bigint | undefined
      let j = 0
      for (; j < n; j++) {
        const row = rows[j]
        if (row === undefined || BigInt(row.id) >= hi) break
        if (row.createdAtUs >= atUs) {
          found = BigInt(row.id)
          break
        }
        lastBefore = BigInt(row.id)
      }
      const nextLo = lastBefore === undefined ? lo : lastBefore + 1n
      const nextHi = j < n ? points[j] : hi
      if (nextLo >= nextHi) break
      lo = nextLo
      hi = nextHi
    }
    return found
  })

/** Ids bounding the jobs created in [`fromUs`, `beforeUs`): at or above `fromId`, below `beforeId`. */
export interface CreatedIds {
  readonly fromId?: string | undefined
  readonly beforeId?: string | undefined
}

/**
 * The ids bounding a created-time range (either end optional), a minute wide of it; `undefined`
 * for a range with neither end. `newestId` is the largest id in the table (null: none).
 */
export const createdIds = (
  first: FirstAtOrAfter,
  newestId: Effect.Effect<string | null, SqlError>,
  fromUs: number | undefined,
  beforeUs: number | undefined
): Effect.Effect<CreatedIds | undefined, SqlError> =>
  fromUs === undefined && beforeUs === undefined
    ? Effect.succeed(undefined)
    : Effect.gen(function*() {
      const newest = yield* newestId
      if (newest === null) return {}
      const endId = BigInt(newest) + 1n
      const fromId = fromUs === undefined ? undefined : yield* firstIdCreatedAt(first, fromUs - createdSkewUs, endId)
      const beforeId = beforeUs === undefined ? undefined : yield* firstIdCreatedAt(first, beforeUs + createdSkewUs, endId)
      return {
        // No job created since `fromUs` (less the margin): nothing at or above the newest id plus one.
        fromId: fromUs === undefined ? undefined : String(fromId ?? endId),
        beforeId: beforeId === undefined ? undefined : String(beforeId)
      }
    })
