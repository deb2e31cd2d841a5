/**
 * Overview: per job name, its counts by state, paused, limits, the oldest due job and pickup
 * latency; the chart of completed and failed jobs per minute; pause and resume per name.
 */
import { html } from "htm/preact"
import { useState } from "preact/hooks"
import { api, jobStates, type NameOverview, type Stats } from "../api"
import { type Series, ThroughputChart } from "../chart"
import { count, duration } from "../format"
import { useLive } from "../live"
import { Failure, Loading, useRun } from "../parts"
import { href } from "../route"

/** The chart's series: one name's points, or every name's summed per minute. */
const seriesOf = (stats: Stats, name: string): Series | undefined => {
  const chosen = name === "" ? stats.names : stats.names.filter((n) => n.name === name)
  const first = chosen[0]
  if (first === undefined || first.points.length === 0) return undefined
  const minutes = first.points.map((p) => Date.parse(p.minute) / 1000)
  const sum = (key: "completed" | "failed") => minutes.map((_, i) => chosen.reduce((t, n) => t + (n.points[i]?.[key] ?? 0), 0))
  return { minutes, completed: sum("completed"), failed: sum("failed") }
}

const limitsText = (limits: unknown): string => {
  if (limits === null || limits === undefined) return "—"
  if (typeof limits !== "object") return String(limits)
  return Object.entries(limits as Record<string, unknown>)
    .filter(([, v]) => v !== null && v !== undefined)
    .map(([k, v]) => `${k}: ${typeof v === "object" ? JSON.stringify(v) : String(v)}`)
    .join(", ") || "—"
}

const PauseButton = ({ name, refresh }: { name: NameOverview; refresh: () => void }) => {
  const { busy, run, canAct } = useRun()
  if (!canAct) return null
  const action = name.paused ? "resume" : "pause"
  return html`<button type="button" data-action=${action} disabled=${busy} onClick=${() =>
    run(async () => {
      const outcome = await api.nameAction(name.name, action)
      return `${name.name}: ${outcome.changed ? (action === "pause" ? "paused" : "resumed") : `already ${action === "pause" ? "paused" : "running"}`}`
    }, refresh)}>${name.paused ? "Resume" : "Pause"}</button>`
}

export const OverviewView = () => {
  const overview = useLive(api.overview, [])
  const stats = useLive(api.stats, [])
  const [chartName, setChartName] = useState("")
  const pickup = new Map((stats.data?.names ?? []).map((n) => [n.name, n.pickupMs]))
  const series = stats.data ? seriesOf(stats.data, chartName) : undefined
  const names = overview.data?.names ?? []
  return html`<section data-view="overview">
    <h1>Overview</h1>
    <${Failure} error=${overview.error} />
    ${overview.data === undefined ? (overview.error === undefined ? html`<${Loading} />` : null) : names.length === 0
      ? html`<p class="empty">No jobs yet.</p>`
      : html`<div class="scroll"><table class="names">
        <thead><tr>
          <th>name</th>${jobStates.map((s) => html`<th class="num">${s}</th>`)}
          <th>oldest due</th><th title="Each percentile is the upper bound of its latency bucket">pickup p50 / p95 / p99 (≤)</th><th>limits</th><th></th>
        </tr></thead>
        <tbody>${names.map((n) => {
          const p = pickup.get(n.name)
          return html`<tr key=${n.name} data-name=${n.name}>
            <td><a href=${href("/jobs", { name: n.name })}>${n.name}</a>${n.paused ? html` <span class="badge paused">paused</span>` : null}</td>
            ${jobStates.map((s) => html`<td class="num"><a href=${href("/jobs", { name: n.name, state: s })} data-count=${s}>${count(n[s])}</a></td>`)}
            <td>${n.oldestDueMs === null ? "—" : duration(n.oldestDueMs)}</td>
            <td>${p === undefined || p.count === 0 ? "no data" : `${duration(p.p50)} / ${duration(p.p95)} / ${duration(p.p99)}`}</td>
            <td class="limits">${limitsText(n.limits)}</td>
            <td><${PauseButton} name=${n} refresh=${overview.refresh} /></td>
          </tr>`
        })}</tbody>
      </table></div>
      <p class="note">Counts read at most ${overview.data.countCap.toLocaleString("en-US")} jobs per state (+: at least).</p>`}
    <h2>Completed and failed per minute, last hour</h2>
    ${stats.data === undefined || stats.data === null || stats.data.names.length === 0
      ? html`<p class="empty" data-testid="no-stats">${stats.data === undefined && stats.error === undefined ? "Loading…" : "No data."}</p>`
      : html`<label>Job name <select value=${chartName} onChange=${(e: Event) => setChartName((e.target as HTMLSelectElement).value)}>
          <option value="">all names</option>
          ${stats.data.names.map((n) => html`<option value=${n.name}>${n.name}</option>`)}
        </select></label>
        ${series === undefined ? html`<p class="empty" data-testid="no-stats">No data.</p>` : html`<${ThroughputChart} series=${series} />`}`}
  </section>`
}
