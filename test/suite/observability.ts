/**
 * Metrics and tracing: counters and histograms read back with `Metric.snapshot` after a known
 * workload, and the span of a job linked to the span that enqueued it (an in-memory tracer).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as HashMap from "effect/HashMap"
import * as Logger from "effect/Logger"
import * as Metric from "effect/Metric"
import * as MetricState from "effect/MetricState"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as Tracer from "effect/Tracer"
import { Job, Metrics, Queue, Worker } from "../../src/index.js"
import { waitUntil, withQueue } from "../support/helpers.js"
import type { Target } from "../support/targets.js"

/** The value of a metric for one job name, from Effect's metric registry. */
const metricOf = (metricName: string, jobName: string) =>
  Effect.map(Metric.snapshot, (pairs) => {
    const pair = pairs.find((p) =>
      p.metricKey.name === metricName &&
      p.metricKey.tags.some((t) => t.key === Metrics.jobNameTag && t.value === jobName)
    )
    if (pair === undefined) return undefined
    const state = pair.metricState
    if (MetricState.isCounterState(state)) return Number(state.count)
    if (MetricState.isGaugeState(state)) return Number(state.value)
    if (MetricState.isHistogramState(state)) return state.count
    return undefined
  })

/** A tracer that keeps every span it makes (Effect's own spans, recorded). */
const recordingTracer = () => {
  const native = Effect.runSync(Effect.tracer)
  const spans: Array<Tracer.Span> = []
  const tracer = Tracer.make({
    span: (name, parent, context, links, startTime, kind, options) => {
      const span = native.span(name, parent, context, links, startTime, kind, options)
      spans.push(span)
      return span
    },
    context: (f, fiber) => native.context(f, fiber)
  })
  return { tracer, spans }
}

