/**
 * The jobs list: filters (name, state, created time range, id, unique key) kept in the address,
 * keyset pages, and bulk retry/cancel/delete of the current filter, confirmed by its count.
 */
import { html } from "htm/preact"
import { useState } from "preact/hooks"
import { api, ApiError, type JobFilter, jobStates, type JobState } from "../api"
import { localToIso } from "../format"
import { useLive } from "../live"
import { Failure, Loading, useRun } from "../parts"
import { go } from "../route"
import { JobTable, Pager } from "./jobTable"

const fields = ["name", "state", "id", "uniqueKey", "createdFrom", "createdBefore"] as const

/** The filter in the address (createdFrom/createdBefore as datetime-local values). */
const filterOf = (params: URLSearchParams): JobFilter => {
  const get = (k: string) => params.get(k) || undefined
  const state = get("state")
  return {
    name: get("name"),
    state: state !== undefined && (jobStates as ReadonlyArray<string>).includes(state) ? state as JobState : undefined,
    id: get("id"),
    uniqueKey: get("uniqueKey"),
    createdFrom: localToIso(params.get("createdFrom")),
    createdBefore: localToIso(params.get("createdBefore"))
  }
}

const bulkVerb = { retry: "retried", cancel: "cancelled", delete: "deleted" } as const
type BulkAction = keyof typeof bulkVerb

const Bulk = ({ filter, refresh }: { filter: JobFilter; refresh: () => void }) => {
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
      html`<button type="button" data-action=${`bulk-${a}`} disabled=${busy} onClick=${() => count(a)}>${a[0].toUpperCase() + a.slice(1)}…</button>`)}
    ${asking === undefined ? null : html`<span class="confirm" role="group">
      <span data-testid="bulk-question">${asking.count} job${asking.count === 1 ? "" : "s"} will be ${bulkVerb[asking.action]}, confirm?</span>
      <button type="button" class="danger" data-action="confirm" disabled=${busy || asking.count === 0} onClick=${() => confirm(asking.action, asking.count, asking.filter)}>Confirm</button>
      <button type="button" data-action="dismiss" onClick=${() => setAsking(undefined)}>Cancel</button>
    </span>`}
  </div>`
}

export const JobsView = ({ params }: { params: URLSearchParams }) => {
  const filter = filterOf(params)
  const key = fields.map((f) => params.get(f) ?? "").join("\u0000")
  const [pages, setPages] = useState<{ key: string; cursors: ReadonlyArray<string> }>({ key, cursors: [] })
  const cursors = pages.key === key ? pages.cursors : []
  const cursor = cursors[cursors.length - 1]
  const page = useLive(() => api.jobs(filter, cursor), [key, cursor])
  const submit = (e: Event) => {
    e.preventDefault()
    const form = new FormData(e.target as HTMLFormElement)
    go("/jobs", Object.fromEntries(fields.map((f) => [f, String(form.get(f) ?? "").trim()])))
  }
  return html`<section data-view="jobs">
    <h1>Jobs</h1>
    <form class="filters" onSubmit=${submit} key=${key}>
      <label>name <input name="name" value=${params.get("name") ?? ""} /></label>
      <label>state <select name="state" value=${params.get("state") ?? ""}>
        <option value="">any</option>${jobStates.map((s) => html`<option value=${s}>${s}</option>`)}
      </select></label>
      <label>created from <input type="datetime-local" step="1" name="createdFrom" value=${params.get("createdFrom") ?? ""} /></label>
      <label>created before <input type="datetime-local" step="1" name="createdBefore" value=${params.get("createdBefore") ?? ""} /></label>
      <label>id <input name="id" inputmode="numeric" size="12" value=${params.get("id") ?? ""} /></label>
      <label>unique key <input name="uniqueKey" value=${params.get("uniqueKey") ?? ""} /></label>
      <button type="submit">Filter</button>
      <button type="button" onClick=${() => go("/jobs")}>Clear</button>
    </form>
    <${Bulk} key=${key} filter=${filter} refresh=${page.refresh} />
    <${Failure} error=${page.error} />
    ${page.data === undefined ? (page.error === undefined ? html`<${Loading} />` : null) : html`
      <${JobTable} page=${page.data} />
      <${Pager} cursors=${cursors} next=${page.data.nextCursor} onChange=${(c: ReadonlyArray<string>) => setPages({ key, cursors: c })} />`}
  </section>`
}
