/** A page of jobs as a table (id, name, state, attempts, times, last error), and its pager. */
import { html } from "htm/preact"
import type { JobPage, JobSummary } from "../api"
import { ago, time } from "../format"
import { State } from "../parts"
import { href } from "../route"

export const JobTable = ({ page, extra }: { page: JobPage; extra?: (job: JobSummary) => unknown }) =>
  page.jobs.length === 0 ? html`<p class="empty">No jobs.</p>` : html`<div class="scroll"><table class="jobs">
    <thead><tr><th>id</th><th>name</th><th>state</th><th class="num">attempts</th><th>created</th><th>run at</th><th>finished</th><th>last error</th>${extra ? html`<th></th>` : null}</tr></thead>
    <tbody>${page.jobs.map((j) => html`<tr key=${j.id} data-job=${j.id}>
      <td><a href=${href(`/jobs/${j.id}`)}>${j.id}</a></td>
      <td><div class="name">${j.name}</div></td>
      <td><${State} state=${j.state} /></td>
      <td class="num">${j.attempts}</td>
      <td title=${time(j.createdAt)}>${ago(j.createdAt)}</td>
      <td title=${time(j.runAt)}>${ago(j.runAt)}</td>
      <td title=${time(j.finishedAt)}>${ago(j.finishedAt)}</td>
      <td class="error-text">${j.lastError ?? ""}</td>
      ${extra ? html`<td>${extra(j)}</td>` : null}
    </tr>`)}</tbody>
  </table></div>`

/**
 * Keyset pages: the cursors of the pages visited, to go back; "Next" follows `nextCursor`. A page
 * opened from a link (`known: false`) has no count of the pages before it: it shows "a later page".
 */
export const Pager = (props: {
  cursors: ReadonlyArray<string>
  known?: boolean
  next: string | null
  onChange: (cursors: ReadonlyArray<string>) => void
}) =>
  html`<div class="pager">
    <button type="button" disabled=${props.cursors.length === 0} onClick=${() => props.onChange([])}>First page</button>
    <button type="button" disabled=${props.cursors.length === 0} onClick=${() => props.onChange(props.cursors.slice(0, -1))}>Previous</button>
    <span data-testid="page">${props.known === false ? "a later page" : `page ${props.cursors.length + 1}`}</span>
    <button type="button" data-page="next" disabled=${props.next === null} onClick=${() => props.next !== null && props.onChange([...props.cursors, props.next])}>Next</button>
  </div>`
