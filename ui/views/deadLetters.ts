/** Dead letters: the jobs in state `dead`, newest first, by name; retry each. */
import { html } from "htm/preact"
import { useState } from "preact/hooks"
import { api, type JobSummary } from "../api"
import { useLive } from "../live"
import { Failure, Loading, useRun } from "../parts"
import { go } from "../route"
import { JobTable, Pager } from "./jobTable"

const RetryButton = ({ job, refresh }: { job: JobSummary; refresh: () => void }) => {
  const { busy, run, canAct } = useRun()
  if (!canAct) return null
  return html`<button type="button" data-action="retry" disabled=${busy} onClick=${() =>
    run(async () => {
      const outcome = await api.jobAction(job.id, "retry")
      return outcome.changed ? `Job ${job.id} retried` : `Job ${job.id} not retried: it is ${outcome.state ?? "gone"}`
    }, refresh)}>Retry</button>`
}

export const DeadLettersView = ({ params }: { params: URLSearchParams }) => {
  const name = params.get("name") || undefined
  const [pages, setPages] = useState<{ name: string | undefined; cursors: ReadonlyArray<string> }>({ name, cursors: [] })
  const cursors = pages.name === name ? pages.cursors : []
  const cursor = cursors[cursors.length - 1]
  const page = useLive(() => api.deadLetters(name, cursor), [name, cursor])
  return html`<section data-view="dead-letters">
    <h1>Dead letters</h1>
    <form class="filters" key=${name} onSubmit=${(e: Event) => {
      e.preventDefault()
      go("/dead-letters", { name: String(new FormData(e.target as HTMLFormElement).get("name") ?? "").trim() })
    }}>
      <label>name <input name="name" defaultValue=${name ?? ""} /></label>
      <button type="submit">Filter</button>
    </form>
    <${Failure} error=${page.error} />
    ${page.data === undefined ? (page.error === undefined ? html`<${Loading} />` : null) : html`
      <${JobTable} page=${page.data} extra=${(j: JobSummary) => html`<${RetryButton} job=${j} refresh=${page.refresh} />`} />
      <${Pager} cursors=${cursors} next=${page.data.nextCursor} onChange=${(c: ReadonlyArray<string>) => setPages({ name, cursors: c })} />`}
  </section>`
}
