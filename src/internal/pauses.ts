/**
 * A worker's view of the paused job names (`<prefix>paused`), followed as `internal/watched.ts`
 * follows a table: at start, on a change, and every `rescueInterval`.
 *
 * The worker leaves paused names out of what it probes and claims, so that it does not claim them in
 * vain: the claim statements themselves leave paused names out (see the claims in `driver/pg/jobs.ts` and `driver/mysql/jobs.ts`), so the pause
 * holds whether or not this view has it yet. Jobs the worker already runs finish.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { Notifier } from "../services/Notifier.js"
import type { QueueConfig } from "../services/QueueConfig.js"
import { Database } from "./Database.js"
import { follow } from "./watched.js"

export interface PausedView {
  /** `names` without the paused ones. */
  readonly claimable: (names: ReadonlyArray<string>) => ReadonlyArray<string>
  /** The groups of `groups` whose job name is not paused. */
  readonly claimableGroups: <G extends { readonly name: string }>(groups: ReadonlyArray<G>) => ReadonlyArray<G>
}

/**
 * A job name as the paused table compares it: trailing spaces do not count where keys compare PAD
 * SPACE (`padSpaceKeys`, the driver's capability: MySQL/MariaDB).
 */
export const nameKey = (padSpaceKeys: boolean) => (name: string): string =>
  padSpaceKeys ? name.replace(/ +$/, "") : name

/**
 * Watches the paused names among `names` for the life of the scope; runs `onResume` when one of
 * them is resumed (so an idle worker probes again at once).
 */
export const watch = (
  names: ReadonlyArray<string>,
  onResume: Effect.Effect<void>
): Effect.Effect<PausedView, never, Scope.Scope | Database | Notifier | QueueConfig> =>
  Effect.gen(function*() {
    const { driver } = yield* Database
    const notifier = yield* Notifier
    // Names are matched as the database matches them: on MySQL/MariaDB the paused table's
    // collation is PAD SPACE, so "name " and "name" are one name there (`pause "name"` after
    // `pause "name "` answers "already paused").
    const key = nameKey(driver.capabilities.padSpaceKeys)
    const mine = new Set(names.map(key))
    let paused: ReadonlySet<string> = new Set()
    const refresh = Effect.gen(function*() {
      const rows = yield* driver.pausedList()
      const next = new Set(rows.map((r) => key(r.name)).filter((n) => mine.has(n)))
      const resumed = Array.from(paused).some((n) => !next.has(n))
      paused = next
      if (resumed) yield* onResume
    })
    const view: PausedView = {
      claimable: (list) => (paused.size === 0 ? list : list.filter((n) => !paused.has(key(n)))),
      claimableGroups: (groups) => (paused.size === 0 ? groups : groups.filter((g) => !paused.has(key(g.name))))
    }
    if (names.length === 0) return view
    yield* follow("paused job names", refresh, (changed) =>
      notifier.onPausesChanged((name) => {
        // A name paused in this process is left out at once, before `pause` returns; then re-read.
        if (name !== undefined && mine.has(key(name)) && !paused.has(key(name))) paused = new Set([...paused, key(name)])
        changed()
      }))
    return view
  })
