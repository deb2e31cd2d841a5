/** Periodic jobs: each one's job, cron expression and time zone, latest and next tick, as the database holds them. */
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
      : html`<table><thead><tr><th>name</th><th>job</th><th>expression</th><th>time zone</th><th>latest tick</th><th>next tick</th></tr></thead>
        <tbody>${list.map((p) => html`<tr key=${p.name} data-name=${p.name}>
          <td class="name">${p.name}</td>
          <td class="name">${p.jobName === null ? "—" : html`<a href=${href("/jobs", { name: p.jobName })}>${p.jobName}</a>`}</td>
          <td><code>${p.expression ?? "—"}</code></td>
          <td>${p.timeZone ?? "—"}</td>
          <td>${time(p.lastTickAt)} <span class="note">${ago(p.lastTickAt)}</span></td>
          <td>${time(p.nextTickAt)} <span class="note">${ago(p.nextTickAt)}</span></td>
        </tr>`)}</tbody></table>`}
    <p class="note">As the latest scheduler of each name wrote them; "—" until a scheduler of this version ran.</p>
  </section>`
}
