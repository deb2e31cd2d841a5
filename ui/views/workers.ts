/**
 * Workers: id, host, pid, started, heartbeat age, job names and running jobs. Each name of a list
 * is its own `<bdi>`: right-to-left text or a U+202E override in one cannot reorder the others.
 */
import { html } from "htm/preact"
import { api } from "../api"
import { ago, duration, time } from "../format"
import { useLive } from "../live"
import { Failure, Loading } from "../parts"
import { href } from "../route"

export const WorkersView = () => {
  const live = useLive(api.workers, [])
  const list = live.data?.workers
  return html`<section data-view="workers">
    <h1>Workers</h1>
    <${Failure} error=${live.error} />
    ${list === undefined ? (live.error === undefined ? html`<${Loading} />` : null) : list.length === 0
      ? html`<p class="empty">No workers.</p>`
      : html`<div class="scroll"><table><thead><tr><th>id</th><th>host</th><th class="num">pid</th><th>started</th><th>heartbeat</th><th>job names</th><th>running jobs</th></tr></thead>
        <tbody>${list.map((w) => html`<tr key=${w.id} data-worker=${w.id}>
          <td class="mono">${w.id}</td>
          <td><div class="name">${w.host}</div></td>
          <td class="num">${w.pid}</td>
          <td title=${time(w.startedAt)}>${ago(w.startedAt)}</td>
          <td class=${w.heartbeatAgeMs > 60_000 ? "stale" : ""}>${duration(w.heartbeatAgeMs)} ago</td>
          <td><div class="name" data-testid="job-names">${w.jobNames.length === 0 ? "all" : w.jobNames.map((n, i) => html`${i > 0 ? ", " : ""}<bdi>${n}</bdi>`)}</div></td>
          <td>${w.runningJobs.length === 0 ? "—" : w.runningJobs.map((id, i) => html`${i > 0 ? ", " : ""}<a href=${href(`/jobs/${id}`)}>${id}</a>`)}</td>
        </tr>`)}</tbody></table></div>`}
  </section>`
}
