/**
 * One job: its state and timeline (created, run at, started, finished), payload and result as
 * pretty-printed JSON, progress, trace id, every attempt's error with its stack; retry, cancel and
 * delete.
 */
import { html } from "htm/preact"
import { api, ApiError, type JobDetail } from "../api"
import { ago, prettyJson, time } from "../format"
import { useLive } from "../live"
import { ConfirmButton, Failure, Loading, State, useRun } from "../parts"
import { go, href } from "../route"

const verb = { retry: "retried", cancel: "cancelled", delete: "deleted" } as const

const JobActions = ({ detail, refresh }: { detail: JobDetail; refresh: () => void }) => {
  const { busy, run, canAct } = useRun()
  if (!canAct) return null
  const { id, state } = detail.job
  const act = (action: "retry" | "cancel" | "delete") =>
    run(async () => {
      const outcome = await api.jobAction(id, action)
      if (action === "delete" && outcome.changed) go("/jobs", { name: detail.job.name })
      return outcome.changed ? `Job ${id} ${verb[action]} (was ${outcome.state})` : `Job ${id} not ${verb[action]}: it is ${outcome.state ?? "gone"}`
    }, refresh)
  return html`<div class="actions">
    <button type="button" data-action="retry" disabled=${busy || (state !== "dead" && state !== "cancelled")} onClick=${() => act("retry")}>Retry</button>
    <button type="button" data-action="cancel" disabled=${busy || (state !== "pending" && state !== "running")} onClick=${() => act("cancel")}>Cancel</button>
    <${ConfirmButton} label="Delete" action="delete" question=${`Delete job ${id}?`} disabled=${busy || state === "running"} onConfirm=${() => act("delete")} />
  </div>`
}

export const JobView = ({ id }: { id: string }) => {
  const live = useLive(() => api.job(id), [id])
  if (live.data === undefined) {
    if (live.error instanceof ApiError && live.error.status === 404) {
      return html`<section data-view="job"><h1>Job <bdi>${id}</bdi></h1><p class="empty">No such job (it may have been deleted).</p></section>`
    }
    return html`<section data-view="job"><h1>Job <bdi>${id}</bdi></h1>${live.error === undefined ? html`<${Loading} />` : html`<${Failure} error=${live.error} />`}</section>`
  }
  const d = live.data
  const j = d.job
  return html`<section data-view="job">
    <h1>Job ${j.id} <${State} state=${j.state} /></h1>
    <${Failure} error=${live.error} />
    <${JobActions} detail=${d} refresh=${live.refresh} />
    <dl class="facts">
      <dt>name</dt><dd class="name"><a href=${href("/jobs", { name: j.name })}>${j.name}</a></dd>
      <dt>attempts</dt><dd>${j.attempts}</dd>
      <dt>priority</dt><dd>${j.priority}</dd>
      <dt>worker</dt><dd>${j.workerId ?? "—"}</dd>
      <dt>trace id</dt><dd class="mono">${d.traceId ?? "—"}</dd>
      <dt>progress</dt><dd data-testid="progress">${d.progress === null ? "—" : html`${d.progress.value >= 0 && d.progress.value <= 100 ? html`<progress max="100" value=${d.progress.value}></progress> ` : null}
        ${String(d.progress.value)}${d.progress.message === null ? "" : html` — <bdi>${d.progress.message}</bdi>`} (attempt ${d.progress.attempt}, ${ago(d.progress.at)})`}</dd>
    </dl>
    <h2>Timeline</h2>
    <ol class="timeline">
      ${[["created", j.createdAt], ["run at", j.runAt], ["started", j.claimedAt], ["finished", j.finishedAt]].map(([label, at]) =>
        html`<li class=${at === null ? "pending" : ""}><span class="label">${label}</span> <span>${time(at)}</span> <span class="note">${ago(at)}</span></li>`)}
    </ol>
    <h2>Payload</h2>
    <pre class="json" data-testid="payload">${prettyJson(d.payload)}</pre>
    <h2>Result</h2>
    <pre class="json" data-testid="result">${d.result === null ? "—" : prettyJson(d.result)}</pre>
    <h2>Errors</h2>
    ${d.errors.length === 0 ? html`<p class="empty">No errors.</p>` : html`<ol class="errors">${d.errors.map((e) => html`<li>
      <div><strong>attempt ${e.attempt}</strong> · ${e.kind}${e.tag === null ? "" : html` · <bdi>${e.tag}</bdi>`} · ${time(e.at)}</div>
      <div class="error-text" data-testid="error-message">${e.message}</div>
      ${e.stack === null ? null : html`<pre class="stack">${e.stack}</pre>`}
    </li>`)}</ol>`}
  </section>`
}