export const observability = (target: Target) => {
  const name = (title: string) => `[${target.id}] ${title}`

  describe(`observability [${target.id}]`, () => {
    it.live(name("metrics: counters and histograms per job name after a known workload"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const Ok = Job.make(`${prefix}ok`, { payload: Schema.Struct({ i: Schema.Number }) })
          const Bad = Job.make(`${prefix}bad`, {
            payload: Schema.Struct({ i: Schema.Number }),
            retry: Job.attempts(2, Schedule.spaced("10 millis"))
          })
          yield* Worker.make({
            handlers: [
              Job.handler(Ok, () => Effect.void),
              Job.handler(Bad, () => Effect.die("no"))
            ]
          })
          const queue = yield* Queue.Queue
          yield* queue.enqueueMany(Ok, [1, 2, 3, 4, 5].map((i) => ({ i })))
          const bad = yield* Effect.forEach([1, 2], (i) => queue.enqueue(Bad, { i }))
          yield* waitUntil(Effect.map(Effect.forEach(bad, queue.get), (js) => js.every((j) => j.state === "dead")))
          // Counted once each end is written, just after the row changes: wait for the last counts.
          yield* waitUntil(Effect.map(metricOf("sqlane_jobs_completed", Ok.name), (n) => n === 5))
          yield* waitUntil(Effect.map(metricOf("sqlane_jobs_dead", Bad.name), (n) => n === 2))
          const read = (metric: string, job: string) => Effect.map(metricOf(metric, job), (n) => n ?? 0)
          assert.strictEqual(yield* read("sqlane_jobs_enqueued", Ok.name), 5)
          assert.strictEqual(yield* read("sqlane_jobs_enqueued", Bad.name), 2)
          assert.strictEqual(yield* read("sqlane_jobs_claimed", Ok.name), 5)
          assert.strictEqual(yield* read("sqlane_jobs_claimed", Bad.name), 4)
          assert.strictEqual(yield* read("sqlane_jobs_completed", Bad.name), 0)
          assert.strictEqual(yield* read("sqlane_jobs_failed", Bad.name), 4)
          assert.strictEqual(yield* read("sqlane_jobs_retried", Bad.name), 2)
          assert.strictEqual(yield* read("sqlane_jobs_dead", Bad.name), 2)
          assert.strictEqual(yield* read("sqlane_jobs_failed", Ok.name), 0)
          assert.strictEqual(yield* read("sqlane_job_run_duration_ms", Ok.name), 5)
          assert.strictEqual(yield* read("sqlane_job_run_duration_ms", Bad.name), 4)
          assert.strictEqual(yield* read("sqlane_job_pickup_latency_ms", Bad.name), 4)
        }), { pollInterval: "1 hour" }))

    it.live(name("a handler's log lines carry the job's id and name, and the caller's annotations"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const Logged = Job.make(`${prefix}logged`, { payload: Schema.Struct({ i: Schema.Number }) })
          const lines: Array<{ message: unknown; annotations: Record<string, unknown> }> = []
          const capture = Logger.make(({ annotations, message }) => {
            lines.push({ message, annotations: Object.fromEntries(HashMap.toEntries(annotations)) })
          })
          yield* Worker.make({
            handlers: [Job.handler(Logged, ({ i }) => Effect.logInfo(`job ${i}`))]
          }).pipe(Effect.annotateLogs("app", "orders"), Effect.provide(Logger.replace(Logger.defaultLogger, capture)))
          const queue = yield* Queue.Queue
          const ids = yield* Effect.forEach([1, 2], (i) => queue.enqueue(Logged, { i }))
          yield* waitUntil(Effect.sync(() => lines.filter((l) => String(l.message).startsWith("job ")).length === 2))
          for (const [k, id] of ids.entries()) {
            const line = lines.find((l) => String(l.message) === `job ${k + 1}`)
            assert.deepStrictEqual(line?.annotations, { app: "orders", "sqlane.job.id": id, "sqlane.job.name": Logged.name })
          }
        }), { pollInterval: "1 hour" }))

    it.live(name("logs: a failed attempt at Warning, a dead letter at Error, with the job's id, name and attempt; quiet logs neither"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          class Oops extends Schema.TaggedError<Oops>()("Oops", { message: Schema.String }) {}
          const definition = { payload: Schema.Struct({ i: Schema.Number }), failure: Oops, retry: Job.attempts(2, Schedule.spaced("10 millis")) }
          const Flaky = Job.make(`${prefix}flaky`, definition)
          const Hushed = Job.make(`${prefix}hushed`, definition)
          const lines: Array<{ level: string; message: string; annotations: Record<string, unknown> }> = []
          const capture = Logger.make(({ annotations, logLevel, message }) => {
            const text = (Array.isArray(message) ? message : [message]).map(String).join(" ")
            if (text.startsWith("sqlane:")) {
              lines.push({ level: logLevel.label, message: text, annotations: Object.fromEntries(HashMap.toEntries(annotations)) })
            }
          })
          const fail = (p: { readonly i: number }) => Effect.fail(new Oops({ message: `no\nluck ${p.i}` }))
          yield* Worker.make({ handlers: [Job.handler(Flaky, fail)] }).pipe(
            Effect.annotateLogs("app", "orders"),
            Effect.provide(Logger.replace(Logger.defaultLogger, capture))
          )
          yield* Worker.make({ handlers: [Job.handler(Hushed, fail)], logs: "quiet" }).pipe(
            Effect.provide(Logger.replace(Logger.defaultLogger, capture))
          )
          const queue = yield* Queue.Queue
          const id = yield* queue.enqueue(Flaky, { i: 1 })
          const hushed = yield* queue.enqueue(Hushed, { i: 2 })
          yield* waitUntil(Effect.sync(() => lines.some((l) => l.level === "ERROR")), 20_000, "the dead letter's line")
          const annotations = (attempt: number) => ({
            app: "orders",
            package: "sqlane",
            module: "Worker",
            "sqlane.job.id": id,
            "sqlane.job.name": Flaky.name,
            "sqlane.job.attempt": attempt,
            "sqlane.job.max_attempts": 2
          })
          assert.deepStrictEqual(lines.filter((l) => l.annotations["sqlane.job.id"] === id), [
            {
              level: "WARN",
              message: `sqlane: job ${id} (${Flaky.name}) attempt 1 of 2 failed; retrying in 10ms: Oops: no luck 1`,
              annotations: annotations(1)
            },
            {
              level: "ERROR",
              message: `sqlane: job ${id} (${Flaky.name}) is dead after attempt 2 of 2: Oops: no luck 1`,
              annotations: annotations(2)
            }
          ])
          // The quiet worker's job died too, and logged nothing (its end is written before it would log).
          yield* waitUntil(Effect.map(queue.get(hushed), (j) => j.state === "dead"), 20_000, "the quiet dead letter")
          yield* waitUntil(Effect.map(metricOf("sqlane_jobs_dead", Hushed.name), (n) => n === 1), 20_000, "its count")
          yield* Effect.sleep("200 millis")
          assert.deepStrictEqual(lines.filter((l) => l.message.includes(Hushed.name) || l.annotations["sqlane.job.id"] === hushed), [])
        }), { pollInterval: "1 hour" }))

    it.live(name("logs: the jobs of a lost worker taken back, one Warning line naming the worker and the jobs"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const sql = (yield* SqlClient.SqlClient).withoutTransforms()
          const Orphan = Job.make(`${prefix}orphan`, { payload: Schema.Struct({ i: Schema.Number }) })
          const queue = yield* Queue.Queue
          const ids = yield* queue.enqueueMany(Orphan, [{ i: 1 }, { i: 2 }], { delay: "1 hour" })
          // Left running by a worker whose heartbeat is long past the lease.
          yield* sql`INSERT INTO ${sql(prefix + "workers")} (id, started_at, heartbeat_at, host, pid)
            SELECT ${"gone-worker"}, created_at, created_at, ${"old-host"}, ${1} FROM ${sql(prefix + "jobs")} WHERE id = ${ids[0]}`
          yield* sql`UPDATE ${sql(prefix + "workers")} SET heartbeat_at = started_at - INTERVAL '1' HOUR WHERE id = ${"gone-worker"}`
          yield* sql`UPDATE ${sql(prefix + "jobs")} SET state = 'running', attempts = 1, worker_id = ${"gone-worker"},
            claimed_at = created_at WHERE ${sql.in("id", ids)}`
          const warnings: Array<string> = []
          const capture = Logger.make(({ logLevel, message }) => {
            const text = (Array.isArray(message) ? message : [message]).map(String).join(" ")
            if (logLevel.label === "WARN" && text.startsWith("sqlane:")) warnings.push(text)
          })
          yield* Worker.make({ handlers: [Job.handler(Orphan, () => Effect.void)] }).pipe(
            Effect.provide(Logger.replace(Logger.defaultLogger, capture))
          )
          yield* waitUntil(Effect.sync(() => warnings.length > 0), 20_000, "the rescue's line")
          assert.deepStrictEqual(warnings, [
            `sqlane: took back 2 job(s) of lost worker(s) gone-worker: ${ids[0]}, ${ids[1]}`
          ])
          // Retried at once (a lost worker says nothing about when a job can succeed): the line is the rescue's only one.
          yield* waitUntil(Effect.map(Effect.forEach(ids, queue.get), (js) => js.every((j) => j.state === "completed")))
          assert.deepStrictEqual(warnings.length, 1)
        }), { pollInterval: "1 hour", rescueInterval: "100 millis" }))

    it.live(name("logs: an end that changed nothing (its job was taken back while the attempt ran) at Warning"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const sql = (yield* SqlClient.SqlClient).withoutTransforms()
          const Overtaken = Job.make(`${prefix}overtaken`, { payload: Schema.Struct({ i: Schema.Number }) })
          const gate = yield* Effect.makeLatch(false)
          let started = false
          const warnings: Array<string> = []
          const capture = Logger.make(({ logLevel, message }) => {
            const text = (Array.isArray(message) ? message : [message]).map(String).join(" ")
            if (logLevel.label === "WARN" && text.startsWith("sqlane:")) warnings.push(text)
          })
          yield* Worker.make({
            handlers: [Job.handler(Overtaken, () => Effect.zipRight(Effect.sync(() => void (started = true)), gate.await))]
          }).pipe(Effect.provide(Logger.replace(Logger.defaultLogger, capture)))
          const queue = yield* Queue.Queue
          const id = yield* queue.enqueue(Overtaken, { i: 1 })
          yield* waitUntil(Effect.sync(() => started), 20_000, "the attempt to start")
          // Another worker took the job meanwhile (as a rescuer does): the row is on its next attempt.
          yield* sql`UPDATE ${sql(prefix + "jobs")} SET attempts = 2 WHERE id = ${id}`
          yield* gate.open
          yield* waitUntil(Effect.sync(() => warnings.length > 0), 20_000, "the line")
          assert.deepStrictEqual(warnings, [
            `sqlane: the end of job ${id} (${Overtaken.name}) attempt 1 of 25 changed nothing: the job was cancelled, ` +
            "or taken back as a lost worker's, while the attempt ran (its completion was not written)"
          ])
          assert.strictEqual((yield* queue.get(id)).attempts, 2)
        }), { pollInterval: "1 hour", rescueInterval: "1 hour" }))

    it.live(name("the due-jobs gauge counts due jobs per name at each heartbeat"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const Held = Job.make(`${prefix}held`, { payload: Schema.Struct({ i: Schema.Number }) })
          const queue = yield* Queue.Queue
          yield* queue.enqueueMany(Held, [1, 2, 3].map((i) => ({ i })))
          yield* queue.enqueue(Held, { i: 4 }, { delay: "1 hour" })
          // A worker with no free slot never claims, but still counts what is due.
          const gate = yield* Effect.makeLatch(false)
          yield* Worker.make({ concurrency: 1, handlers: [Job.handler(Held, () => gate.await)] })
          yield* waitUntil(Effect.map(metricOf("sqlane_jobs_due", Held.name), (n) => n === 2), 10_000, "gauge = 2")
          yield* gate.open
        }), { pollInterval: "1 hour", heartbeatInterval: "100 millis" }))

    it.live(name("tracing: a job's span is linked to the span that enqueued it"), () =>
      Effect.gen(function*() {
        const { spans, tracer } = recordingTracer()
        yield* withQueue(target, (prefix) =>
          Effect.gen(function*() {
            const Traced = Job.make(`${prefix}traced`, { payload: Schema.Struct({ i: Schema.Number }) })
            yield* Worker.make({ handlers: [Job.handler(Traced, () => Effect.withSpan(Effect.void, "handler.work"))] })
            const queue = yield* Queue.Queue
            const id = yield* queue.enqueue(Traced, { i: 1 }).pipe(Effect.withSpan("app.request"))
            yield* waitUntil(Effect.map(queue.get(id), (j) => j.state === "completed"))
            const request = spans.find((s) => s.name === "app.request")
            const enqueue = spans.find((s) => s.name === "sqlane.enqueue")
            const job = spans.find((s) => s.name === `sqlane.job ${Traced.name}`)
            const work = spans.find((s) => s.name === "handler.work")
            assert.isDefined(request)
            assert.isDefined(enqueue)
            assert.isDefined(job)
            assert.isDefined(work)
            // enqueue is a child of the app's span
            assert.strictEqual(Option.getOrThrow(enqueue!.parent).spanId, request!.spanId)
            // the job's span starts a trace of its own, linked to the enqueue span
            assert.isTrue(Option.isNone(job!.parent))
            assert.strictEqual(job!.links.length, 1)
            assert.strictEqual(job!.links[0].span.spanId, enqueue!.spanId)
            assert.strictEqual(job!.links[0].span.traceId, enqueue!.traceId)
            assert.strictEqual(job!.attributes.get("sqlane.job.id"), id)
            assert.strictEqual(job!.attributes.get("sqlane.job.attempt"), 1)
            // the handler's own spans are children of the job's span
            assert.strictEqual(Option.getOrThrow(work!.parent).spanId, job!.spanId)
          }), { pollInterval: "1 hour" }).pipe(Effect.withTracer(tracer))
      }))

    // docs/observability.md: sqlane_jobs_enqueued counts jobs written by enqueue, enqueueMany and
    // insert, not unique duplicates.
    it.live(name("metrics: sqlane_jobs_enqueued counts written jobs, not unique duplicates"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const queue = yield* Queue.Queue
          const Counted = Job.make(`${prefix}counted`, { payload: Schema.Struct({ i: Schema.Number }) })
          const enqueued = Metric.tagged(Metrics.jobsEnqueued, Metrics.jobNameTag, Counted.name)
          yield* queue.enqueue(Counted, { i: 1 }, { unique: `${prefix}u` })
          yield* queue.enqueue(Counted, { i: 2 }, { unique: `${prefix}u` }) // duplicate
          const dup = yield* queue.insert(Counted, { i: 3 }, { unique: `${prefix}u` })
          assert.isTrue(dup.duplicate)
          yield* queue.enqueueMany(Counted, [{ i: 4 }, { i: 5 }, { i: 6 }])
          yield* queue.insert(Counted, { i: 7 })
          assert.strictEqual((yield* Metric.value(enqueued)).count, 5)
        })))
  })
}
