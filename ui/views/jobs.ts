/**
 * The jobs list: filters (name, state, created time range, id, unique key) and the page's cursor
 * kept in the address, keyset pages, and bulk retry/cancel/delete of the current filter, confirmed
 * by the count of jobs it selects. A filter value the address holds but the API would not take (an
 * unknown state, a time that is none, an id that is not one) is shown as an error: nothing is listed
 * and no bulk action runs until it is changed, rather than acting on a wider filter than the address
 * says.
 */
import { html } from "htm/preact"
import { useState } from "preact/hooks"
import { api, ApiError, type JobFilter, type JobPage, jobStates, type JobState } from "../api"
import { localToIso } from "../format"
import { useLive } from "../live"
import { Failure, Loading, useRun } from "../parts"
import { go } from "../route"
import { JobTable, Pager } from "./jobTable"

const fields = ["name", "state", "id", "uniqueKey", "createdFrom", "createdBefore"] as const

/** A value of the address the page refuses: what is wrong with it, and the value itself. */
interface Problem {
  readonly what: string
  readonly value: string
}

/** A job id as the API takes it: 1 to 19 digits, at most 2^63 - 1 (ids are signed 64-bit integers). */
const isJobId = (text: string) => /^\d{1,19}$/.test(text) && BigInt(text) <= 9_223_372_036_854_775_807n

/**
 * The filter and the page's cursor in the address (createdFrom/createdBefore as datetime-local
 * values), with a problem for each value that is not one the API takes.
 */
const filterOf = (params: URLSearchParams): { filter: JobFilter; cursor: string | undefined; problems: ReadonlyArray<Problem> } => {
  const get = (k: string) => params.get(k) || undefined
  const problems: Array<Problem> = []
  const state = get("state")
  if (state !== undefined && !(jobStates as ReadonlyArray<string>).includes(state)) problems.push({ what: "unknown state", value: state })
  const id = get("id")
  if (id !== undefined && !isJobId(id)) problems.push({ what: "not a job id", value: id })
  const time = (k: "createdFrom" | "createdBefore", label: string) => {
    const value = get(k)
    const iso = localToIso(value ?? null)
    if (value !== undefined && iso === undefined) problems.push({ what: `${label} is not a time`, value })
    return iso
  }
  const createdFrom = time("createdFrom", "created from")
  const createdBefore = time("createdBefore", "created before")
  const cursor = get("cursor")
  if (cursor !== undefined && !isJobId(cursor)) problems.push({ what: "not a page cursor", value: cursor })
  return {
    filter: { name: get("name"), state: state as JobState | undefined, id, uniqueKey: get("uniqueKey"), createdFrom, createdBefore },
    cursor,
    problems
  }
}

const bulkVerb = { retry: "retried", cancel: "cancelled", delete: "deleted" } as const
type BulkAction = keyof typeof bulkVerb
/** The jobs an action changes, of those the filter selects (as the API's retry, cancel and delete). */
const bulkChanges = { retry: "dead or cancelled", cancel: "pending or running", delete: "all but running ones" } as const

/** The count is of the jobs the filter selects; the action changes only those it applies to. */
const bulkQuestion = (action: BulkAction, count: number) =>
  count === 1
    ? `1 job matches this filter; it will be ${bulkVerb[action]} if it can be (${bulkChanges[action]}). Confirm?`
    : `${count} jobs match this filter; those that can be ${bulkVerb[action]} (${bulkChanges[action]}) will be. Confirm?`

