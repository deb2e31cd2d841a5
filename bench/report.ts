/** Markdown tables like sqlane's benchmark page, with the peers beside sqlane, and the targets. */
import { fmt } from "./lib/stats.js"
import type { Row, ScenarioId } from "./scenarios.js"
import { type SystemId, systemIds } from "./systems/types.js"

export interface Note {
  readonly scenario: ScenarioId
  readonly system: SystemId
  readonly text: string
}

const label: Record<SystemId, string> = {
  sqlane: "sqlane",
  "sqlane-delete-completed": "sqlane, `retention.completed` 0 (a completed job's row deleted by its end)",
  "skip-locked-1": "SKIP LOCKED, 1 per tx (hand-written)",
  "skip-locked-50": "SKIP LOCKED, 50 per fetch (hand-written)",
  "pg-boss-default": "pg-boss 12, defaults",
  "pg-boss-tuned": "pg-boss 12, tuned (a batch's jobs one after another)",
  "pg-boss-tuned-all": "pg-boss 12, tuned, a batch's jobs at once (`Promise.all`)",
  "graphile-worker": "graphile-worker 0.18",
  "bullmq-redis": "BullMQ 6 on Redis",
  "bullmq-pg": "BullMQ 6 on PostgreSQL",
  "effect-sql-persisted-queue": "Effect SqlPersistedQueue"
}

export const dbTitle: Record<string, string> = {
  "postgres-15": "PostgreSQL 15",
  "postgres-18": "PostgreSQL 18",
  "mariadb-10.11": "MariaDB 10.11"
}

export const get = (rows: ReadonlyArray<Row>, scenario: ScenarioId, system: SystemId, metric: string) =>
  rows.find((r) => r.scenario === scenario && r.system === system && r.metric === metric)?.value

const table = (head: ReadonlyArray<string>, body: ReadonlyArray<ReadonlyArray<string>>) =>
  [
    `| ${head.join(" | ")} |`,
    `|${head.map((_, i) => (i === 0 ? "---" : "---:")).join("|")}|`,
    ...body.map((r) => `| ${r.join(" | ")} |`)
  ].join("\n")

const systemsIn = (rows: ReadonlyArray<Row>, scenarios: ReadonlyArray<ScenarioId>, notes: ReadonlyArray<Note>) =>
  systemIds.filter((s) =>
    rows.some((r) => r.system === s && scenarios.includes(r.scenario)) ||
    notes.some((n) => n.system === s && scenarios.includes(n.scenario))
  )

const cell = (rows: ReadonlyArray<Row>, notes: ReadonlyArray<Note>, scenario: ScenarioId, system: SystemId, metric: string) => {
  const v = get(rows, scenario, system, metric)
  if (v !== undefined) {
    const capped = notes.some((n) => n.scenario === scenario && n.system === system && n.text.startsWith("capped"))
    return fmt(v) + (capped ? " (capped)" : "")
  }
  const n = notes.find((x) => x.scenario === scenario && x.system === system)
  return n?.text.startsWith("error") ? "error" : n?.text.startsWith("skipped") ? "skipped" : "—"
}

