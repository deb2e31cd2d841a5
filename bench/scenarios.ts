/**
 * The scenarios. Each runs every selected system that can do it, one after another, in this
 * process, on the same database, and records rows { scenario, system, db, metric, value, unit }.
 */
import { dropCrashTables, measureCrashRecovery } from "./crash/recovery.js"
import { whileRunning } from "./lib/cleanup.js"
import { type ChildProcess, fork } from "node:child_process"
import { fileURLToPath } from "node:url"
import { admin, type Target } from "./lib/targets.js"
import { settle } from "./lib/settle.js"
import { warmUpOnce } from "./lib/warmup.js"
import { nowMs, percentile, sleep } from "./lib/stats.js"
import { fairGroup } from "./fair.js"
import { steadyGroup } from "./steady.js"
import { probe as sqlaneProbe, runtime as sqlaneRuntime } from "./systems/sqlane.js"
import { type Env, type Instance, payload, type Payload, type System, type SystemId } from "./systems/types.js"

export type ScenarioId =
  | "probe-0"
  | "probe-1"
  | "probe-10"
  | "probe-100"
  | "probe-1000"
  | "probe-union-all"
  | "latency-same-process"
  | "latency-hint"
  | "latency-other-process"
  | "enqueue"
  | "enqueue-many"
  | "run-c10"
  | "run-c50"
  | "burst-c50"
  | "run-4-instances"
  | "run-4-processes"
  | "run-c50-limited"
  | "real-work"
  | "crash-recovery"
  | "storage"
  | "steady"
  | "fair"

export interface Row {
  readonly scenario: ScenarioId
  readonly system: SystemId
  readonly db: string
  readonly metric: string
  readonly value: number
  readonly unit: string
}

export interface Ctx {
  readonly target: Target
  readonly quick: boolean
  readonly systems: ReadonlyArray<System>
  readonly record: (scenario: ScenarioId, system: SystemId, metric: string, value: number, unit: string) => void
  /** A remark shown under the tables (errors, capped runs). */
  readonly note: (scenario: ScenarioId, system: SystemId, text: string) => void
}

/** A group of scenarios that share their setup. */
export interface Group {
  readonly name: string
  readonly scenarios: ReadonlyArray<ScenarioId>
  readonly run: (ctx: Ctx, selected: ReadonlySet<ScenarioId>) => Promise<void>
}

let counter = 0
const newEnv = (ctx: Ctx, tag: string): Env => ({
  target: { db: ctx.target.db, dialect: ctx.target.dialect, url: ctx.target.url, redis: ctx.target.redis },
  ns: `b${process.pid.toString(36)}${(counter++).toString(36)}_${tag}`.toLowerCase().replace(/[^a-z0-9_]/g, "_")
})

const short = (id: SystemId) =>
  ({
    sqlane: "sq",
    "sqlane-delete-completed": "sqd",
    "skip-locked-1": "sl1",
    "skip-locked-50": "sl50",
    "pg-boss-default": "pbd",
    "pg-boss-tuned": "pbt",
    "pg-boss-tuned-all": "pbta",
    "graphile-worker": "gw",
    "bullmq-redis": "bmr",
    "bullmq-pg": "bmp",
    "effect-sql-persisted-queue": "epq"
  })[id]

/** The scenarios that preload jobs and time how fast workers drain them. */
const isDrain = (scenario: ScenarioId) => scenario.startsWith("run-") || scenario === "burst-c50" || scenario === "real-work"

/**
 * --quick keeps a full run on one database within about 3.5 minutes on a 2-core machine: scenarios that
 * start OS processes run only sqlane and the peers its targets name, and pg-boss with defaults
 * (2 s polls, about 5 jobs/s) is left out of the drains, where it would only hit the cap.
 */
const quickCore: ReadonlySet<SystemId> = new Set(["sqlane", "skip-locked-1", "skip-locked-50", "pg-boss-tuned", "effect-sql-persisted-queue"])
const quickSkip = (scenario: ScenarioId, system: SystemId): string | undefined => {
  if ((scenario === "run-4-processes" || scenario === "latency-other-process") && !quickCore.has(system)) {
    return "OS-process scenarios run only sqlane and the targets' peers"
  }
  if (system === "pg-boss-default" && isDrain(scenario)) {
    return "it polls every 2 s and only hits the cap"
  }
  return undefined
}