const Bulk = ({ filter, invalid, refresh }: { filter: JobFilter; invalid: boolean; refresh: () => void }) => {
  const { busy, run, canAct } = useRun()
  // The question holds the filter it counted: Confirm acts on that one, whatever the form shows now.
  const [asking, setAsking] = useState<{ action: BulkAction; count: number; filter: JobFilter } | undefined>()
  if (!canAct) return null
  const selective = filter.name !== undefined || filter.state !== undefined || filter.id !== undefined || filter.uniqueKey !== undefined
  if (!selective) return html`<p class="note">Bulk actions need a filter by name, state, id or unique key.</p>`
  const count = (action: BulkAction) =>
    run(async () => {
      const outcome = await api.bulk(action, filter)
      setAsking({ action, count: outcome.count, filter })
      return `${outcome.count} job${outcome.count === 1 ? "" : "s"} match this filter`
    })
  const confirm = (action: BulkAction, expected: number, counted: JobFilter) =>
    run(async () => {
      setAsking(undefined)
      try {
        const outcome = await api.bulk(action, counted, expected)
        return `${outcome.changed} of ${outcome.count} jobs ${bulkVerb[action]}`
      } catch (e) {
        // The filter now selects another number of jobs: ask again with that count.
        if (e instanceof ApiError && e.status === 409 && typeof e.body.count === "number") {
          setAsking({ action, count: e.body.count, filter: counted })
          return `The filter now selects ${e.body.count} jobs: confirm again`
        }
        throw e
      }
    }, refresh)
  return html`<div class="bulk" data-testid="bulk">
    <span>All jobs of this filter:</span>
    ${(["retry", "cancel", "delete"] as const).map((a) =>
      html`<button type="button" data-action=${`bulk-${a}`} disabled=${busy || invalid} title=${invalid ? "The filter has an invalid value" : undefined}
        onClick=${() => count(a)}>${a[0].toUpperCase() + a.slice(1)}…</button>`)}
    ${asking === undefined ? null : html`<span class="confirm" role="group">
      <span data-testid="bulk-question">${bulkQuestion(asking.action, asking.count)}</span>
      <button type="button" class="danger" data-action="confirm" disabled=${busy || invalid || asking.count === 0} onClick=${() => confirm(asking.action, asking.count, asking.filter)}>Confirm</button>
      <button type="button" data-action="dismiss" onClick=${() => setAsking(undefined)}>Cancel</button>
    </span>`}
  </div>`
}

export const JobsView = ({ params }: { params: URLSearchParams }) => {
  const { filter, cursor, problems } = filterOf(params)
  const key = fields.map((f) => params.get(f) ?? "").join("\u0000")
  // The cursors of the pages visited under this filter, to go back; a cursor from a link starts anew.
  const [trail, setTrail] = useState<{ key: string; cursors: ReadonlyArray<string> }>({ key, cursors: [] })
  const visited = trail.key === key ? trail.cursors : []
  const at = cursor === undefined ? -1 : visited.indexOf(cursor)
  const cursors = cursor === undefined ? [] : at >= 0 ? visited.slice(0, at + 1) : [cursor]
  const invalid = problems.length > 0
  const page = useLive<JobPage | undefined>(() => (invalid ? Promise.resolve(undefined) : api.jobs(filter, cursor)), [key, cursor])
  const filterParams = Object.fromEntries(fields.map((f) => [f, params.get(f) ?? undefined]))
  const turn = (c: ReadonlyArray<string>) => {
    setTrail({ key, cursors: c })
    go("/jobs", { ...filterParams, cursor: c[c.length - 1] })
  }
  const submit = (e: Event) => {
    e.preventDefault()
    const form = new FormData(e.target as HTMLFormElement)
    go("/jobs", Object.fromEntries(fields.map((f) => [f, String(form.get(f) ?? "").trim()])))
  }
  // The form's fields take their values once (defaultValue; the form is keyed by the filter), so a
  // poll's render does not undo what is being typed.
  return html`<section data-view="jobs">
    <h1>Jobs</h1>
    <form class="filters" onSubmit=${submit} key=${key}>
      <label>name <input name="name" defaultValue=${params.get("name") ?? ""} /></label>
      <label>state <select name="state">
        <option value="">any</option>${jobStates.map((s) => html`<option value=${s} selected=${s === params.get("state")}>${s}</option>`)}
      </select></label>
      <label>created from <input type="datetime-local" step="1" name="createdFrom" defaultValue=${params.get("createdFrom") ?? ""} /></label>
      <label>created before <input type="datetime-local" step="1" name="createdBefore" defaultValue=${params.get("createdBefore") ?? ""} /></label>
      <label>id <input name="id" inputmode="numeric" size="12" defaultValue=${params.get("id") ?? ""} /></label>
      <label>unique key <input name="uniqueKey" defaultValue=${params.get("uniqueKey") ?? ""} /></label>
      <button type="submit">Filter</button>
      <button type="button" onClick=${() => go("/jobs")}>Clear</button>
    </form>
    ${problems.map((p) => html`<p class="error" role="alert" data-testid="filter-problem">${p.what}: <bdi>${p.value}</bdi></p>`)}
    <${Bulk} key=${key} filter=${filter} invalid=${invalid} refresh=${page.refresh} />
    <${Failure} error=${page.error} />
    ${invalid ? null : page.data === undefined ? (page.error === undefined ? html`<${Loading} />` : null) : html`
      <${JobTable} page=${page.data} />
      <${Pager} cursors=${cursors} known=${cursor === undefined || at >= 0} next=${page.data.nextCursor} onChange=${turn} />`}
  </section>`
}