export const markdown = (
  db: string,
  rows: ReadonlyArray<Row>,
  notes: ReadonlyArray<Note>,
  o: { quick: boolean; n: { run: number; storage: number } }
): string => {
  const out: Array<string> = []
  const c = (s: ScenarioId, sys: SystemId, m: string) => cell(rows, notes, s, sys, m)
  out.push(`## ${dbTitle[db] ?? db} (--db ${db})${o.quick ? " — quick run" : ""}`)

  const probes: ReadonlyArray<ScenarioId> = ["probe-0", "probe-1", "probe-10", "probe-100", "probe-1000"]
  if (rows.some((r) => probes.includes(r.scenario) || r.scenario === "probe-union-all")) {
    out.push("", "Probe (sqlane), with 1000 job names and 100,000 completed jobs (ms):", "")
    out.push(table(["Names with pending jobs", "p50", "p95"], probes.filter((s) => get(rows, s, "sqlane", "p50_ms") !== undefined)
      .map((s) => [s.slice(6), c(s, "sqlane", "p50_ms"), c(s, "sqlane", "p95_ms")])))
    const u = get(rows, "probe-union-all", "sqlane", "p50_ms")
    if (u !== undefined) {
      out.push("", `One query per name instead (a UNION ALL of 1000), 10 names with pending jobs: p50 ${fmt(u)} ms, p95 ${
        fmt(get(rows, "probe-union-all", "sqlane", "p95_ms"))
      } ms.`)
    }
  }

  const lat: ReadonlyArray<ScenarioId> = ["latency-same-process", "latency-hint", "latency-other-process"]
  const latSystems = systemsIn(rows, lat, notes)
  if (latSystems.length > 0) {
    out.push("", "From the COMMIT of the enqueue to the start of the handler, one job at a time, 0–50 ms apart (ms):", "")
    out.push(table(
      ["System", "Same process p50", "p95", "max", "Other instance (hint) p50", "p95", "max", `Other process (${db.startsWith("postgres") ? "NOTIFY" : "polling 1 s; sqlane: insert check"}) p50`, "p95", "max"],
      latSystems.map((s) => [label[s], ...lat.flatMap((l) => [c(l, s, "p50_ms"), c(l, s, "p95_ms"), c(l, s, "max_ms")])])
    ))
  }

  const enq: ReadonlyArray<ScenarioId> = ["enqueue", "enqueue-many"]
  const enqSystems = systemsIn(rows, enq, notes)
  if (enqSystems.length > 0) {
    out.push("", "Enqueue, 8 producers (jobs/s):", "")
    out.push(table(["System", "a transaction each", "enqueueMany of 100"], enqSystems.map((s) => [label[s], c("enqueue", s, "jobs_per_s"), c("enqueue-many", s, "jobs_per_s")])))
  }

  const run: ReadonlyArray<ScenarioId> = ["run-c10", "run-c50", "burst-c50", "run-4-instances", "run-4-processes", "run-c50-limited"]
  const runSystems = systemsIn(rows, run, notes)
  if (runSystems.length > 0) {
    out.push("", `Run ${o.n.run.toLocaleString("en-US")} due jobs, empty handler, drained after ${db.startsWith("postgres") ? "ANALYZE and CHECKPOINT" : "ANALYZE TABLE"}; "c50, burst": drained right after the preload (jobs/s; CPU of the worker process per job):`, "")
    out.push(table(
      ["System", "1 process, c10", "1 process, c50", "c50, burst", "4 instances, c10", "4 processes, c10", "2 processes, c50, limit 40", "CPU µs/job (c50)"],
      runSystems.map((s) => [label[s], ...run.map((r) => c(r, s, "jobs_per_s")), c("run-c50", s, "cpu_us_per_job")])
    ))
  }

  const realSystems = systemsIn(rows, ["real-work"], notes)
  if (realSystems.length > 0) {
    out.push("", `Real work: ${o.n.run.toLocaleString("en-US")} jobs of 10 ms at concurrency 50:`, "")
    out.push(table(["System", "jobs/s", "share of the 5,000/s ceiling"], realSystems.map((s) => {
      const share = get(rows, "real-work", s, "ceiling_share")
      return [label[s], c("real-work", s, "jobs_per_s"), share === undefined ? "—" : `${Math.round(share * 100)}%`]
    })))
  }

  const fairSystems = systemsIn(rows, ["fair"], notes)
  if (fairSystems.length > 0) {
    out.push("", `Fair shares: 100 jobs of one key enqueued while one worker at c10 drains another key's ${o.quick ? "2,000" : "10,000"} (ms from the enqueue's commit to each job's start):`, "")
    out.push(table(
      ["System", "p50 ms", "p95 ms", "max ms", "the other key's jobs started meanwhile", "jobs/s before (one key)"],
      fairSystems.map((s) => [label[s], c("fair", s, "p50_ms"), c("fair", s, "p95_ms"), c("fair", s, "max_ms"), c("fair", s, "big_started_meanwhile"), c("fair", s, "jobs_per_s_before")])
    ))
  }

  const stoSystems = systemsIn(rows, ["storage"], notes)
  if (stoSystems.length > 0) {
    out.push("", `Storage, ${o.n.storage.toLocaleString("en-US")} waiting jobs (bytes per job, table + indexes; Redis: used_memory):`, "")
    out.push(table(["System", "bytes per job"], stoSystems.map((s) => [label[s], c("storage", s, "bytes_per_job")])))
  }
  const steadySystems = systemsIn(rows, ["steady"], notes)
  if (steadySystems.length > 0) {
    out.push("", `Steady: 1,000 jobs/s enqueued (enqueueMany of 10 every 10 ms) for ${o.quick ? "1 minute" : "10 minutes"}, one worker at c50, 5 ms handlers; the first and the last ${o.quick ? "10 s" : "minute"}, pickup from the enqueue's commit to the handler's start:`, "")
    out.push(table(
      ["System", "enqueued jobs/s", "jobs/s first", "jobs/s last", "p95 ms first", "p95 ms last", "table + indexes at the end", "dead tuples at the end"],
      steadySystems.map((s) => [
        label[s],
        c("steady", s, "producer_jobs_per_s"),
        c("steady", s, "jobs_per_s_first_minute"),
        c("steady", s, "jobs_per_s_last_minute"),
        c("steady", s, "p95_ms_first_minute"),
        c("steady", s, "p95_ms_last_minute"),
        c("steady", s, "table_bytes_end"),
        c("steady", s, "dead_tuples_end")
      ])
    ))
  }
  const crash = get(rows, "crash-recovery", "sqlane", "seconds")
  if (crash !== undefined) {
    const runs = notes.find((n) => n.scenario === "crash-recovery" && n.system === "sqlane")?.text ?? ""
    out.push(
      "",
      "Crash recovery, sqlane with defaults (SIGKILL of the worker 200 ms into a job → the job starting again in another worker):",
      "",
      table(["System", "seconds (median)", "runs"], [[label.sqlane, fmt(crash), runs.replace(/^runs: /, "")]])
    )
  }

  // Ratios: sqlane ÷ each peer.
  const peers = systemIds.filter((s) => !s.startsWith("sqlane") && rows.some((r) => r.system === s))
  const ratioRows: Array<[string, ScenarioId, string]> = [
    ["enqueue, a tx each (jobs/s)", "enqueue", "jobs_per_s"],
    ["enqueueMany of 100 (jobs/s)", "enqueue-many", "jobs_per_s"],
    ["run c10 (jobs/s)", "run-c10", "jobs_per_s"],
    ["run c50 (jobs/s)", "run-c50", "jobs_per_s"],
    ["run c50, burst: no ANALYZE (jobs/s)", "burst-c50", "jobs_per_s"],
    ["run 4 instances (jobs/s)", "run-4-instances", "jobs_per_s"],
    ["run 4 processes (jobs/s)", "run-4-processes", "jobs_per_s"],
    ["real work (jobs/s)", "real-work", "jobs_per_s"],
    ["latency same process p50 (ms, lower is better)", "latency-same-process", "p50_ms"],
    ["latency other instance p50 (ms, lower is better)", "latency-hint", "p50_ms"],
    ["latency other process p50 (ms, lower is better)", "latency-other-process", "p50_ms"],
    ["CPU per job, c50 (µs, lower is better)", "run-c50", "cpu_us_per_job"],
    ["storage (B/job, lower is better)", "storage", "bytes_per_job"]
  ]
  // Two decimals, or two significant digits below 0.1 (0.0034×, not 0.00×).
  const ratio = (r: number) => `${r >= 0.1 ? r.toFixed(2) : r.toPrecision(2)}×`
  const ratioBody = ratioRows
    .filter(([, s, m]) => get(rows, s, "sqlane", m) !== undefined)
    .map(([name, s, m]) => {
      const mine = get(rows, s, "sqlane", m)!
      return [name, ...peers.map((p) => {
        const theirs = get(rows, s, p, m)
        return theirs === undefined || theirs === 0 ? "—" : ratio(mine / theirs)
      })]
    })
  if (ratioBody.length > 0 && peers.length > 0) {
    out.push("", "sqlane ÷ peer, same run (above 1 is better for jobs/s; below 1 is better for ms, µs and bytes):", "")
    out.push(table(["Scenario", ...peers], ratioBody))
  }

  const t = targets(db, rows)
  if (t.length > 0) {
    out.push("", "Targets, this run:", "")
    out.push(table(["Target", "measured", "met"], t.map((x) => [x.target, x.measured, x.met === undefined ? "—" : x.met ? "yes" : "**no**"])))
  }
  const shown = notes.filter((n) => n.scenario !== "crash-recovery" && !n.text.startsWith("skipped"))
  const skipped = Array.from(new Set(notes.filter((n) => n.text.startsWith("skipped")).map((n) => n.text)))
  if (shown.length + skipped.length > 0) {
    out.push("", "Notes:", "", ...shown.map((n) => `- ${n.scenario}, ${n.system}: ${n.text}`), ...skipped.map((t) => `- "skipped": ${t}`))
  }
  return out.join("\n")
}

