/**
 * The dashboard's read endpoints: the session, the overview per job name (counts read up to a cap
 * per state), the job list and detail, dead letters, periodic jobs, workers, and the last hour's
 * per-minute stats (internal/dashboard/stats.ts). They run on the
 * `Admin` service and, where it has no operation for them, on the driver.
 *
 * @internal
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Api from "../../dashboard/Api.js"
import * as Admin from "../../services/Admin.js"
import { Database } from "../Database.js"
import * as Limits from "../limits.js"
import * as Pauses from "../pauses.js"
import { microsToDate, nowMicros } from "../time.js"
import { decodeTraceContext } from "../tracing.js"
import type { Access } from "./access.js"
import * as Stats from "./stats.js"

/** The most jobs of one state the overview reads to count them. */
export const countCap = 10_000

/** A failed statement as the API's `DatabaseError` (503). */
export const databaseError = (e: SqlError) => new Api.DatabaseError({ message: e.message })

const iso = (d: Date | undefined) => (d === undefined ? null : d.toISOString())

export const summaryView = (j: Admin.JobSummary) =>
  new Api.JobSummary({
    id: j.id,
    name: j.name,
    state: j.state,
    attempts: j.attempts,
    priority: j.priority,
    runAt: j.runAt.toISOString(),
    createdAt: j.createdAt.toISOString(),
    claimedAt: iso(j.claimedAt),
    finishedAt: iso(j.finishedAt),
    workerId: j.workerId ?? null,
    lastError: j.lastError ?? null
  })

/** An ISO 8601 time of a filter (a date, with a time of day and a zone if given), or `BadRequest`. */
const timeParam = (label: string, text: string | undefined) => {
  if (text === undefined) return Effect.succeed(undefined)
  // A date first (not a bare number, which `Date` would read as a year), within years 1–9999 (what
  // both databases store).
  const d = /^\d{4}-\d{2}-\d{2}/.test(text) ? new Date(text) : new Date(NaN)
  const year = d.getUTCFullYear()
  return Number.isNaN(d.getTime()) || year < 1 || year > 9999
    ? Effect.fail(new Api.BadRequest({ message: `${label} is not a time (ISO 8601, years 1–9999): ${JSON.stringify(text)}` }))
    : Effect.succeed(d)
}

/** A `JobFilter` as `Admin.list`'s options (without the page). */
export const listOptions = (filter: typeof Api.JobFilter.Type) =>
  Effect.gen(function*() {
    return {
      name: filter.name,
      state: filter.state,
      id: filter.id,
      uniqueKey: filter.uniqueKey,
      createdFrom: yield* timeParam("createdFrom", filter.createdFrom),
      createdBefore: yield* timeParam("createdBefore", filter.createdBefore)
    } satisfies Admin.ListOptions
  })

/** One page, newest first: one job more is read to know whether a next page exists. */
const page = (admin: Admin.AdminShape, options: Admin.ListOptions, cursor: string | undefined, limit = 50) =>
  Effect.map(admin.list({ ...options, beforeId: cursor, limit: limit + 1 }), (rows) => {
    const jobs = rows.slice(0, limit)
    return new Api.JobPage({
      jobs: jobs.map(summaryView),
      nextCursor: rows.length > limit ? jobs[jobs.length - 1].id : null
    })
  })

const states = ["pending", "running", "completed", "dead", "cancelled"] as const

/** Pending jobs due by this instant (µs; 2200-01-01, within a JS number's exact range) count as pending. */
const pendingUntilUs = 7_258_118_400_000_000

