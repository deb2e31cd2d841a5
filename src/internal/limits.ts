/**
 * A worker's view of the concurrency limits of its job names: each definition's `limits`, with the
 * limits set at run time (`<prefix>limits`, by `sqlane limit` or `Admin.setLimits`) over them,
 * followed as `internal/watched.ts` follows a table: at start, on a change, and every
 * `rescueInterval`. So a limit set at run time reaches every worker within one `rescueInterval`
 * (at once in the process that set it, and on PostgreSQL by `NOTIFY`).
 *
 * The view only says which names the worker claims with slots, and how many: the claim statements
 * hand out the slots (see the keyed claims in `driver/pg/jobs.ts` and `driver/mysql/jobs.ts`).
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type * as Job from "../schema/Job.js"
import { Notifier } from "../services/Notifier.js"
import type { QueueConfig } from "../services/QueueConfig.js"
import { Database } from "./Database.js"
import type { LimitRow, NameLimits } from "./driver/Driver.js"
import { nameKey } from "./pauses.js"
import { follow } from "./watched.js"

export interface LimitsView {
  /** The limits of the worker's limited names now (a name not in it has none). */
  readonly current: () => ReadonlyMap<string, NameLimits>
}

/** The limits of a name: its definition's, with a run-time row's numbers over them. */
export const effective = (defined: Job.Limits<never> | undefined, row: LimitRow | undefined): NameLimits | undefined => {
  const running = row?.running ?? defined?.running
  const runningPerKey = row?.runningPerKey ?? defined?.runningPerKey
  return running === undefined && runningPerKey === undefined ? undefined : { running, runningPerKey }
}

/**
 * Follows the limits of the worker's job names (`definitions`: each name's job definition limits)
 * for the life of the scope; calls `onChange` with the new limits whenever they change.
 */
export const watch = (
  definitions: ReadonlyMap<string, Job.Limits<never> | undefined>,
  onChange: (limits: ReadonlyMap<string, NameLimits>) => void
): Effect.Effect<LimitsView, never, Scope.Scope | Database | Notifier | QueueConfig> =>
  Effect.gen(function*() {
    const { driver } = yield* Database
    const notifier = yield* Notifier
    // The limits table compares names as the paused table does (PAD SPACE on MySQL/MariaDB).
    const key = nameKey(driver.capabilities.padSpaceKeys)
    const compute = (rows: ReadonlyArray<LimitRow>) => {
      const byName = new Map(rows.map((r) => [key(r.name), r]))
      const next = new Map<string, NameLimits>()
      for (const [name, defined] of definitions) {
        const limits = effective(defined, byName.get(key(name)))
        if (limits !== undefined) next.set(name, limits)
      }
      return next
    }
    let limits: ReadonlyMap<string, NameLimits> = compute([])
    const same = (a: ReadonlyMap<string, NameLimits>, b: ReadonlyMap<string, NameLimits>) =>
      a.size === b.size &&
      Array.from(a).every(([n, l]) => b.get(n)?.running === l.running && b.get(n)?.runningPerKey === l.runningPerKey)
    const refresh = Effect.map(driver.limitList(), (rows) => {
      const next = compute(rows)
      if (same(limits, next)) return
      limits = next
      onChange(next)
    })
    onChange(limits)
    if (definitions.size > 0) yield* follow("concurrency limits", refresh, notifier.onLimitsChanged)
    return { current: () => limits }
  })