/** Runs `f` on a fresh namespace of `system`, dropping it afterwards; a failure becomes a note. */
export const each = async (
  ctx: Ctx,
  scenario: ScenarioId,
  f: (system: System, env: Env) => Promise<void>,
  filter: (s: System) => boolean = () => true
) => {
  const s0 = nowMs()
  for (const system of ctx.systems.filter(filter)) {
    // sqlane with retention.completed 0 differs from sqlane only in how a completed job ends.
    if (system.id === "sqlane-delete-completed" && !isDrain(scenario)) continue
    const skip = ctx.quick ? quickSkip(scenario, system.id) : undefined
    if (skip !== undefined) {
      ctx.note(scenario, system.id, `skipped in --quick (${skip})`)
      continue
    }
    const env = newEnv(ctx, short(system.id))
    const t0 = nowMs()
    try {
      // Dropped afterwards, and on an interrupt (see lib/cleanup.ts).
      await whileRunning(() => system.drop(env), () => system.prepare(env), () => f(system, env))
    } catch (e) {
      const message = e instanceof Error ? e.message : String(e)
      ctx.note(scenario, system.id, `error: ${message.split("\n")[0].slice(0, 200)}`)
      process.stderr.write(`[bench] ${scenario} ${system.id}: ${message}\n`)
    } finally {
      if (process.env.BENCH_VERBOSE) process.stderr.write(`[bench]   ${scenario} ${system.id}: ${((nowMs() - t0) / 1000).toFixed(1)} s\n`)
    }
  }
  process.stderr.write(`[bench] ${ctx.target.db} ${scenario}${scenario === "probe-10" ? " (all probe-*)" : ""}: ${((nowMs() - s0) / 1000).toFixed(1)} s\n`)
}

/** Counts finished handlers; `reached(n)` resolves once `n` have finished. */
class Counter {
  n = 0
  private target = Infinity
  private resolve: (() => void) | undefined
  inc(k = 1) {
    this.n += k
    if (this.n >= this.target && this.resolve) {
      const r = this.resolve
      this.resolve = undefined
      r()
    }
  }
  set(n: number) {
    this.inc(n - this.n)
  }
  reached(n: number, timeoutMs: number): Promise<boolean> {
    if (this.n >= n) return Promise.resolve(true)
    this.target = n
    return new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => {
        this.resolve = undefined
        resolve(false)
      }, timeoutMs)
      this.resolve = () => {
        clearTimeout(timer)
        resolve(true)
      }
    })
  }
}

// ---------------------------------------------------------------------------------------------
// Child processes

const childPath = fileURLToPath(new URL("./child.ts", import.meta.url))

interface Child {
  readonly process: ChildProcess
  readonly next: (t: string, timeoutMs?: number) => Promise<any>
  readonly onMessage: (f: (m: any) => void) => void
  readonly stop: () => Promise<void>
}

const spawnChild = (config: {
  system: SystemId
  env: Env
  mode: "latency" | "count"
  concurrency: number
  workMs: number
  pool?: number
  pollMs?: number
  /** The warm-up's concurrency limit of the job name (`lib/warmup.ts`), as the measurement's. */
  warmLimit?: number | undefined
}): Child => {
  const child = fork(childPath, [JSON.stringify(config)], {
    execArgv: ["--import", "tsx", ...(process.env.BENCH_CHILD_PROF ? ["--cpu-prof", `--cpu-prof-dir=${process.env.BENCH_CHILD_PROF}`] : [])],
    stdio: ["ignore", "inherit", "inherit", "ipc"]
  })
  const listeners: Array<(m: any) => void> = []
  const waiting = new Map<string, Array<(m: any) => void>>()
  child.on("message", (m: any) => {
    const w = waiting.get(m?.t)
    if (w && w.length > 0) w.shift()!(m)
    for (const l of listeners) l(m)
  })
  const exited = new Promise<void>((resolve) => child.on("exit", () => resolve()))
  return {
    process: child,
    next: (t, timeoutMs = 60_000) =>
      new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`child ${config.system}: no "${t}" in ${timeoutMs} ms`)), timeoutMs)
        const list = waiting.get(t) ?? []
        list.push((m) => {
          clearTimeout(timer)
          resolve(m)
        })
        waiting.set(t, list)
        exited.then(() => reject(new Error(`child ${config.system} exited before "${t}"`)))
      }),
    onMessage: (f) => void listeners.push(f),
    stop: async () => {
      if (child.exitCode !== null) return
      child.send({ t: "stop" })
      const killed = sleep(10_000).then(() => child.kill("SIGKILL"))
      await Promise.race([exited, killed])
    }
  }
}

