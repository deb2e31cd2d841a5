/**
 * The dashboard's JSON API as the page calls it: relative URLs (`api/…`), so the page works under
 * any base path; every action carries the CSRF token of `GET api/session`.
 */

export type Access = "allow" | "read-only"
export type JobState = "pending" | "running" | "completed" | "dead" | "cancelled"
export const jobStates: ReadonlyArray<JobState> = ["pending", "running", "completed", "dead", "cancelled"]

export interface Session {
  readonly access: Access
  readonly csrfToken: string
  readonly csrfHeader: string
}
export interface BoundedCount {
  readonly count: number
  readonly atLeast: boolean
}
export interface NameOverview extends Record<JobState, BoundedCount> {
  readonly name: string
  readonly paused: boolean
  readonly oldestDueAt: string | null
  readonly oldestDueMs: number | null
  readonly limits: unknown
}
export interface Overview {
  readonly names: ReadonlyArray<NameOverview>
  readonly countCap: number
  readonly at: string
}
export interface JobSummary {
  readonly id: string
  readonly name: string
  readonly state: string
  readonly attempts: number
  readonly priority: number
  readonly runAt: string
  readonly createdAt: string
  readonly claimedAt: string | null
  readonly finishedAt: string | null
  readonly workerId: string | null
  readonly lastError: string | null
}
export interface JobPage {
  readonly jobs: ReadonlyArray<JobSummary>
  readonly nextCursor: string | null
}
export interface AttemptError {
  readonly attempt: number
  readonly at: string
  readonly kind: string
  readonly tag: string | null
  readonly message: string
  readonly stack: string | null
}
export interface JobDetail {
  readonly job: JobSummary
  readonly payload: string
  readonly result: string | null
  readonly errors: ReadonlyArray<AttemptError>
  readonly progress: { readonly value: number; readonly message: string | null; readonly attempt: number; readonly at: string } | null
  readonly traceId: string | null
}
export interface PeriodicJob {
  readonly name: string
  readonly lastTickAt: string | null
  readonly updatedAt: string
  readonly jobName: string | null
  readonly expression: string | null
  readonly timeZone: string | null
  readonly nextTickAt: string | null
}
export interface WorkerView {
  readonly id: string
  readonly host: string
  readonly pid: number
  readonly startedAt: string
  readonly heartbeatAgeMs: number
  readonly jobNames: ReadonlyArray<string>
  readonly runningJobs: ReadonlyArray<string>
}
export interface StatsName {
  readonly name: string
  readonly points: ReadonlyArray<{ readonly minute: string; readonly completed: number; readonly failed: number }>
  readonly pickupMs: { readonly p50: number | null; readonly p95: number | null; readonly p99: number | null; readonly count: number }
}
export interface Stats {
  readonly since: string
  readonly names: ReadonlyArray<StatsName>
}
export interface ActionOutcome {
  readonly changed: boolean
  readonly state: string | null
}
export interface BulkOutcome {
  readonly count: number
  readonly done: boolean
  readonly changed: number
}
/** The filter of the jobs list (and of bulk actions): every field optional. */
export interface JobFilter {
  readonly name?: string
  readonly state?: JobState
  readonly id?: string
  readonly uniqueKey?: string
  readonly createdFrom?: string
  readonly createdBefore?: string
}

/** A refused or failed request: the HTTP status and the API's error (`_tag`, `message`…). */
export class ApiError extends Error {
  constructor(readonly status: number, readonly body: { readonly _tag?: string; readonly message?: string; readonly count?: number }) {
    super(body.message ?? body._tag ?? `HTTP ${status}`)
  }
}

const request = async <A>(path: string, init?: RequestInit): Promise<A> => {
  const response = await fetch(path, { credentials: "same-origin", cache: "no-store", ...init })
  const text = await response.text()
  let body: unknown
  try {
    body = JSON.parse(text)
  } catch {
    body = { message: text.slice(0, 200) || response.statusText }
  }
  if (!response.ok) throw new ApiError(response.status, (body ?? {}) as ApiError["body"])
  return body as A
}

const query = (params: Record<string, string | number | undefined>) => {
  const search = new URLSearchParams()
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== "") search.set(k, String(v))
  const text = search.toString()
  return text === "" ? "" : `?${text}`
}

let session: Promise<Session> | undefined

/** The access granted and the CSRF token (read once per page load). */
export const getSession = (): Promise<Session> => {
  session ??= request<Session>("api/session").catch((e) => {
    session = undefined
    throw e
  })
  return session
}

const act = async <A>(path: string, body?: unknown): Promise<A> => {
  const s = await getSession()
  return request<A>(path, {
    method: "POST",
    headers: { [s.csrfHeader]: s.csrfToken, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    body: body === undefined ? null : JSON.stringify(body)
  })
}

const segment = encodeURIComponent

/** A server without `GET api/stats` is asked again a minute later, not on every poll. */
let statsMissingUntil = 0

export const api = {
  overview: () => request<Overview>("api/overview"),
  /** The stats of the last hour, or null where the server has no such endpoint (404). */
  stats: (): Promise<Stats | null> =>
    Date.now() < statsMissingUntil ? Promise.resolve(null) : request<Stats>("api/stats").catch((e: unknown) => {
      if (e instanceof ApiError && e.status === 404) {
        statsMissingUntil = Date.now() + 60_000
        return null
      }
      throw e
    }),
  jobs: (filter: JobFilter, cursor?: string, limit = 50) => request<JobPage>(`api/jobs${query({ ...filter, cursor, limit })}`),
  job: (id: string) => request<JobDetail>(`api/jobs/${segment(id)}`),
  deadLetters: (name?: string, cursor?: string) => request<JobPage>(`api/dead-letters${query({ name, cursor })}`),
  periodicJobs: () => request<{ periodicJobs: ReadonlyArray<PeriodicJob> }>("api/periodic-jobs"),
  workers: () => request<{ workers: ReadonlyArray<WorkerView> }>("api/workers"),
  jobAction: (id: string, action: "retry" | "cancel" | "delete") => act<ActionOutcome>(`api/jobs/${segment(id)}/${action}`),
  nameAction: (name: string, action: "pause" | "resume") => act<ActionOutcome>(`api/names/${action}`, { name }),
  bulk: (action: "retry" | "cancel" | "delete", filter: JobFilter, confirm?: number) =>
    act<BulkOutcome>(`api/bulk/${action}`, confirm === undefined ? { filter } : { filter, confirm })
}
