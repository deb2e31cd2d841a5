/**
 * The per-minute stats of one process: what its workers did, per job name and UTC minute — attempts
 * completed, attempts failed (retried or dead-lettered), and the pickup latency of the attempts
 * started, in the fixed buckets of `<prefix>stats` (`pickupBoundsMs`) — counted in memory and added
 * to the table every `statsInterval` by one upsert (`statsAdd`), and once more when the `QueueLive`
 * closes. Every process adds to the same rows, so a row holds what all of them did in its minute.
 *
 * Counting is a map lookup and an addition: no statement per attempt or per batch of ends. A flush
 * never holds up a worker: it runs on a fiber of its own, and a flush that fails (the database
 * unreachable, a refused statement) is logged and its counts are kept for the next, at most
 * {@link maxCells} (name, minute) cells (the oldest minutes are dropped first, with a warning). A
 * process that crashes loses what it counted since its last flush; a flush whose commit was lost
 * with its connection may be added again by the next (counted twice).
 *
 * Minutes are those of Effect's `Clock` (the worker's time of the end or the start, as the metrics
 * have it); the flush's cadence is wall-clock time (housekeeping: under `TestClock` it still runs).
 *
 * One service per `QueueLive` (`layer`): workers tell it their ends (`ended`) and starts (`started`).
 *
 * @internal
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Runtime from "effect/Runtime"
import type * as Scope from "effect/Scope"
import { QueueConfig } from "../services/QueueConfig.js"
import { Database } from "./Database.js"
import type { Driver, StatsMinuteRow } from "./driver/Driver.js"
import { pickupBoundsMs } from "./driver/shared.js"
import { bounded, forkScopedBounded } from "./outage.js"
import { wallSleep } from "./wallClock.js"

/** The most (name, minute) cells kept while flushes fail: past it, the oldest minutes are dropped. */
export const maxCells = 10_000

const minuteMs = 60_000

export interface StatsShape {
  /** An attempt's end was written and changed its job, at `nowMs` (ms since the epoch, Effect's `Clock`). */
  readonly ended: (name: string, state: "completed" | "pending" | "dead", nowMs: number) => void
  /** An attempt started `latencyMs` after its job became due (`sqlane_job_pickup_latency_ms`), at `nowMs`. */
  readonly started: (name: string, latencyMs: number, nowMs: number) => void
  /**
   * Adds what is counted to `<prefix>stats` now, as the periodic flush does: on failure the counts
   * are kept for the next flush, and the error is returned.
   */
  readonly flush: Effect.Effect<void, SqlError>
}

export class Stats extends Context.Tag("sqlane/internal/Stats")<Stats, StatsShape>() {}

/** What one (name, minute) holds until it is flushed. */
interface Cell {
  completed: number
  failed: number
  /** Counts per pickup bucket: one per bound of `pickupBoundsMs`, then one for above the last. */
  readonly pickup: Array<number>
}

const newCell = (): Cell => ({ completed: 0, failed: 0, pickup: new Array<number>(pickupBoundsMs.length + 1).fill(0) })

/** The bucket of a pickup latency: the first whose bound it does not exceed, else the last. */
export const bucketOf = (latencyMs: number): number => {
  for (let i = 0; i < pickupBoundsMs.length; i++) if (latencyMs <= pickupBoundsMs[i]) return i
  return pickupBoundsMs.length
}

/**
 * The counts of one process, by minute (ms, its start) and name, with the flush that takes them.
 * `drop` is told how many cells were dropped to stay within {@link maxCells}.
 */
