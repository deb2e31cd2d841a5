/**
 * Bad input, on every database: payloads JSON cannot hold as they are, sizes at the database's
 * limits, handler results and errors that cannot be stored as they are, names and keys with
 * quotes and pattern characters or out of range, rows edited by hand, and connection strings that
 * cannot connect. Each case ends in a typed refusal or lossless handling, and disturbs nothing
 * else (docs/limits.md).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as Tracer from "effect/Tracer"
import { spawn } from "node:child_process"
import * as net from "node:net"
import * as path from "node:path"
import { Admin, Errors, Job, Migrations, PeriodicJob, Queue, Worker } from "../../src/index.js"
import type { QueueOptions } from "../../src/services/QueueConfig.js"
import { countJobs, dropTables, testLayer, waitUntil, withQueue } from "../support/helpers.js"
import { runCli } from "../support/processes.js"
import type { Target } from "../support/targets.js"
import { Noop } from "../support/jobs.js"

const Strings = Job.make("bi-strings", {
  payload: Schema.Struct({ s: Schema.Array(Schema.String) }),
  success: Schema.Array(Schema.String)
})
const Numbers = Job.make("bi-numbers", {
  payload: Schema.Struct({ n: Schema.Array(Schema.Number) }),
  success: Schema.Array(Schema.Number)
})
const Loose = Job.make("bi-loose", { payload: Schema.Unknown })
/** A job whose mutex key function returns what its payload names: throws, "", too long, not a string, NUL. */
const OddKey = Job.make("bi-odd-key", {
  payload: Schema.Struct({ mode: Schema.String }),
  mutexKey: (p): any => {
    switch (p.mode) {
      case "throw":
        throw new Error("no key for you")
      case "empty":
        return ""
      case "long":
        return "k".repeat(256)
      case "number":
        return 42
      case "null":
        return null
      case "nul":
        return "a\u0000b"
      default:
        return undefined
    }
  }
})
interface Tree {
  readonly c?: Tree | undefined
}
const Tree: Schema.Schema<Tree> = Schema.Struct({ c: Schema.optional(Schema.suspend(() => Tree)) })
const Nested = Job.make("bi-nested", { payload: Tree })
const Blob = Job.make("bi-blob", {
  payload: Schema.Struct({ blob: Schema.String }),
  success: Schema.Unknown,
  retry: Job.attempts(1)
})

/**
 * A string of `units` UTF-16 code units: quotes, backslashes, control and multi-byte characters,
 * then ASCII (cheap to escape and compress, so size tests stay fast).
 */
const blobOf = (units: number) => ("a\"b\\c\n\u0000é€😀'%_ ".repeat(100) + "x".repeat(units)).slice(0, units)

/** Nesting `{"c":…}` `depth` levels deep, as JSON text. */
const nestedJson = (depth: number) => "{\"c\":".repeat(depth) + "{}" + "}".repeat(depth)

const refusal = <A>(effect: Effect.Effect<A, unknown, any>) =>
  Effect.map(Effect.flip(effect), (e) => {
    assert.instanceOf(e, Errors.InvalidPayload)
    return e as Errors.InvalidPayload
  })

/** The `InvalidEnqueueOption` an enqueue fails with. */
const optionRefusal = <A>(effect: Effect.Effect<A, unknown, any>) =>
  Effect.map(Effect.flip(effect), (e) => {
    assert.instanceOf(e, Errors.InvalidEnqueueOption)
    return e as Errors.InvalidEnqueueOption
  })

/** Counts the SQL statements an effect runs (each is a `sql.execute` span of @effect/sql). */
const countStatements = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    let statements = 0
    const base = yield* Effect.tracer
    const tracer = Tracer.make({
      span: (name, parent, context, links, startTime, kind, options) => {
        if (name === "sql.execute") statements++
        return base.span(name, parent, context, links, startTime, kind, options)
      },
      context: base.context
    })
    const exit = yield* Effect.exit(Effect.withTracer(effect, tracer))
    return { exit, statements }
  })

/** A TCP server that counts connections and closes each at once: a host that refuses to talk. */
const countingServer = Effect.acquireRelease(
  Effect.async<{ readonly port: number; readonly server: net.Server; readonly connections: () => number }>((resume) => {
    let connections = 0
    const server = net.createServer((socket) => {
      connections++
      socket.destroy()
    })
    server.listen(0, "127.0.0.1", () =>
      resume(Effect.succeed({
        port: (server.address() as net.AddressInfo).port,
        server,
        connections: () => connections
      })))
  }),
  ({ server }) => Effect.async<void>((resume) => void server.close(() => resume(Effect.void)))
)

/** Runs `node --import tsx <args>`, collecting its output; killed if the test ends first. */
const runProgram = (args: ReadonlyArray<string>) =>
  Effect.async<{ readonly exit: number | NodeJS.Signals; readonly stdout: string; readonly stderr: string }>((resume) => {
    const child = spawn(process.execPath, ["--import", "tsx", ...args], { stdio: ["ignore", "pipe", "pipe"] })
    let stdout = ""
    let stderr = ""
    child.stdout!.on("data", (d) => (stdout += d))
    child.stderr!.on("data", (d) => (stderr += d))
    child.on("close", (code, signal) => resume(Effect.succeed({ exit: signal ?? code ?? -1, stdout, stderr })))
    return Effect.sync(() => child.kill("SIGKILL"))
  })

const connectScript = path.join(import.meta.dirname, "..", "support", "connect-process.ts")

/** The refusal of a duration given as a bigint (Effect reads one as nanoseconds), after the option's name. */
const bigintMessage = (n: bigint) =>
  `must be a duration such as "1 minute", a number of milliseconds (60000) or a Duration; got the bigint ${n}n, which Effect would read as nanoseconds`