/** The handlers of `Api.Reads`, given how a request's access is decided and the CSRF token (for `session`). */
export const layer = (access: Access) =>
  HttpApiBuilder.group(Api.api, "reads", (handlers) =>
    Effect.gen(function*() {
      const admin = yield* Admin.Admin
      const { driver } = yield* Database
      const nameKey = Pauses.nameKey(driver.capabilities.padSpaceKeys)

      const overview = Effect.gen(function*() {
        const nowUs = yield* nowMicros
        const counts = new Map<string, Record<(typeof states)[number], number>>()
        const atLeast: Record<string, boolean> = {}
        const names = new Map<string, string>()
        const entry = (name: string) => {
          const key = nameKey(name)
          if (!names.has(key)) names.set(key, name)
          let c = counts.get(key)
          if (c === undefined) {
            c = { pending: 0, running: 0, completed: 0, dead: 0, cancelled: 0 }
            counts.set(key, c)
          }
          return c
        }
        for (const state of states) {
          const rows = yield* driver.jobCountByState(state, countCap)
          let total = 0
          for (const r of rows) {
            entry(r.name)[state] += r.count
            total += r.count
          }
          atLeast[state] = total >= countCap
        }
        const pausedRows = yield* driver.pausedList()
        const paused = new Set(pausedRows.map((p) => nameKey(p.name)))
        for (const p of pausedRows) entry(p.name)
        for (const n of yield* admin.handledNames) entry(n)
        // Every name with pending jobs (one index entry per name and priority), and its oldest due job.
        const groups = yield* driver.jobPendingGroups()
        for (const g of groups) entry(g.name)
        const all = Array.from(names.values())
        // The capped read of a state takes its jobs in index order (pending: by name), so past the
        // cap a name's count may be short or missing: pending jobs are then counted name by name,
        // each up to the cap (the pending index has the name first); other states' counts are shown
        // as lower bounds.
        const pendingByName = atLeast.pending
        if (pendingByName) {
          for (const r of yield* driver.jobCountDue(all, pendingUntilUs, countCap)) entry(r.name).pending = r.due
        }
        const firstDue = new Map<string, number>()
        for (const p of groups) {
          if (p.nextUs > nowUs) continue
          const key = nameKey(p.name)
          firstDue.set(key, Math.min(firstDue.get(key) ?? Infinity, p.nextUs))
        }
        const limits = yield* Limits.ofNames(driver, all, nameKey, nowUs)
        const limitsByKey = new Map(Array.from(limits, ([n, l]) => [nameKey(n), l]))
        const bounded = (state: (typeof states)[number], n: number) =>
          new Api.BoundedCount({ count: n, atLeast: state === "pending" && pendingByName ? n >= countCap : atLeast[state] })
        return new Api.Overview({
          countCap,
          at: microsToDate(nowUs).toISOString(),
          names: Array.from(names, ([key, name]) => {
            const c = counts.get(key)!
            const due = firstDue.get(key)
            const l = limitsByKey.get(key)
            return new Api.NameOverview({
              name,
              pending: bounded("pending", c.pending),
              running: bounded("running", c.running),
              completed: bounded("completed", c.completed),
              dead: bounded("dead", c.dead),
              cancelled: bounded("cancelled", c.cancelled),
              paused: paused.has(key),
              oldestDueAt: due === undefined ? null : microsToDate(due).toISOString(),
              oldestDueMs: due === undefined ? null : Math.max(0, Math.floor((nowUs - due) / 1000)),
              // Dates as ISO strings, no undefined fields: the JSON `sqlane status --json` prints.
              limits: l === undefined ? null : JSON.parse(JSON.stringify(l))
            })
          }).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
        })
      })

      const jobDetail = (id: string) =>
        Effect.gen(function*() {
          const { job, progress } = yield* admin.show(id)
          const [summary] = yield* admin.list({ id, limit: 1 })
          const row = yield* driver.jobGet(id)
          return new Api.JobDetail({
            job: summary === undefined
              ? new Api.JobSummary({
                id: job.id,
                name: job.name,
                state: job.state,
                attempts: job.attempts,
                priority: job.priority,
                runAt: job.runAt.toISOString(),
                createdAt: job.createdAt.toISOString(),
                claimedAt: iso(Option.getOrUndefined(job.claimedAt)),
                finishedAt: iso(Option.getOrUndefined(job.finishedAt)),
                workerId: null,
                lastError: Option.getOrNull(job.lastError)
              })
              : summaryView(summary),
            payload: JSON.stringify(job.payload) ?? "null",
            result: Option.match(job.result, { onNone: () => null, onSome: (r) => JSON.stringify(r) ?? "null" }),
            errors: job.errors.map((e) =>
              new Api.AttemptErrorView({
                attempt: e.attempt,
                at: e.at,
                kind: e.kind,
                tag: e.tag ?? null,
                message: e.message,
                stack: e.stack ?? null
              })
            ),
            progress: Option.getOrNull(Option.map(progress, (p) => ({
              value: p.value,
              message: p.message ?? null,
              attempt: p.attempt,
              at: p.at
            }))),
            traceId: decodeTraceContext(row?.traceContext ?? null)?.traceId ?? null
          })
        })

      const workers = Effect.gen(function*() {
        const nowUs = yield* nowMicros
        const rows = yield* driver.workerList(1000)
        const running = yield* admin.list({ state: "running", limit: 1000 })
        const byWorker = new Map<string, Array<string>>()
        for (const j of running) {
          if (j.workerId === undefined) continue
          const list = byWorker.get(j.workerId) ?? []
          list.push(j.id)
          byWorker.set(j.workerId, list)
        }
        const namesOf = (json: string | null): Array<string> => {
          try {
            const v = json === null ? [] : JSON.parse(json)
            return Array.isArray(v) ? v.filter((n): n is string => typeof n === "string") : []
          } catch {
            return []
          }
        }
        return new Api.WorkerList({
          workers: rows.map((w) =>
            new Api.WorkerView({
              id: w.id,
              host: w.host,
              pid: w.pid,
              startedAt: microsToDate(w.startedAtUs).toISOString(),
              heartbeatAgeMs: Math.max(0, Math.floor((nowUs - w.heartbeatAtUs) / 1000)),
              jobNames: namesOf(w.jobNames),
              runningJobs: byWorker.get(w.id) ?? []
            })
          )
        })
      })

      return handlers
        .handle("session", () =>
          Effect.map(access.decide, (a) =>
            new Api.Session({
              access: a === "allow" ? "allow" : "read-only",
              csrfToken: access.csrfToken,
              csrfHeader: access.csrfHeader
            })))
        .handle("overview", () => Effect.catchTag(overview, "SqlError", databaseError))
        .handle("jobs", ({ urlParams }) =>
          listOptions(urlParams).pipe(
            Effect.flatMap((options) => page(admin, options, urlParams.cursor, urlParams.limit)),
            Effect.catchTag("SqlError", databaseError)
          ))
        .handle("job", ({ path }) => Effect.catchTag(jobDetail(path.id), "SqlError", databaseError))
        .handle("deadLetters", ({ urlParams }) =>
          page(admin, { name: urlParams.name, state: "dead" }, urlParams.cursor, urlParams.limit).pipe(
            Effect.catchTag("SqlError", databaseError)
          ))
        .handle("periodicJobs", () =>
          driver.scheduleList(1000).pipe(
            Effect.map((rows) =>
              new Api.PeriodicJobList({
                periodicJobs: rows.map((r) =>
                  new Api.PeriodicJobView({
                    name: r.name,
                    lastTickAt: r.lastTickUs === null ? null : microsToDate(r.lastTickUs).toISOString(),
                    updatedAt: microsToDate(r.updatedAtUs).toISOString(),
                    jobName: r.jobName,
                    expression: r.expression,
                    timeZone: r.timeZone,
                    nextTickAt: r.nextTickUs === null ? null : microsToDate(r.nextTickUs).toISOString()
                  })
                )
              })
            ),
            Effect.catchTag("SqlError", databaseError)
          ))
        .handle("workers", () => Effect.catchTag(workers, "SqlError", databaseError))
        .handle("stats", () =>
          nowMicros.pipe(Effect.flatMap((nowUs) => Stats.lastHour(driver, nowUs)), Effect.catchTag("SqlError", databaseError)))
    }))