// ---------------------------------------------------------------------------------------------
// probe (sqlane only): 1,000 names with 100 completed jobs each; 10 pending jobs in k names.

const NAMES = 1000
const names = Array.from({ length: NAMES }, (_, i) => `n${String(i).padStart(4, "0")}`)

const probeGroup: Group = {
  name: "probe",
  scenarios: ["probe-0", "probe-1", "probe-10", "probe-100", "probe-1000", "probe-union-all"],
  run: async (ctx, selected) => {
    if (!ctx.systems.some((s) => s.id === "sqlane")) return
    const samples = ctx.quick ? 40 : 200
    const unionSamples = ctx.quick ? 5 : 20
    await each(ctx, "probe-10", async (_system, env) => {
      const a = admin(env.target)
      const jobs = `${env.ns}_jobs`
      const rt = sqlaneRuntime(env, { pool: 2 })
      try {
        // 100,000 completed jobs: 100 for each of the 1,000 names.
        if (env.target.dialect === "pg") {
          await a.query(`INSERT INTO ${jobs} (name, state, payload, priority, run_at, attempts, created_at, finished_at)
            SELECT 'n' || lpad((g % ${NAMES})::text, 4, '0'), 'completed', '{}', 0, now() - interval '1 hour', 1,
                   now() - interval '1 hour', now()
            FROM generate_series(0, ${NAMES * 100 - 1}) AS g`)
        } else {
          await a.query(`INSERT INTO ${jobs} (name, state, payload, priority, run_at, attempts, created_at, finished_at)
            SELECT CONCAT('n', LPAD(seq % ${NAMES}, 4, '0')), 'completed', '{}', 0,
                   UTC_TIMESTAMP(6) - INTERVAL 1 HOUR, 1, UTC_TIMESTAMP(6) - INTERVAL 1 HOUR, UTC_TIMESTAMP(6)
            FROM seq_0_to_${NAMES * 100 - 1}`)
        }
        for (const k of [0, 1, 10, 100, 1000] as const) {
          const scenario = `probe-${k}` as ScenarioId
          if (!selected.has(scenario) && !(k === 10 && selected.has("probe-union-all"))) continue
          await a.query(`DELETE FROM ${jobs} WHERE state = 'pending'`)
          if (k > 0) {
            if (env.target.dialect === "pg") {
              await a.query(`INSERT INTO ${jobs} (name, state, payload, priority, run_at, created_at)
                SELECT 'n' || lpad(n::text, 4, '0'), 'pending', '{}', 0, now() - interval '1 second', now()
                FROM generate_series(0, ${k - 1}) AS n, generate_series(1, 10) AS r`)
            } else {
              await a.query(`INSERT INTO ${jobs} (name, state, payload, priority, run_at, created_at)
                SELECT CONCAT('n', LPAD(n.seq, 4, '0')), 'pending', '{}', 0,
                       UTC_TIMESTAMP(6) - INTERVAL 1 SECOND, UTC_TIMESTAMP(6)
                FROM seq_0_to_${k - 1} AS n, seq_1_to_10 AS r`)
            }
          }
          await settle(env)
          if (selected.has(scenario)) {
            for (let i = 0; i < 10; i++) await sqlaneProbe(rt, names)
            const ms: Array<number> = []
            for (let i = 0; i < samples; i++) ms.push(await sqlaneProbe(rt, names))
            ctx.record(scenario, "sqlane", "p50_ms", percentile(ms, 50), "ms")
            ctx.record(scenario, "sqlane", "p95_ms", percentile(ms, 95), "ms")
          }
          if (k === 10 && selected.has("probe-union-all")) {
            const q = names
              .map((n) => `(SELECT '${n}' AS name, MIN(run_at) AS next FROM ${jobs} WHERE state = 'pending' AND name = '${n}')`)
              .join(" UNION ALL ")
            await a.query(q)
            const ms: Array<number> = []
            for (let i = 0; i < unionSamples; i++) {
              const t0 = performance.now()
              await a.query(q)
              ms.push(performance.now() - t0)
            }
            ctx.record("probe-union-all", "sqlane", "p50_ms", percentile(ms, 50), "ms")
            ctx.record("probe-union-all", "sqlane", "p95_ms", percentile(ms, 95), "ms")
          }
        }
      } finally {
        await rt.dispose()
        await a.close()
      }
    }, (s) => s.id === "sqlane")
  }
}