export const badInput = (target: Target) => {
  const name = (title: string) => `[${target.id}] ${title}`
  const mysql = target.dialect === "mysql"

  describe(`badInput [${target.id}]`, () => {
    it.live(name("strings with U+0000 and lone surrogates round-trip losslessly in payload and result"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const queue = yield* Queue.Queue
          const seen: Array<ReadonlyArray<string>> = []
          yield* Worker.make({
            handlers: [Job.handler(Strings, (p) => Effect.sync(() => (seen.push(p.s), p.s)))]
          })
          const s = ["a\u0000b", "\u0000", "\ud800", "x\udc00y", "\udbff\ud800", "😀", "'\"%_\\", "\uFFFF"]
          const id = yield* queue.enqueue(Strings, { s })
          yield* waitUntil(Effect.map(queue.get(id), (j) => j.state === "completed"))
          assert.deepStrictEqual(seen, [s])
          const info = yield* queue.get(id)
          assert.deepStrictEqual(info.payload, { s })
          assert.deepStrictEqual(Option.getOrThrow(info.result), s)
          // Stored as JSON escapes (ASCII), which every database keeps as they are.
          const sql = (yield* SqlClient.SqlClient).withoutTransforms()
          const [row] = yield* sql<{ payload: string }>`SELECT payload FROM ${sql(prefix + "jobs")} WHERE id = ${id}`
          assert.include(row.payload, "a\\u0000b")
          assert.include(row.payload, "\\ud800")
        })))

    it.live(name("numbers round-trip exactly; NaN, Infinity, bigints, cycles and deep nesting are refused with the path, before any SQL"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const queue = yield* Queue.Queue
          // Integers beyond 2^53 that are JS numbers, and extremes: JSON text keeps each double exactly.
          const n = [2 ** 53 + 2, 2 ** 60, Number.MAX_SAFE_INTEGER, Number.MAX_VALUE, 5e-324, -1.5e-300, 0.1 + 0.2, -0]
          const refused = yield* countStatements(Effect.gen(function*() {
            const nan = yield* refusal(queue.enqueue(Numbers, { n: [1, NaN] }))
            assert.strictEqual(nan.reason, "json")
            assert.strictEqual(nan.path, "$.n[1]")
            assert.include(nan.message, "NaN is not a JSON number")
            const inf = yield* refusal(queue.enqueueMany(Numbers, [{ n: [1] }, { n: [-Infinity] }]))
            assert.strictEqual(inf.path, "$.n[0]")
            const big = yield* refusal(queue.enqueue(Loose, { a: { "b c": [10n] } }))
            assert.strictEqual(big.path, "$.a[\"b c\"][0]")
            assert.include(big.message, "Schema.BigInt")
            const cyclic: any = { list: [{}] }
            cyclic.list[0].up = cyclic
            const cycle = yield* refusal(queue.enqueue(Loose, cyclic))
            assert.strictEqual(cycle.path, "$.list[0].up")
            assert.include(cycle.message, "cyclic")
            const deep = yield* refusal(queue.enqueue(Loose, JSON.parse(nestedJson(100_000))))
            assert.strictEqual(deep.reason, "json")
            assert.include(deep.message, "deeper than JSON.stringify can go")
            // A recursive schema on a payload nested too deeply overflows the stack: a typed refusal.
            const deepSchema = yield* refusal(queue.enqueue(Nested, JSON.parse(nestedJson(100_000))))
            assert.deepStrictEqual([deepSchema.reason, deepSchema.path], ["schema", "$"])
            assert.include(deepSchema.message, "Maximum call stack")
            const undef = yield* refusal(queue.enqueue(Loose, undefined))
            assert.strictEqual(undef.path, "$")
          }))
          assert.isTrue(Exit.isSuccess(refused.exit), String(refused.exit))
          assert.strictEqual(refused.statements, 0)
          assert.strictEqual(yield* countJobs(prefix), 0)

          const seen: Array<ReadonlyArray<number>> = []
          yield* Worker.make({ handlers: [Job.handler(Numbers, (p) => Effect.sync(() => (seen.push(p.n), p.n)))] })
          const sent = yield* countStatements(queue.enqueue(Numbers, { n }))
          assert.isAbove(sent.statements, 0) // the count above could have seen a statement
          const id = Exit.getOrElse(sent.exit, () => "")
          yield* waitUntil(Effect.map(queue.get(id), (j) => j.state === "completed"))
          // -0 is stored as 0: JSON.stringify writes no sign for zero (documented).
          assert.deepStrictEqual(seen[0], [...n.slice(0, -1), 0])
          assert.isTrue(seen[0].slice(0, -1).every((x, i) => Object.is(x, n[i])))
          assert.deepStrictEqual(Option.getOrThrow((yield* queue.get(id)).result), [...n.slice(0, -1), 0])
        })))

    it.live(name("1 MB payloads round-trip; 20 of them in one enqueueMany are written in statements that fit"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const queue = yield* Queue.Queue
          const blob = blobOf(1024 * 1024)
          const lengths = new Map<string, number>()
          let intact = 0
          yield* Worker.make({
            concurrency: 4,
            handlers: [Job.handler(Blob, (p, ctx) => Effect.sync(() => {
              lengths.set(ctx.id, p.blob.length)
              if (p.blob === blob) intact++
            }))]
          })
          yield* queue.enqueue(Blob, { blob })
          // 20 MB of payloads: more than MariaDB's default max_allowed_packet (16 MB) in one statement.
          const many = yield* queue.enqueueMany(Blob, Array.from({ length: 20 }, () => ({ blob })))
          assert.strictEqual(many.length, 20)
          assert.strictEqual(new Set(many).size, 20)
          // (Polled by count: Queue.get reads the payload.)
          yield* waitUntil(Effect.map(countJobs(prefix, "completed"), (n) => n === 21), 60_000)
          assert.strictEqual(intact, 21)
        })), 90_000)

    it.live(
      name(
        mysql
          ? "16 MB: a payload over max_allowed_packet is refused (reason size, no SQL); one at the limit runs; a result too large is dead-lettered with the reason"
          : "16 MB: a payload and its result round-trip"
      ),
      () =>
        withQueue(target, (prefix) =>
          Effect.gen(function*() {
            const queue = yield* Queue.Queue
            const sql = (yield* SqlClient.SqlClient).withoutTransforms()
            let intact = 0
            yield* Worker.make({
              handlers: [Job.handler(Blob, (p) => Effect.sync(() => (intact++, { blob: p.blob, more: "y".repeat(200_000) })))]
            })
            const small = Job.make("bi-small", { payload: Schema.Struct({}) })
            const smallRan: Array<string> = []
            yield* Worker.make({ handlers: [Job.handler(small, (_, ctx) => Effect.sync(() => smallRan.push(ctx.id)))] })
            const sixteen = blobOf(16 * 1024 * 1024 - 16)
            if (!mysql) {
              const id = yield* queue.enqueue(Blob, { blob: sixteen })
              yield* waitUntil(Effect.map(countJobs(prefix, "completed"), (n) => n === 1), 60_000)
              assert.strictEqual(intact, 1)
              const [row] = yield* sql<{ n: number }>`SELECT length(result) AS n FROM ${sql(prefix + "jobs")} WHERE id = ${id}`
              assert.isAbove(Number(row.n), sixteen.length + 200_000)
              return
            }
            const [{ packet }] = yield* sql<{ packet: number }>`SELECT @@max_allowed_packet AS packet`
            const limit = Number(packet) - 65_536
            const refused = yield* countStatements(refusal(queue.enqueue(Blob, { blob: sixteen })))
            assert.strictEqual(refused.statements, 0)
            const error = Exit.getOrElse(refused.exit, () => undefined)!
            assert.deepStrictEqual([error.reason, error.path], ["size", "$"])
            assert.include(error.message, `at most ${limit}`)
            assert.strictEqual(yield* countJobs(prefix), 0)
            // A payload right at the limit is written, claimed and run; its result (the payload and
            // 200 KB more) is more than the server takes: dead-lettered with the reason, and the small jobs ending
            // meanwhile are written.
            const atLimit = "x".repeat(limit - "{\"blob\":\"\"}".length)
            const id = yield* queue.enqueue(Blob, { blob: atLimit })
            const smalls = yield* Effect.forEach([1, 2, 3], () => queue.enqueue(small, {}))
            yield* waitUntil(Effect.map(countJobs(prefix, "dead"), (n) => n === 1), 60_000)
            yield* waitUntil(
              Effect.map(Effect.forEach(smalls, queue.get), (js) => js.every((j) => j.state === "completed"))
            )
            assert.strictEqual(intact, 1)
            const info = yield* queue.get(id)
            assert.strictEqual(info.attempts, 1)
            assert.match(Option.getOrThrow(info.lastError), /could not record this attempt's end/)
          })),
      90_000
    )

    it.live(name("results and errors that cannot be stored as they are: each job ends with a sanitized record, once"), () =>
      withQueue(target, () =>
        Effect.gen(function*() {
          const Ends = Job.make("bi-ends", {
            payload: Schema.Struct({ kind: Schema.String }),
            success: Schema.Unknown,
            failure: Schema.Unknown,
            retry: Job.attempts(1)
          })
          const runs = new Map<string, number>()
          const cyclic: any = { a: 1 }
          cyclic.self = cyclic
          const nullProto = Object.create(null)
          nullProto.self = nullProto
          const throwing = {
            get message(): string {
              throw new Error("getter")
            },
            get _tag(): string {
              throw new Error("getter")
            }
          }
          const behaviours: Record<string, Effect.Effect<unknown, unknown>> = {
            ok: Effect.succeed("fine"),
            nulResult: Effect.succeed({ s: "a\u0000b\ud800" }),
            cyclicResult: Effect.succeed(cyclic),
            bigintResult: Effect.succeed({ n: 10n }),
            nanResult: Effect.succeed({ x: NaN }),
            mapResult: Effect.succeed({ m: new Map([[1, 2]]) }),
            nanFailure: Effect.fail({ x: NaN, y: -Infinity, z: 1, big: 10n }),
            nulError: Effect.fail(new Error("bad\u0000byte \ud800 lone")),
            hugeError: Effect.die(new Error("e".repeat(1_000_000))),
            nullProtoDefect: Effect.die(nullProto),
            throwingGetters: Effect.die(throwing)
          }
          yield* Worker.make({
            handlers: [Job.handler(Ends, (p) => {
              runs.set(p.kind, (runs.get(p.kind) ?? 0) + 1)
              return behaviours[p.kind]
            })]
          })
          const queue = yield* Queue.Queue
          const kinds = Object.keys(behaviours)
          // In one enqueueMany: claimed together, and their ends written in one batch or a few.
          const ids = yield* queue.enqueueMany(Ends, kinds.map((kind) => ({ kind })))
          yield* waitUntil(
            Effect.map(Effect.forEach(ids, queue.get), (js) => js.every((j) => j.state === "completed" || j.state === "dead")),
            20_000
          )
          const info = Object.fromEntries(yield* Effect.forEach(kinds, (kind, i) => Effect.map(queue.get(ids[i]), (j) => [kind, j] as const)))
          for (const kind of kinds) {
            assert.strictEqual(runs.get(kind), 1, `${kind} ran once`)
            assert.strictEqual(info[kind].attempts, 1, `${kind}: one attempt`)
          }
          assert.strictEqual(info.ok.state, "completed")
          assert.strictEqual(info.nulResult.state, "completed")
          assert.deepStrictEqual(Option.getOrThrow(info.nulResult.result), { s: "a\u0000b\ud800" })
          const message = (kind: string) => {
            assert.strictEqual(info[kind].state, "dead", kind)
            return info[kind].errors[0].message
          }
          assert.match(message("cyclicResult"), /result of "bi-ends" is not JSON-serializable at \$\.self: a cyclic reference/)
          assert.match(message("bigintResult"), /at \$\.n: a bigint/)
          assert.match(message("nanResult"), /at \$\.x: NaN/)
          assert.match(message("mapResult"), /at \$\.m: a Map \(JSON would store \{\}\)/)
          // A typed failure's record keeps NaN, ±Infinity and bigints readable, as strings.
          assert.deepStrictEqual(info.nanFailure.errors[0].error, { x: "NaN", y: "-Infinity", z: 1, big: "10" })
          assert.strictEqual(message("nulError"), "Error: bad\uFFFDbyte \uFFFD lone")
          assert.strictEqual(Option.getOrThrow(info.nulError.lastError), "Error: bad\uFFFDbyte \uFFFD lone")
          assert.isAtMost(message("hugeError").length, 16_384)
          assert.match(message("hugeError"), /^Error: eee.*… \(cut: 1000007 characters\)$/)
          assert.strictEqual(message("nullProtoDefect"), "[object Object]")
          assert.isString(message("throwingGetters"))
        })))

    it.live(name("a value whose every inspection throws (a Proxy), thrown, failed or died with: the attempt ends as a recorded failure and frees its slot"), () =>
      withQueue(target, () =>
        Effect.gen(function*() {
          const Hostile = Job.make("bi-hostile", {
            payload: Schema.Struct({ how: Schema.String }),
            failure: Schema.Unknown,
            retry: Job.attempts(2, Schedule.spaced("10 millis"))
          })
          const Next = Job.make("bi-hostile-next", { payload: Schema.Struct({}) })
          /** A value none of whose traps can be run: reading, testing, listing or calling it throws. */
          const hostile = (target: object) => {
            const trap = () => {
              throw new Error("trap")
            }
            return new Proxy(target, {
              get: trap,
              has: trap,
              ownKeys: trap,
              getPrototypeOf: trap,
              setPrototypeOf: trap,
              getOwnPropertyDescriptor: trap,
              defineProperty: trap,
              deleteProperty: trap,
              set: trap,
              isExtensible: trap,
              preventExtensions: trap,
              apply: trap,
              construct: trap
            })
          }
          // Effect.fail and Effect.die themselves read the value they are given (so in the handler
          // they throw the trap's error); a cause made with Cause.fail or Cause.die holds it as it is.
          const behaviours: Record<string, readonly [() => Effect.Effect<void, unknown>, kind: string, message: string]> = {
            thrown: [() => {
              throw hostile({})
            }, "defect", "[unprintable value]"],
            thrownFunction: [() => {
              throw hostile(function() {})
            }, "defect", "[unprintable value]"],
            syncThrown: [() =>
              Effect.sync(() => {
                throw hostile({})
              }), "defect", "the attempt's fiber stopped: Effect's runtime threw Error: trap"],
            syncThrownLater: [() =>
              Effect.zipRight(
                Effect.sleep(1),
                Effect.sync(() => {
                  throw hostile({})
                })
              ), "defect", "the attempt's fiber stopped: Effect's runtime threw Error: trap"],
            forkedJoined: [
              () =>
                Effect.flatMap(
                  Effect.fork(Effect.sync(() => {
                    throw hostile({})
                  })),
                  Fiber.join
                ),
              "defect",
              "the attempt's fiber stopped: Effect's runtime threw Error: trap"
            ],
            failed: [() => Effect.fail(hostile({})), "defect", "Error: trap"],
            died: [() => Effect.die(hostile({})), "defect", "Error: trap"],
            failedCause: [() => Effect.failCause(Cause.fail(hostile({}))), "failure", "[unprintable value]"],
            diedCause: [() => Effect.failCause(Cause.die(hostile({}))), "defect", "[unprintable value]"],
            diedLater: [
              () => Effect.zipRight(Effect.sleep(1), Effect.failCause(Cause.die(hostile({})))),
              "defect",
              "[unprintable value]"
            ]
          }
          // A logger that renders every cause, as Effect's own does, at Debug (where a fiber's end
          // with an unhandled error is logged).
          const rendered: Array<string> = []
          const rendering = Logger.make(({ cause, message }) => {
            rendered.push(Cause.isEmpty(cause) ? String(message) : `${String(message)} ${Cause.pretty(cause)}`)
          })
          let nextRuns = 0
          yield* Worker.make({
            concurrency: 1,
            handlers: [
              Job.handler(Hostile, (p) => behaviours[p.how][0]()),
              Job.handler(Next, () => Effect.sync(() => void nextRuns++))
            ]
          }).pipe(
            Effect.provide(Logger.replace(Logger.defaultLogger, rendering)),
            Logger.withMinimumLogLevel(LogLevel.Debug)
          )
          const queue = yield* Queue.Queue
          const kinds = Object.keys(behaviours)
          const ids = yield* Effect.forEach(kinds, (how) => queue.enqueue(Hostile, { how }))
          const next = yield* queue.enqueue(Next, {})
          yield* waitUntil(
            Effect.map(Effect.forEach([...ids, next], queue.get), (js) =>
              js.every((j) => j.state === "completed" || j.state === "dead")),
            20_000,
            "every job to end"
          )
          for (const [i, how] of kinds.entries()) {
            const [, kind, message] = behaviours[how]
            const info = yield* queue.get(ids[i])
            assert.strictEqual(info.state, "dead", how)
            assert.strictEqual(info.attempts, 2, how)
            assert.deepStrictEqual(info.errors.map((e) => [e.attempt, e.kind, e.message]), [[1, kind, message], [2, kind, message]], how)
            assert.strictEqual(Option.getOrUndefined(info.lastError), message, how)
          }
          // With concurrency 1, the next job ran once every slot was freed.
          assert.strictEqual((yield* queue.get(next)).state, "completed")
          assert.strictEqual(nextRuns, 1)
          // The logger rendered the attempts' ends, with what stands in for the value.
          assert.isTrue(rendered.some((line) => line.includes("[unprintable value]")), "a rendered attempt end")
        })), 60_000)

    it.live(name("a job without a success schema stores no result, whatever its handler returns (a Map, a function): it completes once"), () =>
      withQueue(target, () =>
        Effect.gen(function*() {
          // `Effect.sync(() => map.set(…))` returns the Map: with the default Schema.Void nothing is
          // stored, so nothing is refused (it once failed every such attempt, and the job ran again).
          const Plain = Job.make("plain-result", { payload: Schema.Struct({ i: Schema.Number }) })
          const runs = new Map<number, number>()
          const returned: ReadonlyArray<unknown> = [runs, () => 1, Symbol("s"), 42n, NaN]
          yield* Worker.make({
            handlers: [Job.handler(Plain, (p) => Effect.sync(() => (runs.set(p.i, (runs.get(p.i) ?? 0) + 1), returned[p.i])))]
          })
          const queue = yield* Queue.Queue
          const ids = yield* queue.enqueueMany(Plain, returned.map((_, i) => ({ i })))
          yield* waitUntil(Effect.map(Effect.forEach(ids, queue.get), (js) => js.every((j) => j.state !== "pending" && j.state !== "running")))
          for (const id of ids) {
            const info = yield* queue.get(id)
            assert.strictEqual(info.state, "completed")
            assert.strictEqual(info.attempts, 1)
            assert.isTrue(Option.isNone(info.result))
          }
          assert.deepStrictEqual(Array.from(runs.values()), returned.map(() => 1))
        }), { pollInterval: "1 hour" }))

    it.live(name("QueueLive options that cannot run (a lease no longer than two heartbeats, a zero interval, a duration that does not decode) fail with a SetupError naming the option"), () =>
      Effect.gen(function*() {
        const cases: ReadonlyArray<readonly [QueueOptions, string]> = [
          [{ leaseTimeout: "2 seconds" }, "leaseTimeout (2000 ms) must be longer than twice heartbeatInterval (5000 ms)"],
          [{ leaseTimeout: "10 seconds", heartbeatInterval: "5 seconds" }, "leaseTimeout (10000 ms) must be longer than twice"],
          [{ leaseTimeout: -1 }, "leaseTimeout must not be negative, got -1"],
          [{ rescueInterval: 0 }, "rescueInterval must be longer than 0"],
          [{ pollInterval: "banana" as never }, "pollInterval must be a duration"],
          [{ heartbeatInterval: NaN }, "heartbeatInterval must be a finite duration, got NaN"],
          [{ insertCheckInterval: 0 }, "insertCheckInterval must be longer than 0"],
          [{ insertCheckInterval: "5 millis" }, "insertCheckInterval must be at least 10 ms"],
          [{ statsInterval: 0 }, "statsInterval must be longer than 0"],
          [{ statsInterval: "50 millis" }, "statsInterval must be at least 100 ms"]
        ]
        for (const [options, message] of cases) {
          const exit = yield* Effect.exit(Effect.scoped(Layer.build(testLayer(target, options).layer)))
          assert.isTrue(Exit.isFailure(exit), JSON.stringify(options))
          const error = Exit.isFailure(exit) ? Cause.failureOption(exit.cause) : Option.none()
          assert.isTrue(Option.isSome(error) && error.value instanceof Errors.SetupError, String(exit))
          assert.include(Option.isSome(error) ? (error.value as Errors.SetupError).message : "", message)
        }
        // The defaults, a lease just over two heartbeats, and retention kept forever, start.
        yield* withQueue(target, () => Effect.void, { retention: { dead: Duration.infinity, completed: Infinity } })
        yield* withQueue(target, () => Effect.void, { leaseTimeout: "10001 millis", heartbeatInterval: "5 seconds" })
        // The insert check may be turned off (MySQL/MariaDB; ignored on PostgreSQL).
        yield* withQueue(target, () => Effect.void, { insertCheckInterval: Duration.infinity })
      }))

    it.live(name("a pool of one connection: a worker fails at once naming maxConnections (MySQL/MariaDB: migrating too)"), () =>
      Effect.gen(function*() {
        // Both used to wait forever: the worker's lock (and on MySQL/MariaDB the migration lock) holds
        // the only connection.
        const migrated = testLayer(target)
        yield* Effect.scoped(Layer.build(migrated.layer))
        const message = (exit: Exit.Exit<unknown, unknown>) =>
          Exit.isFailure(exit) ? Cause.pretty(exit.cause) : "succeeded"
        if (target.dialect === "mysql") {
          const exit = yield* Effect.exit(Effect.scoped(Layer.build(testLayer(target, { maxConnections: 1 }).layer)))
            .pipe(Effect.timeout("20 seconds"))
          const error = Exit.isFailure(exit) ? Cause.failureOption(exit.cause) : Option.none()
          assert.isTrue(Option.isSome(error) && error.value instanceof Errors.SetupError, message(exit))
          assert.include((Option.getOrThrow(error) as Errors.SetupError).message, "maxConnections is 1")
        }
        const one = testLayer(target, { prefix: migrated.prefix, migrate: false, maxConnections: 1 })
        const two = () => testLayer(target, { prefix: migrated.prefix, migrate: false, maxConnections: 2 })
        const worker = yield* Effect.exit(
          Effect.scoped(Worker.make({ handlers: [Job.handler(Noop, () => Effect.void)] })).pipe(
            Effect.provide(one.layer),
            Effect.timeout("20 seconds")
          )
        )
        const refused = (exit: Exit.Exit<unknown, unknown>) => {
          const error = Exit.isFailure(exit) ? Cause.failureOption(exit.cause) : Option.none()
          assert.isTrue(Option.isSome(error) && error.value instanceof Errors.InvalidWorkerOptions, message(exit))
          const { option, reason } = Option.getOrThrow(error) as Errors.InvalidWorkerOptions
          return [option, reason]
        }
        assert.deepStrictEqual(refused(worker), ["maxConnections", "pool"])
        assert.include(message(worker), "a worker needs a pool of at least 2 connections")
        assert.include(message(worker), "maxConnections is 1")
        // A concurrency that is not a positive integer is refused (1.5 used to be floored to 1).
        for (const concurrency of [0, -1, 1.5, Number.NaN]) {
          const bad = yield* Effect.exit(
            Effect.scoped(Worker.make({ concurrency, handlers: [Job.handler(Noop, () => Effect.void)] })).pipe(
              Effect.provide(two().layer)
            )
          )
          assert.include(message(bad), `concurrency must be a positive integer, got ${concurrency}`)
          assert.deepStrictEqual(refused(bad), ["concurrency", "range"])
        }
        // Other options refused before the worker touches the database: typed, naming the option.
        const options: Array<readonly [Partial<Worker.WorkerOptions<never>>, string, string, string]> = [
          [{ id: "w".repeat(56) }, "id", "range", "a worker id is at most 55 characters"],
          [{ id: "" }, "id", "range", "must not be empty"],
          [{ id: "a\u0000b" }, "id", "characters", "U+0000"],
          [{ shutdownTimeout: "banana" as any }, "shutdownTimeout", "type", "shutdownTimeout must be a duration"],
          [{ shutdownTimeout: Infinity }, "shutdownTimeout", "range", "must be a finite duration"],
          [{ logs: "loud" as any }, "logs", "type", "logs must be \"default\" or \"quiet\", got loud"],
          [{ prefetch: -1 }, "prefetch", "range", "prefetch must be a whole number of jobs, 0 or more, got -1"],
          [{ prefetch: 2.5 }, "prefetch", "range", "got 2.5"],
          [{ prefetch: "10" as any }, "prefetch", "type", "got 10"],
          [
            { handlers: [Job.handler(Noop, () => Effect.void), Job.handler(Noop, () => Effect.void)] },
            "handlers",
            "conflict",
            `two handlers for job name "${Noop.name}"`
          ]
        ]
        for (const [given, option, reason, text] of options) {
          const bad = yield* Effect.exit(
            Effect.scoped(Worker.make({ handlers: [Job.handler(Noop, () => Effect.void)], ...given })).pipe(
              Effect.provide(two().layer)
            )
          )
          assert.deepStrictEqual(refused(bad), [option, reason], option)
          assert.include(message(bad), text)
        }
        // A Worker layer fails at build.
        const layerBuild = yield* Effect.exit(
          Layer.launch(Worker.layer({ concurrency: 0, handlers: [Job.handler(Noop, () => Effect.void)] })).pipe(
            Effect.provide(two().layer)
          )
        )
        assert.deepStrictEqual(refused(layerBuild), ["concurrency", "range"])
        // Each worker holds a connection: on a pool of 2, one worker runs and a second one fails.
        const second = yield* Effect.exit(
          Effect.scoped(Effect.gen(function*() {
            yield* Worker.make({ handlers: [Job.handler(Noop, () => Effect.void)] })
            yield* Worker.make({ handlers: [Job.handler(Noop, () => Effect.void)] })
          })).pipe(Effect.provide(two().layer), Effect.timeout("20 seconds"))
        )
        assert.deepStrictEqual(refused(second), ["maxConnections", "pool"])
        assert.include(message(second), "2 workers on one pool need a pool of at least 3 connections")
        assert.include(message(second), "maxConnections is 2")
        // A producer alone needs no second connection.
        const enqueued = yield* Effect.flatMap(Queue.Queue, (q) => q.enqueue(Noop, { i: 1 })).pipe(
          Effect.provide(one.layer),
          Effect.timeout("20 seconds")
        )
        assert.match(enqueued, /^\d+$/)
        yield* dropTables(migrated.prefix).pipe(Effect.provide(migrated.client))
      }))

    it.live(name("QueueLive with migrate: false on tables not migrated fails with SchemaNotMigrated, before any job statement"), () =>
      Effect.gen(function*() {
        const t = testLayer(target, { migrate: false })
        const exit = yield* Effect.exit(Effect.scoped(Layer.build(t.layer)))
        const error = Exit.isFailure(exit) ? Cause.failureOption(exit.cause) : Option.none()
        assert.isTrue(Option.isSome(error) && error.value instanceof Errors.SchemaNotMigrated, String(exit))
        const e = Option.getOrThrow(error) as Errors.SchemaNotMigrated
        assert.strictEqual(e.applied, 0)
        assert.include(e.message, "do not exist: run `sqlane migrate`")
        // Once migrated, the same options start.
        yield* Migrations.run(t.prefix).pipe(Effect.provide(t.client))
        yield* Effect.scoped(Layer.build(t.layer)).pipe(Effect.ensuring(dropTables(t.prefix).pipe(Effect.provide(t.client), Effect.ignore)))
      }))

    it.live(name("names and keys with quotes, %, _ and backslashes round-trip and match exactly, never as patterns"), () =>
      withQueue(target, () =>
        Effect.gen(function*() {
          const queue = yield* Queue.Queue
          const admin = yield* Admin.Admin
          const odd = `it's "q" 100% a_b \\ ; -- é`
          const near = `it's "q" 100% aXb \\ ; -- é` // what `_` would match as a LIKE pattern
          const Odd = Job.make(odd, { payload: Schema.Struct({ k: Schema.String }), mutexKey: (p) => p.k })
          const Near = Job.make(near, { payload: Schema.Struct({}) })
          // Paused before the worker starts (its first read of the paused names precedes its first claim).
          assert.isTrue(yield* admin.pause(odd))
          const ran: Array<string> = []
          yield* Worker.make({
            handlers: [
              Job.handler(Odd, (p, ctx) => Effect.sync(() => ran.push(`${ctx.name}|${p.k}`))),
              Job.handler(Near, (_, ctx) => Effect.sync(() => ran.push(ctx.name)))
            ]
          })
          const key = `k'"%_\\${odd}`
          const a = yield* queue.insert(Odd, { k: key }, { unique: key })
          const b = yield* queue.insert(Odd, { k: key.replace("_", "X") }, { unique: key.replace("_", "X") })
          const again = yield* queue.insert(Odd, { k: key }, { unique: key })
          assert.isFalse(a.duplicate)
          assert.isFalse(b.duplicate)
          assert.deepStrictEqual(again, { id: a.id, duplicate: true })
          const nearId = yield* queue.enqueue(Near, {})
          // The paused name is matched exactly: its near twin runs.
          yield* waitUntil(Effect.map(queue.get(nearId), (j) => j.state === "completed"))
          assert.strictEqual((yield* queue.get(a.id)).state, "pending")
          assert.deepStrictEqual((yield* admin.list({ name: odd })).map((j) => j.id).sort(), [a.id, b.id].sort())
          assert.deepStrictEqual((yield* admin.list({ name: "it's \"q\" 100% a%" })).length, 0)
          yield* admin.resume(odd)
          yield* waitUntil(Effect.map(Effect.forEach([a.id, b.id], queue.get), (js) => js.every((j) => j.state === "completed")))
          assert.sameMembers(ran, [near, `${odd}|${key}`, `${odd}|${key.replace("_", "X")}`])
          assert.strictEqual((yield* queue.get(a.id)).name, odd)
        })))

    it.live(name("over-long or unstorable names and keys (concurrency keys too, counted in UTF-16 code units): a typed error with the limit at enqueue, before any SQL"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const queue = yield* Queue.Queue
          assert.throws(() => Job.make("n".repeat(256), { payload: Schema.Struct({}) }), /1 to 255 UTF-16 code units.*256/)
          assert.throws(() => Job.make("a\u0000b", { payload: Schema.Struct({}) }), /U\+0000/)
          assert.throws(() => Job.make("a\ud800", { payload: Schema.Struct({}) }), /lone surrogate/)
          const Keyed = Job.make("bi-keyed", {
            payload: Schema.Struct({ k: Schema.String }),
            mutexKey: (p) => p.k
          })
          const Tenant = Job.make("bi-tenant", {
            payload: Schema.Struct({ k: Schema.String }),
            limits: { key: (p) => p.k, runningPerKey: 1 }
          })
          // A definition that bypassed Job.make (built by hand, or by a spread).
          const LongName = { ...Keyed, name: "n".repeat(256) } as unknown as typeof Keyed
          const NulName = { ...Keyed, name: "a\u0000b" } as unknown as typeof Keyed
          const refused = yield* countStatements(Effect.gen(function*() {
            const long = yield* optionRefusal(queue.enqueue(LongName, { k: "a" }))
            assert.deepStrictEqual([long.path, long.reason], ["name", "range"])
            assert.include(long.message, "the limit is 255")
            const nul = yield* optionRefusal(queue.enqueueMany(NulName, [{ k: "a" }]))
            assert.deepStrictEqual([nul.path, nul.reason], ["name", "characters"])
            const unique = yield* optionRefusal(queue.enqueue(Keyed, { k: "a" }, { unique: "u".repeat(256) }))
            assert.deepStrictEqual([unique.path, unique.reason], ["unique", "range"])
            assert.include(unique.message, "the unique key is 256 UTF-16 code units long (its JavaScript length); the limit is 255")
            const mutex = yield* optionRefusal(queue.enqueue(Keyed, { k: "m".repeat(300) }))
            assert.deepStrictEqual([mutex.path, mutex.reason], ["mutexKey", "range"])
            assert.include(mutex.message, "the mutex key is 300 UTF-16 code units long (its JavaScript length); the limit is 255")
            const tenant = yield* optionRefusal(queue.enqueue(Tenant, { k: "t".repeat(256) }))
            assert.deepStrictEqual([tenant.path, tenant.reason], ["limits.key", "range"])
            assert.include(tenant.message, "the concurrency key is 256 UTF-16 code units long (its JavaScript length); the limit is 255")
            // 128 characters outside the BMP are 256 code units: refused, though 128 characters.
            const emoji = yield* optionRefusal(queue.enqueueMany(Tenant, [{ k: "😀".repeat(128) }]))
            assert.deepStrictEqual([emoji.path, emoji.reason], ["limits.key", "range"])
            assert.include(emoji.message, "is 256 UTF-16 code units long")
            const tenantNul = yield* optionRefusal(queue.enqueue(Tenant, { k: "a\u0000b" }))
            assert.deepStrictEqual([tenantNul.path, tenantNul.reason], ["limits.key", "characters"])
            const surrogate = yield* optionRefusal(queue.enqueue(Keyed, { k: "a\ud800" }))
            assert.deepStrictEqual([surrogate.path, surrogate.reason], ["mutexKey", "characters"])
            assert.include(surrogate.message, "lone surrogate")
            const uniqueSurrogate = yield* optionRefusal(queue.enqueue(Keyed, { k: "a" }, { unique: { key: "\udc00" } }))
            assert.deepStrictEqual([uniqueSurrogate.path, uniqueSurrogate.reason], ["unique.key", "characters"])
            assert.include(uniqueSurrogate.message, "lone surrogate")
            assert.include((yield* optionRefusal(queue.enqueue(Keyed, { k: "" }))).message, "must not be empty")
          }))
          assert.isTrue(Exit.isSuccess(refused.exit), String(refused.exit))
          assert.strictEqual(refused.statements, 0)
          assert.strictEqual(yield* countJobs(prefix), 0)
          // At the limits: a 255-character name and keys (with 4-byte characters) are stored and run.
          const Max = Job.make("n".repeat(254) + "é", { payload: Schema.Struct({ k: Schema.String }), mutexKey: (p) => p.k })
          const maxKey = "😀".repeat(127) + "k"
          assert.strictEqual(maxKey.length, 255)
          let ran = 0
          const id = yield* queue.enqueue(Max, { k: maxKey }, { unique: maxKey })
          assert.strictEqual((yield* queue.insert(Max, { k: maxKey }, { unique: maxKey })).id, id)
          // A concurrency key of 255 code units (127 emoji and a letter: 128 characters) is stored exactly.
          const tenantId = yield* queue.enqueue(Tenant, { k: maxKey })
          const sql = (yield* SqlClient.SqlClient).withoutTransforms()
          const stored = yield* sql<{ limit_key: string }>`SELECT limit_key FROM ${sql(prefix + "jobs")} WHERE id = ${tenantId}`
          assert.strictEqual(stored[0].limit_key, maxKey)
          // The worker starts after the second insert: a job completed before it frees its key, and
          // the insert would then add a job (the matrix once saw that).
          yield* Worker.make({
            handlers: [Job.handler(Max, () => Effect.sync(() => ran++)), Job.handler(Tenant, () => Effect.sync(() => ran++))]
          })
          yield* waitUntil(Effect.map(queue.get(id), (j) => j.state === "completed"))
          yield* waitUntil(Effect.map(queue.get(tenantId), (j) => j.state === "completed"))
          assert.strictEqual((yield* queue.get(id)).name, Max.name)
          assert.strictEqual(ran, 2)
        })))

    it.live(name("odd mutex key results are refused with InvalidEnqueueOption (path mutexKey), nothing written"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const queue = yield* Queue.Queue
          const reasons = { throw: "threw", empty: "range", long: "range", number: "type", null: "type", nul: "characters" }
          for (const [mode, reason] of Object.entries(reasons)) {
            const error = yield* Effect.flip(queue.enqueue(OddKey, { mode }))
            assert.strictEqual(error._tag, "InvalidEnqueueOption", `mode ${mode}: ${String(error)}`)
            assert.deepStrictEqual(
              error._tag === "InvalidEnqueueOption" ? [error.path, error.reason] : [],
              ["mutexKey", reason],
              `mode ${mode}`
            )
          }
          const many = yield* Effect.flip(queue.enqueueMany(OddKey, [{ mode: "none" }, { mode: "throw" }]))
          assert.strictEqual(many._tag, "InvalidEnqueueOption")
          assert.strictEqual(yield* countJobs(prefix), 0)
          // undefined: no key
          yield* queue.enqueue(OddKey, { mode: "none" })
          assert.strictEqual(yield* countJobs(prefix), 1)
        })))

    it.live(name("a unique key containing NUL is refused with InvalidEnqueueOption"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const queue = yield* Queue.Queue
          const error = yield* optionRefusal(queue.enqueue(Loose, { i: 1 }, { unique: "a\u0000b" }))
          assert.deepStrictEqual([error.path, error.reason], ["unique", "characters"], String(error))
          assert.strictEqual(yield* countJobs(prefix), 0)
        })))

    it.live(name("options the types cannot see (unique: 42, delay \"banana\" or NaN, an invalid runAt, priority NaN): a typed error naming the option and what it got, before any SQL"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const queue = yield* Queue.Queue
          const Plain = Job.make("bi-options", { payload: Schema.Struct({ i: Schema.Number }) })
          const refused = yield* countStatements(Effect.gen(function*() {
            const unique = yield* optionRefusal(queue.enqueue(Plain, { i: 1 }, { unique: 42 as any }))
            assert.deepStrictEqual([unique.path, unique.reason], ["unique", "type"])
            assert.strictEqual(unique.message, "unique must be a key (a string) or { key, states, mode, period }, got 42")
            const uniqueKey = yield* optionRefusal(queue.insert(Plain, { i: 1 }, { unique: { key: 42 as any } }))
            assert.deepStrictEqual([uniqueKey.path, uniqueKey.reason], ["unique.key", "type"])
            assert.strictEqual(uniqueKey.message, "the unique key must be a string, got number: 42")
            const states = yield* optionRefusal(queue.insert(Plain, { i: 1 }, { unique: { key: "k", states: "pending" as any } }))
            assert.deepStrictEqual([states.path, states.reason], ["unique.states", "type"])
            assert.strictEqual(states.message, "unique.states must be an array of job states, got \"pending\"")
            const delays: Array<readonly [unknown, string, Errors.InvalidOptionReason]> = [
              ["banana", "must be a duration (milliseconds or e.g. \"5 seconds\"), got \"banana\"", "type"],
              [NaN, "must be a finite duration, got NaN", "range"],
              [Infinity, "must be a finite duration, got Infinity", "range"],
              [-Infinity, "must be a finite duration, got -Infinity", "range"],
              [Duration.infinity, "must be a finite duration, got the Duration Infinity", "range"],
              [{}, "must be a duration (milliseconds or e.g. \"5 seconds\"), got object {}", "type"],
              // Effect reads a bigint as nanoseconds: 5000n would be 5 µs, not 5 s.
              [5000n, bigintMessage(5000n), "type"]
            ]
            for (const [delay, message, reason] of delays) {
              const one = yield* optionRefusal(queue.enqueue(Plain, { i: 1 }, { delay: delay as any }))
              assert.deepStrictEqual([one.path, one.reason, one.message], ["delay", reason, `delay ${message}`], String(delay))
              const many = yield* optionRefusal(queue.enqueueMany(Plain, [{ i: 1 }], { delay: delay as any }))
              assert.strictEqual(many.message, `delay ${message}`)
            }
            for (const period of [3_600_000_000_000n, 60n]) {
              const nanos = yield* optionRefusal(queue.enqueue(Plain, { i: 1 }, { unique: { key: "k", period: period as any } }))
              assert.deepStrictEqual([nanos.path, nanos.reason, nanos.message], ["unique.period", "type", `unique.period ${bigintMessage(period)}`])
            }
            const invalidDate = yield* optionRefusal(queue.enqueue(Plain, { i: 1 }, { runAt: new Date(NaN) }))
            assert.deepStrictEqual([invalidDate.path, invalidDate.reason, invalidDate.message], [
              "runAt",
              "type",
              "runAt must be a valid Date or a DateTime, got an invalid Date"
            ])
            const dateText = yield* optionRefusal(queue.enqueue(Plain, { i: 1 }, { runAt: "2030-01-01" as any }))
            assert.strictEqual(dateText.message, "runAt must be a valid Date or a DateTime, got \"2030-01-01\"")
            const farAway = yield* optionRefusal(queue.enqueue(Plain, { i: 1 }, { runAt: new Date("+010000-01-01") }))
            assert.deepStrictEqual([farAway.path, farAway.reason], ["runAt", "range"])
            const many = yield* optionRefusal(queue.enqueueMany(Plain, [{ i: 1 }], { unique: "k" } as any))
            assert.deepStrictEqual([many.path, many.reason, many.message], [
              "unique",
              "type",
              "enqueueMany takes unique as a function of the payload (and its index) giving a key, { key, … } or undefined, got string"
            ])
            const text = yield* optionRefusal(queue.enqueueMany(Plain, "ab" as any))
            assert.deepStrictEqual([text.path, text.reason], ["payloads", "type"])
            assert.strictEqual(text.message, "enqueueMany takes an iterable of payloads (an array), got string")
            for (const priority of [NaN, 1.5, Infinity, null as any]) {
              const p = yield* optionRefusal(queue.enqueue(Plain, { i: 1 }, { priority }))
              assert.deepStrictEqual([p.path, p.reason, p.message], [
                "priority",
                priority === null ? "type" : "range",
                `priority must be a 32-bit integer, got ${priority}`
              ])
            }
          }))
          assert.isTrue(Exit.isSuccess(refused.exit), String(refused.exit))
          assert.strictEqual(refused.statements, 0)
          assert.strictEqual(yield* countJobs(prefix), 0)
          // A negative delay is due now, as Effect reads a negative duration (documented).
          const now = yield* queue.enqueue(Plain, { i: 1 }, { delay: -5000 })
          assert.isAtMost((yield* queue.get(now)).runAt.getTime(), Date.now())
          // At definition: a timeout, a priority or an attempt count that is not one throws InvalidJobDefinition.
          const payload = Schema.Struct({})
          const definitionError = (make: () => unknown) => {
            try {
              make()
            } catch (e) {
              assert.instanceOf(e, Errors.InvalidJobDefinition)
              const { _tag, job, message, option, reason } = e as Errors.InvalidJobDefinition
              return { _tag, job, option, reason, message }
            }
            return assert.fail("accepted")
          }
          assert.deepStrictEqual(definitionError(() => Job.make("bi-t", { payload, timeout: NaN })), {
            _tag: "InvalidJobDefinition",
            job: "bi-t",
            option: "timeout",
            reason: "range",
            message: "timeout must be a finite duration, got NaN"
          })
          const banana = definitionError(() => Job.make("bi-t", { payload, timeout: "banana" as any }))
          assert.deepStrictEqual([banana.option, banana.reason], ["timeout", "type"])
          assert.match(banana.message, /timeout must be a duration.*got "banana"/)
          assert.strictEqual(definitionError(() => Job.make("bi-t", { payload, timeout: 0 })).message, "timeout must be longer than 0, got 0")
          assert.match(definitionError(() => Job.make("bi-t", { payload, timeout: Duration.infinity })).message, /timeout must be a finite duration/)
          const nanos = definitionError(() => Job.make("bi-t", { payload, timeout: 30_000_000_000n as any }))
          assert.deepStrictEqual([nanos.option, nanos.reason, nanos.message], ["timeout", "type", `timeout ${bigintMessage(30_000_000_000n)}`])
          const priority = definitionError(() => Job.make("bi-t", { payload, priority: NaN }))
          assert.deepStrictEqual([priority.option, priority.reason, priority.message], ["priority", "range", "priority must be an integer, got NaN"])
          for (const n of [NaN, 2.5, 0, -1]) {
            const attempts = definitionError(() => Job.attempts(n))
            assert.deepStrictEqual([attempts.option, attempts.reason, attempts.job], ["attempts", "range", undefined])
            assert.include(attempts.message, `at least 1; got ${n}`)
          }
          const emptyName = definitionError(() => Job.make("", { payload }))
          assert.deepStrictEqual([emptyName.option, emptyName.reason, emptyName.job], ["name", "range", ""])
          // A periodic job's name is checked as a job name.
          const periodic = (name: string) =>
            Either.match(PeriodicJob.make(name, { cron: "* * * * *", job: Plain, payload: { i: 1 } }), {
              onLeft: (e) => e.message,
              onRight: () => "accepted"
            })
          assert.match(periodic("a\u0000b"), /must not contain U\+0000/)
          assert.match(periodic("a\ud800"), /must not contain a lone surrogate/)
          assert.match(periodic("a "), /must not end with a space/)
          assert.match(periodic(""), /must not be empty/)
          assert.match(periodic(42 as any), /must be a string, got number/)
          assert.strictEqual(periodic("p".repeat(201)), "a periodic job name must be 1 to 200 characters, got 201")
          assert.strictEqual(periodic("p".repeat(200)), "accepted")
        })))

    it.live(name("runAt and delay both given: a typed error naming both, from enqueue, insert and enqueueMany; nothing written"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const queue = yield* Queue.Queue
          const Plain = Job.make("bi-when", { payload: Schema.Struct({ i: Schema.Number }) })
          const both = { runAt: new Date(Date.now() + 60_000), delay: "5 seconds" } as const
          const message = "give either runAt or delay, not both (delay counts from now; runAt is a time)"
          const refused = yield* countStatements(Effect.gen(function*() {
            for (
              const attempt of [
                queue.enqueue(Plain, { i: 1 }, both) as Effect.Effect<unknown, unknown>,
                queue.insert(Plain, { i: 1 }, both),
                queue.enqueueMany(Plain, [{ i: 1 }, { i: 2 }], both),
                // A zero delay is a delay too.
                queue.enqueue(Plain, { i: 1 }, { runAt: new Date(), delay: 0 })
              ]
            ) {
              const e = yield* optionRefusal(attempt)
              assert.deepStrictEqual([e.path, e.reason, e.message, e.job], ["delay", "conflict", message, "bi-when"])
            }
          }))
          assert.isTrue(Exit.isSuccess(refused.exit), String(refused.exit))
          assert.strictEqual(refused.statements, 0)
          assert.strictEqual(yield* countJobs(prefix), 0)
          // Each on its own is taken; `delay: undefined` beside runAt is no delay.
          const at = yield* queue.enqueue(Plain, { i: 1 }, { runAt: both.runAt, delay: undefined })
          assert.strictEqual((yield* queue.get(at)).runAt.getTime(), both.runAt.getTime())
          const later = yield* queue.enqueueMany(Plain, [{ i: 2 }], { delay: "1 hour" })
          assert.isAbove((yield* queue.get(later[0])).runAt.getTime(), Date.now() + 3_500_000)
          assert.strictEqual(yield* countJobs(prefix), 2)
        })))

    it.live(name("Schema.Unknown payloads JSON would change (an invalid Date, a Map or Set, array holes, functions and symbols in arrays) are refused with the path"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const queue = yield* Queue.Queue
          const cases: Array<readonly [unknown, string, string]> = [
            [{ at: new Date(NaN) }, "$.at", "an invalid Date (JSON would store null)"],
            [{ m: new Map([["a", 1]]) }, "$.m", "a Map (JSON would store {})"],
            [{ s: [1, new Set([1])] }, "$.s[1]", "a Set (JSON would store {})"],
            // eslint-disable-next-line no-sparse-arrays
            [{ a: [1, , 3] }, "$.a[1]", "an array hole (JSON would store null)"],
            [{ a: [Symbol("s")] }, "$.a[0]", "a symbol in an array (JSON would store null)"],
            [{ a: [1, () => 1] }, "$.a[1]", "a function in an array (JSON would store null)"],
            [{ a: [undefined] }, "$.a[0]", "undefined in an array (JSON would store null)"],
            [new Date(NaN), "$", "an invalid Date (JSON would store null)"]
          ]
          const refused = yield* countStatements(Effect.forEach(cases, ([payload, path, reason]) =>
            Effect.map(refusal(queue.enqueue(Loose, payload)), (e) => {
              assert.deepStrictEqual([e.reason, e.path], ["json", path], reason)
              assert.include(e.message, `at ${path}: ${reason}`)
            })))
          assert.isTrue(Exit.isSuccess(refused.exit), String(refused.exit))
          assert.strictEqual(refused.statements, 0)
          assert.strictEqual(yield* countJobs(prefix), 0)
          // Object properties that are undefined, functions or symbols are left out, as JSON does (documented).
          const id = yield* queue.enqueue(Loose, { keep: 1, u: undefined, f: () => 1, s: Symbol("s"), d: new Date(0), e: {}, n: null })
          assert.deepStrictEqual((yield* queue.get(id)).payload, { keep: 1, d: "1970-01-01T00:00:00.000Z", e: {}, n: null })
        })))

    it.live(name("rows edited by hand: the database refuses invalid states and counts; undecodable payloads are dead-lettered with the reason, and the worker goes on"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const sql = (yield* SqlClient.SqlClient).withoutTransforms()
          const jobs = sql(prefix + "jobs")
          const queue = yield* Queue.Queue
          const Strict = Job.make("bi-strict", { payload: Schema.Struct({ n: Schema.Number }) })
          // Not due yet: edited before any worker could claim them.
          const enqueue = (job: Job.Job.Any, payload: unknown) => queue.enqueue(job, payload as never, { delay: "1 hour" })
          const edited = yield* enqueue(Strict, { n: 0 })
          const edits = [
            sql`UPDATE ${jobs} SET state = 'bogus' WHERE id = ${edited}`,
            sql`UPDATE ${jobs} SET state = '' WHERE id = ${edited}`,
            sql`UPDATE ${jobs} SET attempts = -1 WHERE id = ${edited}`,
            sql`UPDATE ${jobs} SET attempt_base = -3 WHERE id = ${edited}`,
            sql`UPDATE ${jobs} SET run_at = NULL WHERE id = ${edited}`,
            sql`UPDATE ${jobs} SET payload = NULL WHERE id = ${edited}`,
            sql`UPDATE ${jobs} SET name = NULL WHERE id = ${edited}`
          ]
          for (const edit of edits) assert.isTrue(Exit.isFailure(yield* Effect.exit(edit)), "the database refused the edit")
          const intact = yield* queue.get(edited)
          assert.strictEqual(intact.state, "pending")
          assert.strictEqual(intact.attempts, 0)

          const payloads: Record<string, string> = {
            notJson: "not json",
            truncated: "{\"n\":",
            wrongType: "{\"n\":\"one\"}",
            jsonNull: "null",
            bareString: "\"n\"",
            empty: "",
            escapedNul: "{\"n\":1,\"x\":\"\\u0000\"}" // decodes (extra keys are dropped by Struct)
          }
          const ids: Record<string, string> = {}
          for (const [label, payload] of Object.entries(payloads)) {
            ids[label] = yield* enqueue(Strict, { n: 1 })
            yield* sql`UPDATE ${jobs} SET payload = ${payload}, run_at = created_at WHERE id = ${ids[label]}`
          }
          // A recursive schema fed a payload too deep for it (its decode overflows the stack), with a
          // garbled error history.
          ids.tooDeep = yield* enqueue(Nested, {})
          yield* sql`UPDATE ${jobs} SET payload = ${nestedJson(100_000)}, errors = ${"garbage"}, run_at = created_at
            WHERE id = ${ids.tooDeep}`
          const good = yield* Effect.forEach([1, 2, 3], (n) => queue.enqueue(Strict, { n }))
          const ran: Array<number> = []
          yield* Worker.make({
            handlers: [
              Job.handler(Strict, (p) => Effect.sync(() => ran.push(p.n))),
              Job.handler(Nested, () => Effect.void)
            ]
          })
          yield* waitUntil(
            Effect.map(
              Effect.forEach([...Object.values(ids), ...good], queue.get),
              (js) => js.every((j) => j.state === "dead" || j.state === "completed")
            ),
            20_000
          )
          const ended = (label: string) => Effect.map(queue.get(ids[label]), (j) => [j.state, j.errors[0]?.kind, j.errors[0]?.message ?? ""] as const)
          for (const label of ["notJson", "truncated", "empty"]) {
            const [state, kind, message] = yield* ended(label)
            assert.deepStrictEqual([state, kind], ["dead", "decode"], label)
            assert.match(message, /^payload is not valid JSON: SyntaxError/, label)
          }
          for (const label of ["wrongType", "jsonNull", "bareString"]) {
            const [state, kind, message] = yield* ended(label)
            assert.deepStrictEqual([state, kind], ["dead", "decode"], label)
            assert.match(message, /^payload does not match the schema of "bi-strict"/, label)
          }
          const [deepState, deepKind, deepMessage] = yield* ended("tooDeep")
          assert.deepStrictEqual([deepState, deepKind], ["dead", "decode"])
          assert.include(deepMessage, "Maximum call stack size exceeded")
          assert.strictEqual((yield* queue.get(ids.escapedNul)).state, "completed")
          assert.sameMembers(ran, [1, 1, 2, 3])
          assert.strictEqual((yield* queue.get(edited)).state, "pending")
        })))

    const wrongCredentials = () => {
      const url = new URL(target.url)
      // Trust authentication (the machine's PostgreSQL 15) takes any password: use a role that
      // does not exist there. Elsewhere the password is wrong.
      if (target.dialect === "pg" && url.password === "") url.username = "sqlane_no_such_role"
      url.password = "Wr0ngPassw0rd-x9"
      return url
    }

    it.live(name("rows edited to extreme values (attempts at the int limit, infinite times) run, and stall no other job"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const sql = (yield* SqlClient.SqlClient).withoutTransforms()
          const jobs = sql(prefix + "jobs")
          const queue = yield* Queue.Queue
          const Edge = Job.make("bi-edge", { payload: Schema.Struct({ i: Schema.Number }) })
          const Other = Job.make("bi-other", { payload: Schema.Struct({ i: Schema.Number }) })
          const maxed = yield* queue.enqueue(Edge, { i: 1 }, { delay: "1 hour" })
          yield* sql`UPDATE ${jobs} SET attempts = 2147483647, run_at = created_at WHERE id = ${maxed}`
          const edited = [maxed]
          if (target.dialect === "pg") {
            // timestamptz holds infinities: a due job "since forever", created "at the end of time".
            const early = yield* queue.enqueue(Edge, { i: 2 }, { delay: "1 hour" })
            yield* sql`UPDATE ${jobs} SET run_at = '-infinity' WHERE id = ${early}`
            const created = yield* queue.enqueue(Edge, { i: 3 }, { delay: "1 hour" })
            yield* sql`UPDATE ${jobs} SET created_at = 'infinity', run_at = now() WHERE id = ${created}`
            edited.push(early, created)
          }
          const others = yield* Effect.forEach([1, 2, 3], (i) => queue.enqueue(Other, { i }))
          yield* Worker.make({
            handlers: [Job.handler(Edge, () => Effect.void), Job.handler(Other, () => Effect.void)]
          })
          for (const id of [...others, ...edited]) {
            yield* waitUntil(Effect.map(queue.get(id), (j) => j.state === "completed"), 15_000, `job ${id} to complete`)
          }
          assert.strictEqual((yield* queue.get(maxed)).attempts, 2147483647)
          // A name ending with a space is refused: MySQL/MariaDB would take it for the name without it.
          assert.throws(() => Job.make("bi-edge ", { payload: Schema.Struct({}) }), /trailing space/)
        }), { pollInterval: "200 millis" }))

    it.live(name("status (Admin and `sqlane status`) with a job due since the earliest time a row can hold (-infinity on PostgreSQL)"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const sql = (yield* SqlClient.SqlClient).withoutTransforms()
          const jobs = sql(prefix + "jobs")
          const queue = yield* Queue.Queue
          const Early = Job.make("bi-early", { payload: Schema.Struct({}) })
          const id = yield* queue.enqueue(Early, {}, { delay: "1 hour" })
          yield* target.dialect === "pg"
            ? sql`UPDATE ${jobs} SET run_at = '-infinity' WHERE id = ${id}`
            : sql`UPDATE ${jobs} SET run_at = '1000-01-01 00:00:00' WHERE id = ${id}`
          const status = yield* (yield* Admin.Admin).status
          const early = status.names.find((n) => n.name === "bi-early")!
          assert.deepStrictEqual([early.pending, early.due], [1, 1])
          // Due since the year 1000 (as -infinity reads everywhere else).
          assert.isAtLeast(early.oldestDueMs!, Date.now() - Date.UTC(1000, 0, 1) - 60_000)
          const cli = yield* runCli(["status", "--json", "--prefix", prefix], { DATABASE_URL: target.url })
          assert.strictEqual(cli.code, 0, cli.stderr)
          const names = JSON.parse(cli.stdout).names as Array<{ name: string; due: number; oldestDueMs: number }>
          assert.strictEqual(names.find((n) => n.name === "bi-early")?.due, 1)
        })), 60_000)

    it.live(name("CLI: a wrong password or a host that hangs up gives one line on stderr, at once, no password"), () =>
      Effect.gen(function*() {
        const refusing = yield* countingServer
        const bad = wrongCredentials()
        const down = new URL(bad)
        down.hostname = "127.0.0.1"
        down.port = String(refusing.port)
        const runs = yield* Effect.forEach([bad, down], (url) =>
          Effect.map(Effect.timed(runCli(["status"], { DATABASE_URL: url.toString() })), ([took, run]) => ({
            run,
            seconds: Duration.toSeconds(took)
          })), { concurrency: 2 })
        for (const { run, seconds } of runs) {
          assert.strictEqual(run.code, 1, run.stderr)
          assert.strictEqual(run.stdout, "")
          const lines = run.stderr.trim().split("\n")
          assert.strictEqual(lines.length, 1, run.stderr)
          assert.match(lines[0], /^sqlane: cannot connect to \w+:\/\/[^:]+:\*\*\*@/)
          assert.notInclude(run.stderr, "Wr0ngPassw0rd")
          assert.isBelow(seconds, 30) // a child Node process with tsx, on a loaded machine; the driver gives up in under 2 s
        }
        console.log(
          `[${target.id}] CLI: wrong credentials ${runs[0].seconds.toFixed(1)} s, host that hangs up ` +
            `${runs[1].seconds.toFixed(1)} s (${refusing.connections()} connection(s)): ${runs[0].run.stderr.trim()}`
        )
        // No reconnect loop: the host that hangs up was tried a few times, not hammered.
        assert.isAtLeast(refusing.connections(), 1)
        assert.isAtMost(refusing.connections(), 3)
      }).pipe(Effect.scoped), 60_000)

    it.live(name("a worker program (QueueLive): a wrong password or a host that hangs up fails once, at once, no password"), () =>
      Effect.gen(function*() {
        const refusing = yield* countingServer
        const bad = wrongCredentials()
        const down = new URL(bad)
        down.hostname = "127.0.0.1"
        down.port = String(refusing.port)
        const runs = yield* Effect.forEach([bad, down], (url) =>
          Effect.map(Effect.timed(runProgram([connectScript, target.dialect, url.toString()])), ([took, run]) => ({
            run,
            seconds: Duration.toSeconds(took)
          })), { concurrency: 2 })
        for (const { run, seconds } of runs) {
          assert.strictEqual(run.exit, 1, run.stderr + run.stdout)
          const output = run.stdout + run.stderr
          assert.notInclude(output, "Wr0ngPassw0rd")
          assert.strictEqual(output.match(/Failed to connect/g)?.length, 1, output)
          assert.isBelow(seconds, 30)
        }
        const cause = (run: { readonly stderr: string; readonly stdout: string }) =>
          (run.stdout + run.stderr).match(/\[cause\]: (.*)/)?.[1]
        console.log(
          `[${target.id}] worker program: wrong credentials ${runs[0].seconds.toFixed(1)} s (${cause(runs[0].run)}), ` +
            `host that hangs up ${runs[1].seconds.toFixed(1)} s (${refusing.connections()} connection(s), ${cause(runs[1].run)})`
        )
        assert.isAtLeast(refusing.connections(), 1)
        assert.isAtMost(refusing.connections(), 3)
      }).pipe(Effect.scoped), 60_000)
  })
}
