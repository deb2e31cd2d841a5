/**
 * Overview: per job name, its counts by state, paused, limits, the oldest due job and pickup
 * latency; the chart of completed and failed jobs per minute (the name it shows kept in the
 * address, `#/?chart=…`); pause and resume per name. The counts are read every 2 s, the statistics
 * (flushed by the workers every 5 s, and long with many names) every 10 s.
 */
import { html } from "htm/preact"
import { api, jobStates, type NameOverview, type Stats } from "../api"
import { type Series, ThroughputChart } from "../chart"
import { count, duration, isolate } from "../format"
import { useLive } from "../live"
import { Failure, Loading, useRun } from "../parts"
import { go, href } from "../route"

const statsPollMs = 10_000

/**
 * `GET api/stats` as it may answer: `truncated: true` when, for too many names, it left out the
 * oldest minutes (a server without the field never does).
 */
type StatsAnswer = Stats & { readonly truncated?: boolean }

/** The chart's series: one name's points, or every name's summed per minute (matched by minute). */
const seriesOf = (stats: Stats, name: string): Series | undefined => {
  const chosen = name === "" ? stats.names : stats.names.filter((n) => n.name === name)
  const sums = new Map<number, { completed: number; failed: number }>()
  for (const n of chosen) {
    for (const p of n.points) {
      const minute = Date.parse(p.minute) / 1000
      const sum = sums.get(minute) ?? { completed: 0, failed: 0 }
      sums.set(minute, { completed: sum.completed + p.completed, failed: sum.failed + p.failed })
    }
  }
  if (sums.size === 0) return undefined
  const minutes = [...sums.keys()].sort((a, b) => a - b)
  return { minutes, completed: minutes.map((m) => sums.get(m)!.completed), failed: minutes.map((m) => sums.get(m)!.failed) }
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
      return `${isolate(name.name)}: ${outcome.changed ? (action === "pause" ? "paused" : "resumed") : `already ${action === "pause" ? "paused" : "running"}`}`
    }, refresh)}>${name.paused ? "Resume" : "Pause"}</button>`
}

export const OverviewView = ({ params }: { params: URLSearchParams }) => {
  const overview = useLive(api.overview, [])
  const stats = useLive<StatsAnswer | null>(api.stats, [], statsPollMs)
  const chartName = params.get("chart") ?? ""
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
            <td><div class="name"><a href=${href("/jobs", { name: n.name })}><bdi>${n.name}</bdi></a>${n.paused ? html` <span class="badge paused">paused</span>` : null}</div></td>
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
      : html`<label>Job name <select value=${chartName} onChange=${(e: Event) => go("/", { chart: (e.target as HTMLSelectElement).value })}>
          <option value="">all names</option>
          ${stats.data.names.map((n) => html`<option value=${n.name}>${n.name}</option>`)}
        </select></label>
        ${series === undefined ? html`<p class="empty" data-testid="no-stats">No data.</p>` : html`<${ThroughputChart} series=${series} />`}
        ${stats.data.truncated === true ? html`<p class="note" data-testid="stats-truncated">Too many job names: the oldest minutes are left out.</p>` : null}`}
  </section>`
}
