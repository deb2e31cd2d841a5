/**
 * The sqlane dashboard's page: Preact components written with htm (tagged templates, no JSX
 * compile step). Every text from the queue (names, payloads, errors) is rendered as a text node:
 * nothing is ever inserted as markup.
 */
import "uplot/dist/uPlot.min.css"
import "./style.css"
import { html } from "htm/preact"
import { render } from "preact"
import { useEffect, useState } from "preact/hooks"
import { ApiError, getSession, type Session } from "./api"
import { errorText } from "./format"
import { ActionsContext } from "./parts"
import { useRoute } from "./route"
import { DeadLettersView } from "./views/deadLetters"
import { JobView } from "./views/job"
import { JobsView } from "./views/jobs"
import { OverviewView } from "./views/overview"
import { PeriodicView } from "./views/periodic"
import { WorkersView } from "./views/workers"

const tabs = [
  { path: "/", label: "Overview" },
  { path: "/jobs", label: "Jobs" },
  { path: "/dead-letters", label: "Dead letters" },
  { path: "/periodic", label: "Periodic jobs" },
  { path: "/workers", label: "Workers" }
] as const

const View = ({ path, params }: { path: string; params: URLSearchParams }) => {
  const job = /^\/jobs\/([^/]+)$/.exec(path)
  if (job !== null) return html`<${JobView} id=${decodeURIComponent(job[1])} />`
  switch (path) {
    case "/":
      return html`<${OverviewView} params=${params} />`
    case "/jobs":
      return html`<${JobsView} params=${params} />`
    case "/dead-letters":
      return html`<${DeadLettersView} params=${params} />`
    case "/periodic":
      return html`<${PeriodicView} />`
    case "/workers":
      return html`<${WorkersView} />`
    default:
      return html`<p class="empty">No such page. <a href="#/">Overview</a></p>`
  }
}

const App = () => {
  const route = useRoute()
  const [session, setSession] = useState<Session | undefined>()
  const [sessionError, setSessionError] = useState<unknown>()
  const [status, setStatus] = useState<{ message: string; failed: boolean; at: number } | undefined>()
  useEffect(() => {
    getSession().then(setSession, setSessionError)
  }, [])
  if (sessionError !== undefined) {
    const denied = sessionError instanceof ApiError && sessionError.status === 403
    return html`<main><h1>sqlane</h1><p class="error" role="alert">${
      denied ? "Access denied." : `Could not reach the dashboard: ${errorText(sessionError)}`
    }</p></main>`
  }
  if (session === undefined) return html`<main><p class="empty">Loading…</p></main>`
  const report = (message: string, failed = false) => setStatus({ message, failed, at: Date.now() })
  const active = route.path.startsWith("/jobs/") ? "/jobs" : route.path
  return html`<${ActionsContext.Provider} value=${{ access: session.access, report }}>
    <header>
      <span class="brand">sqlane</span>
      <nav>${tabs.map((t) => html`<a href=${`#${t.path}`} class=${active === t.path ? "active" : ""}>${t.label}</a>`)}</nav>
      ${session.access === "read-only" ? html`<span class="badge" data-testid="read-only">read-only</span>` : null}
    </header>
    ${status === undefined ? null : html`<div class=${status.failed ? "status failed" : "status"} role="status" key=${status.at}>
      ${status.message}<button type="button" class="link" onClick=${() => setStatus(undefined)} aria-label="Dismiss">×</button>
    </div>`}
    <main><${View} path=${route.path} params=${route.params} /></main>
  <//>`
}

const root = document.getElementById("app")!
root.textContent = "" // the "Loading…" of index.html
render(html`<${App} />`, root)