export interface TargetCheck {
  readonly target: string
  readonly measured: string
  readonly met: boolean | undefined
}

export const targets = (db: string, rows: ReadonlyArray<Row>): Array<TargetCheck> => {
  const g = (s: ScenarioId, sys: SystemId, m: string) => get(rows, s, sys, m)
  const out: Array<TargetCheck> = []
  // sqlane ÷ peer against `need`: "≥" and ">" for jobs/s, "≤" for ms and µs.
  const ratio = (name: string, s: ScenarioId, m: string, op: "≥" | ">" | "≤", need: number, peer: SystemId, unit = "") => {
    const a = g(s, "sqlane", m)
    const b = g(s, peer, m)
    if (a === undefined || b === undefined) return
    const r = a / b
    out.push({
      target: `${name} ${op} ${need === 1 ? "" : `${need} × `}${peer}`,
      measured: `${fmt(a)} vs ${fmt(b)}${unit && ` ${unit}`} = ${r.toFixed(2)}×`,
      met: op === "≥" ? r >= need : op === ">" ? r > need : r <= need
    })
  }
  const share = (need: number) => {
    const a = g("real-work", "sqlane", "ceiling_share")
    if (a === undefined) return
    out.push({ target: `real work ceiling_share ≥ ${need.toFixed(2)}`, measured: a.toFixed(2), met: a >= need })
  }
  const limited = g("run-c50-limited", "sqlane", "jobs_per_s")
  const unlimited = g("run-c50", "sqlane", "jobs_per_s")
  if (limited !== undefined && unlimited !== undefined) {
    out.push({
      target: "run c50 under a limit of 40 (2 processes) ≥ 0.90× the unlimited run c50",
      measured: `${(limited / unlimited).toFixed(2)}×`,
      met: limited / unlimited >= 0.9
    })
  }
  const fair = g("fair", "sqlane", "p95_ms")
  if (fair !== undefined) out.push({ target: "fair: a small key's jobs behind a backlog, p95 to start ≤ 50 ms at c10", measured: `${fmt(fair)} ms`, met: fair <= 50 })
  if (db.startsWith("postgres")) {
    share(0.9)
    ratio("real work", "real-work", "jobs_per_s", "≥", 1.15, "pg-boss-tuned")
    ratio("real work", "real-work", "jobs_per_s", "≥", 1, "bullmq-redis")
    ratio("run c10", "run-c10", "jobs_per_s", "≥", 1, "pg-boss-tuned")
    ratio("run c50", "run-c50", "jobs_per_s", "≥", 1.5, "pg-boss-tuned")
    ratio("run c50", "run-c50", "jobs_per_s", "≥", 1, "bullmq-redis")
    ratio("run 4 processes", "run-4-processes", "jobs_per_s", "≥", 1.3, "pg-boss-tuned")
    ratio("run c50", "run-c50", "jobs_per_s", "≥", 0.5, "skip-locked-50")
    const a = g("latency-same-process", "sqlane", "p50_ms")
    if (a !== undefined) out.push({ target: "latency p50, same process ≤ 2 ms", measured: `${fmt(a)} ms`, met: a <= 2 })
    ratio("latency p50, other process (NOTIFY)", "latency-other-process", "p50_ms", "≤", 1.1, "skip-locked-50", "ms")
    ratio("CPU per job (c50)", "run-c50", "cpu_us_per_job", "≤", 1, "pg-boss-tuned", "µs")
  } else {
    share(0.85)
    ratio("run c50", "run-c50", "jobs_per_s", "≥", 1, "skip-locked-50")
    ratio("enqueue, a tx each", "enqueue", "jobs_per_s", "≥", 0.8, "skip-locked-1")
    ratio("enqueue, a tx each", "enqueue", "jobs_per_s", ">", 1, "effect-sql-persisted-queue")
    ratio("enqueueMany", "enqueue-many", "jobs_per_s", "≥", 0.7, "skip-locked-1")
  }
  return out
}