// ---------------------------------------------------------------------------------------------
// latency: COMMIT (the enqueue call returned) → handler start, one job at a time, 0–50 ms apart.

const latencyGroup: Group = {
  name: "latency",
  scenarios: ["latency-same-process", "latency-hint", "latency-other-process"],
  run: async (ctx, selected) => {
    const jobs = ctx.quick ? 20 : 100
    const concurrency = 10
    // Without LISTEN/NOTIFY (MariaDB) another process learns of a job by polling: every system
    // that can be told polls every second there (SqlPersistedQueue's default).
    const pollMs = ctx.target.dialect === "mysql" ? 1000 : undefined
    for (const scenario of latencyGroup.scenarios) {
      if (!selected.has(scenario)) continue
      await each(ctx, scenario, async (system, env) => {
        const starts = new Map<number, number>()
        const commits = new Map<number, number>()
        const onStart = (i: number, at: number) => {
          if (!starts.has(i)) starts.set(i, at)
        }
        const producer = await system.open(env, { pool: 4, ...(pollMs ? { pollMs } : {}) })
        let worker: Instance | undefined
        let stopWorker: (() => Promise<void>) | undefined
        let child: Child | undefined
        try {
          const handle = (p: Payload) => onStart(p.i, nowMs())
          if (scenario === "latency-same-process") {
            stopWorker = await producer.work({ concurrency, handle })
          } else if (scenario === "latency-hint") {
            worker = await system.open(env, { concurrency, ...(pollMs ? { pollMs } : {}) })
            stopWorker = await worker.work({ concurrency, handle })
          } else {
            child = spawnChild({ system: system.id, env, mode: "latency", concurrency, workMs: 0, ...(pollMs ? { pollMs } : {}) })
            child.onMessage((m) => {
              if (m?.t === "start") onStart(m.i, m.at)
            })
            await child.next("opened")
            child.process.send({ t: "go" })
            await child.next("ready")
          }
          // Warm-up: jobs waited for one by one, so connections and LISTEN are up.
          for (let w = 1; w <= (ctx.quick ? 1 : 3); w++) {
            await producer.enqueue(payload(-w))
            const end = nowMs() + 6000
            while (!starts.has(-w) && nowMs() < end) await sleep(2)
          }
          await sleep(100)
          for (let i = 0; i < jobs; i++) {
            await sleep(Math.random() * 50)
            await producer.enqueue(payload(i))
            commits.set(i, nowMs())
          }
          const end = nowMs() + 15_000
          while (nowMs() < end && Array.from(commits.keys()).some((i) => !starts.has(i))) await sleep(5)
          const ms = Array.from(commits, ([i, c]) => (starts.has(i) ? starts.get(i)! - c : Infinity))
          const missing = ms.filter((x) => x === Infinity).length
          if (missing > 0) ctx.note(scenario, system.id, `${missing} of ${jobs} jobs had not started 15 s after the last enqueue`)
          ctx.record(scenario, system.id, "p50_ms", percentile(ms, 50), "ms")
          ctx.record(scenario, system.id, "p95_ms", percentile(ms, 95), "ms")
          ctx.record(scenario, system.id, "max_ms", Math.max(...ms), "ms")
        } finally {
          await stopWorker?.().catch(() => {})
          await child?.stop()
          await worker?.close().catch(() => {})
          await producer.close().catch(() => {})
        }
      })
    }
  }
}

// ---------------------------------------------------------------------------------------------
// enqueue: 8 producers, a transaction each / enqueueMany of 100.

const PRODUCERS = 8

