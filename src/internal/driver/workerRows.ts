/**
 * The rows of `<prefix>workers` and the workers' session locks, alike on both databases: the lock
 * names (`workerLockPrefix`), what the rows publish (`jobNamesOf`, `jobLimitsOf`), reading a row
 * (`toWorker`) and the statements that write them (`workerRows`).
 *
 * @internal
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type * as Statement from "@effect/sql/Statement"
import * as Effect from "effect/Effect"
import type { NameLimits, WorkerRow, WorkerStart, WorkersOps } from "./Driver.js"
import type { Run } from "./run.js"
import { num } from "./shared.js"

/**
 * What every worker lock name of one queue starts with: `sqw<scope>:`, where `<scope>` is 5 base-36
 * characters of a hash (FNV-1a) of the database's name and the table prefix. A worker's session lock is
 * `<this><worker id>` (MySQL, `GET_LOCK`) or an advisory lock on that name's hash (PostgreSQL).
 *
 * The scope keeps queues apart: MySQL's `GET_LOCK` names are server-wide, and on both databases two
 * queues (two prefixes, or two databases of one server) may each have a worker of the same id. It
 * is 9 characters, as the `sqlane:w:` of earlier versions was, so ids of up to 55 characters still
 * fit MySQL's 64. On MySQL the name and prefix are lowercased first: with `lower_case_table_names`
 * set, `Test` and `test` are one database, and all processes of a queue must name its locks alike.
 * Workers of versions with the old lock names must not run beside these (they would see each other
 * as lost): stop them all before starting the new version.
 */
export const workerLockPrefix = (dialect: "pg" | "mysql", database: string, prefix: string): string => {
  const scope = `${database}/${prefix}`
  const text = dialect === "mysql" ? scope.toLowerCase() : scope
  let hash = 0x811c9dc5
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i)
    hash = Math.imul(hash, 0x01000193)
  }
  return `sqw${((hash >>> 0) % 36 ** 5).toString(36).padStart(5, "0")}:`
}

/** The union of the workers' `job_names` (JSON arrays; a row written before they were recorded has none). */
export const jobNamesOf = (rows: ReadonlyArray<{ readonly job_names: string | null }>): ReadonlySet<string> => {
  const names = new Set<string>()
  for (const r of rows) {
    try {
      const parsed: unknown = r.job_names === null ? [] : JSON.parse(r.job_names)
      if (Array.isArray(parsed)) for (const n of parsed) if (typeof n === "string") names.add(n)
    } catch {
      // not JSON: a row edited by hand
    }
  }
  return names
}

/**
 * The job definitions' limits the rows of `<prefix>workers` publish, by name: the first row's for a
 * name, with `fair` when any row's definition has a key.
 */
export const jobLimitsOf = (
  rows: ReadonlyArray<{ readonly job_limits: string | null }>
): ReadonlyMap<string, NameLimits> => {
  const limits = new Map<string, NameLimits>()
  const count = (u: unknown) => (typeof u === "number" && Number.isInteger(u) && u > 0 ? u : undefined)
  for (const r of rows) {
    try {
      const parsed: unknown = r.job_limits === null ? {} : JSON.parse(r.job_limits)
      if (typeof parsed !== "object" || parsed === null) continue
      for (const [name, l] of Object.entries(parsed as Record<string, any>)) {
        if (typeof l !== "object" || l === null) continue
        const seen = limits.get(name)
        if (seen !== undefined) {
          if (l.fair === true && seen.fair !== true) limits.set(name, { ...seen, fair: true })
          continue
        }
        const rate = (r: any) =>
          typeof r === "object" && r !== null && count(r.starts) !== undefined && count(r.perMs) !== undefined
            ? { starts: r.starts as number, perMs: r.perMs as number }
            : undefined
        limits.set(name, {
          running: count(l.running),
          runningPerKey: count(l.runningPerKey),
          rate: rate(l.rate),
          ratePerKey: rate(l.ratePerKey),
          ...(l.fair === true ? { fair: true } : {})
        })
      }
    } catch {
      // not JSON: a row edited by hand
    }
  }
  return limits
}

/** What the statements on worker rows need of a driver's context. */
interface WorkerRowsContext {
  readonly sql: SqlClient.SqlClient
  readonly workers: Statement.Identifier
  readonly ts: (us: number) => Statement.Fragment
  readonly run: Run
}

/** A row of `workerList` (times already as µs columns). */
export const toWorker = (r: any): WorkerRow => ({
  id: String(r.id),
  host: String(r.host),
  pid: num(r.pid),
  startedAtUs: num(r.started_at_us),
  heartbeatAtUs: num(r.heartbeat_at_us),
  jobNames: r.job_names ?? null
})

/**
 * The statements on worker rows, alike on both databases but for how a worker id registered again
 * updates its row (`upsert`: PostgreSQL's `ON CONFLICT`, MySQL/MariaDB's `ON DUPLICATE KEY UPDATE`).
 */
export const workerRows = (
  ctx: WorkerRowsContext,
  /** The clause of a registration whose row exists: every column but `started_at`, `host` and `pid` written again. */
  upsert: string,
  /** The clause of a heartbeat whose row exists: `heartbeat_at` alone. */
  beat: string
): Pick<
  WorkersOps,
  "workerRegister" | "workerJobNames" | "workerJobLimits" | "workerHeartbeat" | "workerRelocking" | "workerRelocked"
> => {
  const { run, sql, ts, workers } = ctx
  const write = (id: string, started: WorkerStart, nowUs: number, onConflict: string) =>
    sql`INSERT INTO ${workers} (id, started_at, heartbeat_at, host, pid, job_names, job_limits)
        VALUES (${id}, ${ts(started.startedAtUs)}, ${ts(nowUs)}, ${started.host}, ${started.pid}, ${JSON.stringify(started.jobNames)},
          ${started.jobLimits.size === 0 ? null : JSON.stringify(Object.fromEntries(started.jobLimits))})
        ${sql.literal(onConflict)}`
  return {
    workerRegister: (id, nowUs, host, pid, jobNames = [], jobLimits = new Map()) =>
      write(id, { startedAtUs: nowUs, host, pid, jobNames, jobLimits }, nowUs, upsert).pipe(Effect.asVoid),
    workerJobLimits: (sinceUs) =>
      Effect.map(
        sql<{ job_limits: string | null }>`SELECT job_limits FROM ${workers}
          WHERE heartbeat_at >= ${ts(sinceUs)} AND job_limits IS NOT NULL`,
        jobLimitsOf
      ),
    workerJobNames: (sinceUs) =>
      Effect.map(
        sql<{ job_names: string | null }>`SELECT job_names FROM ${workers} WHERE heartbeat_at >= ${ts(sinceUs)}`,
        jobNamesOf
      ),
    // With `started`, an insert that updates the heartbeat of the row it finds: one statement, which
    // writes a row that is gone again; without, an update of the row alone.
    workerHeartbeat: (id, nowUs, started) =>
      run(
        started === undefined
          ? sql`UPDATE ${workers} SET heartbeat_at = ${ts(nowUs)} WHERE id = ${id}`
          : write(id, started, nowUs, beat)
      ).pipe(Effect.asVoid),
    workerRelocking: (id) => sql`UPDATE ${workers} SET relocking = TRUE WHERE id = ${id}`.pipe(Effect.asVoid),
    workerRelocked: (id) =>
      sql`UPDATE ${workers} SET relocking = FALSE, relocks = relocks + 1 WHERE id = ${id}`.pipe(Effect.asVoid)
  }
}