export const makeCounts = (driver: Pick<Driver, "statsAdd">, drop: (cells: number) => void) => {
  let minutes = new Map<number, Map<string, Cell>>()
  let cells = 0
  /** The minute counted last and its names: most ends fall in the minute of the previous one. */
  let lastMinute = NaN
  let lastNames: Map<string, Cell> | undefined
  /** Whether a failed flush's cells are being put back (trimmed once, at the end). */
  let restoring = false

  const cellOf = (name: string, nowMs: number): Cell => {
    const minute = nowMs - (nowMs % minuteMs)
    let names = minute === lastMinute ? lastNames : undefined
    if (names === undefined) {
      names = minutes.get(minute)
      if (names === undefined) {
        names = new Map()
        minutes.set(minute, names)
      }
      lastMinute = minute
      lastNames = names
    }
    let cell = names.get(name)
    if (cell === undefined) {
      cell = newCell()
      names.set(name, cell)
      cells++
      if (cells > maxCells && !restoring) trim()
    }
    return cell
  }

  /** Drops the oldest minutes until at most `maxCells` cells are left; the newest is kept, whatever its size. */
  const trim = () => {
    const order = Array.from(minutes.keys()).sort((a, b) => a - b)
    let dropped = 0
    for (let i = 0; i < order.length - 1 && cells > maxCells; i++) {
      const names = minutes.get(order[i])!
      minutes.delete(order[i])
      cells -= names.size
      dropped += names.size
      if (names === lastNames) {
        lastMinute = NaN
        lastNames = undefined
      }
    }
    if (dropped > 0) drop(dropped)
  }

  /** Adds the cells of a flush that failed back to those counted since. */
  const restore = (taken: Map<number, Map<string, Cell>>) => {
    restoring = true
    for (const [minute, names] of taken) {
      for (const [name, cell] of names) {
        const into = cellOf(name, minute)
        into.completed += cell.completed
        into.failed += cell.failed
        for (let i = 0; i < cell.pickup.length; i++) into.pickup[i] += cell.pickup[i]
      }
    }
    restoring = false
    if (cells > maxCells) trim()
  }

  const flush: Effect.Effect<void, SqlError> = Effect.suspend(() => {
    if (cells === 0) return Effect.void
    const taken = minutes
    minutes = new Map()
    cells = 0
    lastMinute = NaN
    lastNames = undefined
    const rows: Array<StatsMinuteRow> = []
    for (const [minute, names] of taken) {
      for (const [name, cell] of names) {
        rows.push({ name, minuteUs: minute * 1000, completed: cell.completed, failed: cell.failed, pickup: cell.pickup })
      }
    }
    // Failed: the counts go back, to be added by the next flush. Not interrupted: a statement sent
    // may commit whatever its caller does, so once sent the counts are its own (a close that stops
    // waiting for it leaves it to finish; the last flush does not add them again).
    return Effect.uninterruptible(
      Effect.onExit(driver.statsAdd(rows), (exit) => Exit.isFailure(exit) ? Effect.sync(() => restore(taken)) : Effect.void)
    )
  })

  return {
    ended: (name: string, state: "completed" | "pending" | "dead", nowMs: number) => {
      const cell = cellOf(name, nowMs)
      if (state === "completed") cell.completed++
      else cell.failed++
    },
    started: (name: string, latencyMs: number, nowMs: number) => {
      cellOf(name, nowMs).pickup[bucketOf(latencyMs)]++
    },
    flush,
    /** The cells counted and not yet flushed. */
    size: () => cells
  }
}

/** Counts nothing, flushes nothing: the stats are off (`statsInterval` infinite). */
export const off: StatsShape = { ended: () => {}, started: () => {}, flush: Effect.void }

/**
 * The service, with its flush every `statsInterval` (wall-clock time) for the life of the scope, and
 * a last flush at close (at most 1 s, skipped while the database is unreachable).
 */
export const make: Effect.Effect<StatsShape, never, Database | QueueConfig | Scope.Scope> = Effect.gen(
  function*() {
    const config = yield* QueueConfig
    if (!Duration.isFinite(config.statsInterval)) return off
    const intervalMs = Duration.toMillis(config.statsInterval)
    const { driver, reachability } = yield* Database
    /** Runs a log line with the layer's context (the app's logger and level), from a worker's callback. */
    const runLog = Runtime.runFork(yield* Effect.runtime<never>())
    const counts = makeCounts(driver, (cells) =>
      runLog(
        Effect.logWarning(
          `sqlane: ${cells} per-minute stats cell(s) dropped: they could not be added to the stats table, and at most ${maxCells} are kept`
        ).pipe(Effect.annotateLogs({ package: "sqlane", module: "Stats" }))
      ))
    const failed = (cause: Cause.Cause<unknown>, retrying = true) =>
      reachability.failed("stats", "sqlane: adding to the per-minute stats failed; the counts are kept for the next flush", cause, retrying)
    // Added before the loop is forked, so it runs after the loop's fiber stopped (finalizers run in
    // reverse order); and after the Completer wrote its last ends (the layer is built before it).
    yield* Effect.addFinalizer(() =>
      Effect.flatMap(reachability.recheck(300), (answers) =>
        !answers || counts.size() === 0 ? Effect.void : bounded(counts.flush, 1000).pipe(
          Effect.flatMap(Option.match({
            onNone: () => Effect.logWarning("sqlane: the last per-minute stats were not added at close (no answer within 1000 ms)"),
            onSome: () => Effect.void
          })),
          Effect.catchAllCause((cause) => failed(cause, false))
        )).pipe(Effect.annotateLogs({ package: "sqlane", module: "Stats" }))
    )
    yield* Effect.gen(function*() {
      while (true) {
        yield* wallSleep(intervalMs)
        yield* Effect.catchAllCause(counts.flush, (cause) => failed(cause))
      }
    }).pipe(Effect.annotateLogs({ package: "sqlane", module: "Stats" }), (loop) => forkScopedBounded(loop, 100))
    return { ended: counts.ended, started: counts.started, flush: counts.flush } satisfies StatsShape
  }
)

/** The `Stats` service of a `QueueLive`. */
export const layer: Layer.Layer<Stats, never, Database | QueueConfig> = Layer.scoped(Stats, make)