const enqueueGroup: Group = {
  name: "enqueue",
  scenarios: ["enqueue", "enqueue-many"],
  run: async (ctx, selected) => {
    for (const scenario of enqueueGroup.scenarios) {
      if (!selected.has(scenario)) continue
      const many = scenario === "enqueue-many"
      const perProducer = many ? (ctx.quick ? 10 : 50) : (ctx.quick ? 60 : 500)
      await each(ctx, scenario, async (system, env) => {
        const inst = await system.open(env, { pool: PRODUCERS + 2 })
        try {
          const batch = (p: number, k: number) => Array.from({ length: 100 }, (_, j) => payload(p * 1e6 + k * 100 + j))
          // Warm-up: every producer once.
          await Promise.all(
            Array.from({ length: PRODUCERS }, (_, p) => (many ? inst.enqueueMany(batch(p, -1)) : inst.enqueue(payload(-p - 1))))
          )
          const t0 = nowMs()
          await Promise.all(
            Array.from({ length: PRODUCERS }, async (_, p) => {
              for (let k = 0; k < perProducer; k++) {
                if (many) await inst.enqueueMany(batch(p, k))
                else await inst.enqueue(payload(p * 1e6 + k))
              }
            })
          )
          const seconds = (nowMs() - t0) / 1000
          const total = PRODUCERS * perProducer * (many ? 100 : 1)
          ctx.record(scenario, system.id, "jobs_per_s", total / seconds, "jobs/s")
        } finally {
          await inst.close().catch(() => {})
        }
      })
    }
  }
}

// ---------------------------------------------------------------------------------------------
// run: N due jobs drained by workers; real-work: the same with a 10 ms handler at concurrency 50.
// After the preload every drain settles the tables (ANALYZE, CHECKPOINT: lib/settle.ts) as a server
// with autovacuum would have, and asks the system to check its claim's plan; burst-c50 is run c50
// drained right after the preload, without statistics.

const fill = async (inst: Instance, n: number) => {
  for (let i = 0; i < n; i += 1000) {
    await inst.enqueueMany(Array.from({ length: Math.min(1000, n - i) }, (_, j) => payload(i + j)))
  }
}

/** `BENCH_DRAIN_JOBS`, when it is a positive integer. */
const drainJobs = (): number | undefined => {
  const n = Number(process.env.BENCH_DRAIN_JOBS)
  return Number.isInteger(n) && n > 0 ? n : undefined
}

