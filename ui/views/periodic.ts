/** Periodic jobs: each one's latest tick, as the database holds it. */
import { html } from "htm/preact"
import { api } from "../api"
import { ago, time } from "../format"
import { useLive } from "../live"
import { Failure, Loading } from "../parts"
import { href } from "../route"

export const PeriodicView = () => {
  const live = useLive(api.periodicJobs, [])
  const list = live.data?.periodicJobs
  return html`<section data-view="periodic">
    <h1>Periodic jobs</h1>
    <${Failure} error=${live.error} />
    ${list === undefined ? (live.error === undefined ? html`<${Loading} />` : null) : list.length === 0
      ? html`<p class="empty">No periodic job has enqueued a tick yet.</p>`
      : html`<table><thead><tr><th>name</th><th>latest tick</th><th>updated</th></tr></thead>
        <tbody>${list.map((p) => html`<tr key=${p.name}>
          <td><a href=${href("/jobs", { name: p.name })}>${p.name}</a></td>
          <td>${time(p.lastTickAt)} <span class="note">${ago(p.lastTickAt)}</span></td>
          <td>${time(p.updatedAt)}</td>
        </tr>`)}</tbody></table>`}
    <p class="note">Their schedules live in the app's code (PeriodicJob.make), so the next tick is not shown.</p>
  </section>`
}
