/**
 * The dashboard's `GET /api/stats`: the last hour of the per-minute stats (`<prefix>stats`, which the
 * workers of every process add to: internal/stats.ts) per job name — completed and failed per
 * minute, zero-filled, and the pickup-latency percentiles of the hour, bucket-bounded.
 *
 * @internal
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Api from "../../dashboard/Api.js"
import type { Driver } from "../driver/Driver.js"
import { pickupBoundsMs } from "../driver/shared.js"
import { microsToDate } from "../time.js"

const minuteUs = 60_000_000

/** The minutes shown: the current one and the 59 before it. */
export const minutes = 60

/** The most rows read (a minute of a job name each): 60 minutes of 2,000 names; past it the oldest minutes are left out. */
export const maxRows = 120_000

/**
 * The percentile `p` (0–1) of a histogram with the buckets of `pickupBoundsMs`: the upper bound of
 * the bucket holding the ⌈p × count⌉-th value (the last bound for the bucket above it); null when
 * the histogram is empty.
 */
export const percentile = (buckets: ReadonlyArray<number>, count: number, p: number): number | null => {
  if (count === 0) return null
  const rank = Math.max(1, Math.ceil(p * count))
  let seen = 0
  for (let i = 0; i < buckets.length; i++) {
    seen += buckets[i]
    if (seen >= rank) return pickupBoundsMs[Math.min(i, pickupBoundsMs.length - 1)]
  }
  return pickupBoundsMs[pickupBoundsMs.length - 1]
}

/** The last hour's stats as of `nowUs` (µs since the epoch): one range of the stats table's primary key. */
export const lastHour = (driver: Driver, nowUs: number): Effect.Effect<Api.StatsView, SqlError> =>
  Effect.gen(function*() {
    const currentUs = Math.floor(nowUs / minuteUs) * minuteUs
    const sinceUs = currentUs - (minutes - 1) * minuteUs
    // Newest first: past `maxRows`, the oldest minutes are left out (the one cut may be partial).
    const read = yield* driver.statsRead(sinceUs, maxRows + 1)
    const truncated = read.length > maxRows
    const rows = truncated ? read.slice(0, maxRows) : read
    const byName = new Map<string, { completed: Array<number>; failed: Array<number>; pickup: Array<number> }>()
    for (const r of rows) {
      // A row of a later minute (a process whose clock runs ahead) is not shown.
      const slot = Math.round((r.minuteUs - sinceUs) / minuteUs)
      if (slot < 0 || slot >= minutes) continue
      let n = byName.get(r.name)
      if (n === undefined) {
        n = {
          completed: new Array<number>(minutes).fill(0),
          failed: new Array<number>(minutes).fill(0),
          pickup: new Array<number>(pickupBoundsMs.length + 1).fill(0)
        }
        byName.set(r.name, n)
      }
      n.completed[slot] += r.completed
      n.failed[slot] += r.failed
      for (let i = 0; i < n.pickup.length; i++) n.pickup[i] += r.pickup[i] ?? 0
    }
    const names = Array.from(byName.keys()).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))
    const minuteTexts = Array.from({ length: minutes }, (_, i) => microsToDate(sinceUs + i * minuteUs).toISOString())
    return new Api.StatsView({
      since: microsToDate(sinceUs).toISOString(),
      truncated,
      names: names.map((name) => {
        const n = byName.get(name)!
        const count = n.pickup.reduce((sum, c) => sum + c, 0)
        return new Api.NameStats({
          name,
          // 60 points per name, built from numbers and the minutes' texts: not validated one by one.
          points: n.completed.map((completed, i) =>
            new Api.StatsPoint({ minute: minuteTexts[i], completed, failed: n.failed[i] }, true)
          ),
          pickupMs: new Api.PickupPercentiles({
            p50: percentile(n.pickup, count, 0.5),
            p95: percentile(n.pickup, count, 0.95),
            p99: percentile(n.pickup, count, 0.99),
            count
          })
        })
      })
    })
  })