const runGroup: Group = {
  name: "run",
  scenarios: ["run-c10", "run-c50", "burst-c50", "run-4-instances", "run-4-processes", "run-c50-limited", "real-work"],
  run: async (ctx, selected) => {
    // Diagnostic: BENCH_DRAIN_JOBS=N drains N jobs instead (a longer drain, for what a short one hides).
    const n = drainJobs() ?? (ctx.quick ? 2000 : 20_000)
    const capMs = ctx.quick ? 3_000 : 30_000
    for (const scenario of runGroup.scenarios) {
      if (!selected.has(scenario)) continue
      const concurrency =
        scenario === "run-c50" || scenario === "burst-c50" || scenario === "real-work" || scenario === "run-c50-limited" ? 50 : 10
      const workMs = scenario === "real-work" ? 10 : 0
      // run-c50-limited: 2 processes at c50 under a limit of 40 attempts of the name at once, in all.
      const processes = scenario === "run-4-processes" ? 4 : scenario === "run-c50-limited" ? 2 : 0
      const instances = scenario === "run-4-instances" ? 4 : Math.max(1, processes)
      await each(ctx, scenario, async (system, env) => {
        // Workers in this process: warm first, as the child processes are (lib/warmup.ts).
        if (processes === 0) await warmUpOnce(system, env, concurrency)
        const producer = await system.open(env, { pool: 10, concurrency })
        const extra: Array<Instance> = []
        const stops: Array<() => Promise<void>> = []
        const children: Array<Child> = []
        const counter = new Counter()
        const limit = scenario === "run-c50-limited" && process.env.BENCH_NO_LIMIT !== "1" ? 40 : undefined
        try {
          // Worker processes first: they warm up (under the scenario's limit) before the preload and
          // its settling, so that neither their warm-up's writes nor their start fall in between.
          const counts = new Array<number>(instances).fill(0)
          for (let k = 0; k < processes; k++) {
            const child = spawnChild({ system: system.id, env, mode: "count", concurrency, workMs, warmLimit: limit })
            child.onMessage((m) => {
              if (m?.t === "count") {
                counts[k] = m.n
                counter.set(counts.reduce((a, b) => a + b, 0))
              }
            })
            children.push(child)
          }
          await Promise.all(children.map((c) => c.next("opened", 120_000)))
          await fill(producer, n)
          if (scenario !== "burst-c50") await settle(env)
          await system.checkPlan?.(env)
          if (limit !== undefined) await producer.limitRunning!(limit)
          const handle = workMs > 0
            ? () => new Promise<void>((r) => setTimeout(() => {
              counter.inc()
              r()
            }, workMs))
            : () => {
              counter.inc()
            }
          let t0: number
          let cpu0: NodeJS.CpuUsage
          if (processes > 0) {
            t0 = nowMs()
            cpu0 = process.cpuUsage()
            for (const c of children) c.process.send({ t: "go" })
          } else {
            for (let k = 1; k < instances; k++) extra.push(await system.open(env, { pool: 10, concurrency }))
            t0 = nowMs()
            cpu0 = process.cpuUsage()
            for (const inst of [producer, ...extra]) stops.push(await inst.work({ concurrency, handle }))
          }
          const finished = await counter.reached(n, capMs)
          const elapsed = nowMs() - t0
          const cpu = process.cpuUsage(cpu0)
          const done = Math.min(counter.n, n)
          if (!finished) ctx.note(scenario, system.id, `capped: ${done} of ${n} jobs in ${capMs / 1000} s`)
          ctx.record(scenario, system.id, "jobs_per_s", done / (elapsed / 1000), "jobs/s")
          ctx.record(scenario, system.id, "seconds", elapsed / 1000, "s")
          if ((scenario === "run-c50" || scenario === "burst-c50") && done > 0) {
            ctx.record(scenario, system.id, "cpu_us_per_job", (cpu.user + cpu.system) / done, "µs")
          }
          if (scenario === "real-work") ctx.record(scenario, system.id, "ceiling_share", done / (elapsed / 1000) / 5000, "ratio")
        } finally {
          if (scenario === "run-c50-limited") await producer.limitRunning!(undefined).catch(() => {})
          for (const s of stops) await s().catch(() => {})
          await Promise.all(children.map((c) => c.stop()))
          for (const inst of extra) await inst.close().catch(() => {})
          await producer.close().catch(() => {})
        }
      }, (s) => scenario !== "run-c50-limited" || s.id === "sqlane")
    }
  }
}

// ---------------------------------------------------------------------------------------------
// storage: bytes per waiting job.

const storageGroup: Group = {
  name: "storage",
  scenarios: ["storage"],
  run: async (ctx) => {
    const n = ctx.quick ? 10_000 : 100_000
    await each(ctx, "storage", async (system, env) => {
      const inst = await system.open(env, { pool: 4 })
      try {
        const before = await system.bytes(env)
        await fill(inst, n)
        await settle(env)
        const after = await system.bytes(env)
        ctx.record("storage", system.id, "bytes_per_job", (after - before) / n, "B")
      } finally {
        await inst.close().catch(() => {})
      }
    })
  }
}

const crashGroup: Group = {
  name: "crash-recovery",
  scenarios: ["crash-recovery"],
  run: async (ctx) => {
    // sqlane with defaults; median of 3 (1 with --quick). The peers are not measured: each takes a
    // killed worker's job back when its lease or lock expires, 60 s or more with its defaults.
    if (!ctx.systems.some((s) => s.id === "sqlane")) return
    const runs = ctx.quick ? 1 : 3
    const env = newEnv(ctx, "crash")
    const seconds = await whileRunning(
      () => dropCrashTables(ctx.target, runs, env.ns),
      async () => {},
      () => measureCrashRecovery(ctx.target.dialect, ctx.target.url, runs, env.ns)
    )
    ctx.record("crash-recovery", "sqlane", "seconds", percentile([...seconds], 50), "s")
    ctx.note("crash-recovery", "sqlane", `runs: ${seconds.map((s) => s.toFixed(3)).join(", ")} s`)
  }
}

export const groups: ReadonlyArray<Group> = [probeGroup, latencyGroup, enqueueGroup, runGroup, fairGroup, storageGroup, crashGroup, steadyGroup]
export const scenarioIds: ReadonlyArray<ScenarioId> = groups.flatMap((g) => g.scenarios)
