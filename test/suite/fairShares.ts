/**
 * Fair shares by concurrency key, on every database: a claim of a name whose jobs carry a key takes
 * them round-robin across the keys (each key's first due jobs, in turns), rotating from where the
 * last claim stopped, so a small key's jobs start within a claim or two of being enqueued behind
 * another key's backlog.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { Claimer, Job, Queue, Worker } from "../../src/index.js"
import { limitsOf } from "../../src/internal/limits.js"
import { nowMicros } from "../../src/internal/time.js"
import { waitUntil, withQueue } from "../support/helpers.js"
import type { Target } from "../support/targets.js"

/** Jobs of a tenant, claimed round-robin across tenants. */
const Tenanted = Job.make("tenanted", {
  payload: Schema.Struct({ tenant: Schema.NullOr(Schema.String), i: Schema.Number }),
  limits: { key: (p) => p.tenant ?? undefined }
})
/** As `Tenanted`, with at most 2 running per tenant. */
const TenantedCapped = Job.make("tenanted-capped", {
  payload: Schema.Struct({ tenant: Schema.String, i: Schema.Number }),
  limits: { key: (p) => p.tenant, runningPerKey: 2 }
})

/** As `Tenanted`, with a generous rate per tenant (1,000 starts a second). */
const TenantedRated = Job.make("tenanted-rated", {
  payload: Schema.Struct({ tenant: Schema.String, i: Schema.Number }),
  limits: { key: (p) => p.tenant, ratePerKey: { starts: 1000, per: "1 second" } }
})
/** Jobs without a concurrency key. */
const Plain = Job.make("plain", { payload: Schema.Struct({ i: Schema.Number }) })

const groupsOf = (...names: ReadonlyArray<string>) => names.map((name) => ({ name, priority: 0 }))
const fair = (name: string, extra: { running?: number; runningPerKey?: number } = {}) =>
  new Map([[name, { running: extra.running, runningPerKey: extra.runningPerKey, fair: true }]])

export const fairShares = (target: Target) => {
  const name = (s: string) => `[${target.id}] ${s}`

  describe(`fair shares [${target.id}]`, () => {
    it.live(name("a small key enqueued behind another key's backlog gets half of the next claim, and the rest of the one after"), () =>
      withQueue(target, () =>
        Effect.gen(function*() {
          const queue = yield* Queue.Queue
          const claimer = yield* Claimer.Claimer
          const big = yield* queue.enqueueMany(Tenanted, Array.from({ length: 500 }, (_, i) => ({ tenant: "big", i })))
          const small = yield* queue.enqueueMany(Tenanted, Array.from({ length: 8 }, (_, i) => ({ tenant: "small", i })))
          const now = (yield* nowMicros) + 1000
          const claim = (worker: string) =>
            Effect.map(
              claimer.claim(groupsOf(Tenanted.name), 10, now, worker, new Set([Tenanted.name]), fair(Tenanted.name)),
              (rows) => rows.map((r) => r.id)
            )
          const first = yield* claim("w1")
          assert.strictEqual(first.length, 10)
          // Two keys share the claim: 5 each, each key's first jobs (of each key twice its share is read).
          assert.deepStrictEqual(first.filter((id) => small.includes(id)), small.slice(0, 5))
          assert.deepStrictEqual(first.filter((id) => big.includes(id)), big.slice(0, 5))
          // The small key's 3 left, and 7 of the big key's.
          const second = yield* claim("w2")
          assert.deepStrictEqual(second.filter((id) => small.includes(id)), small.slice(5))
          assert.deepStrictEqual(second.filter((id) => big.includes(id)), big.slice(5, 12))
          // Only the big key is left: it has the whole claim.
          assert.deepStrictEqual(yield* claim("w3"), big.slice(12, 22))
        })))

    it.live(name("with more keys than a claim takes, claims rotate: one job of each key in turn, then around again"), () =>
      withQueue(target, () =>
        Effect.gen(function*() {
          const queue = yield* Queue.Queue
          const claimer = yield* Claimer.Claimer
          const keys = Array.from({ length: 12 }, (_, i) => `k${String(i).padStart(2, "0")}`)
          // Two jobs of each key, the keys enqueued last first: run_at order is not key order.
          const ids = new Map<string, Array<string>>()
          for (const key of [...keys].reverse()) {
            ids.set(key, [...yield* queue.enqueueMany(Tenanted, [{ tenant: key, i: 0 }, { tenant: key, i: 1 }])])
          }
          const keyOf = new Map(Array.from(ids, ([k, v]) => v.map((id) => [id, k] as const)).flat())
          const now = (yield* nowMicros) + 1000
          const claim = (worker: string) =>
            Effect.map(
              claimer.claim(groupsOf(Tenanted.name), 5, now, worker, new Set([Tenanted.name]), fair(Tenanted.name)),
              (rows) => rows.map((r) => r.id)
            )
          const taken: Array<string> = []
          for (let i = 0; i < 5; i++) taken.push(...yield* claim(`w${i}`))
          assert.strictEqual(taken.length, 24)
          assert.strictEqual(new Set(taken).size, 24)
          // Every key's first job before any key's second: the first 12 are one of each key.
          assert.deepStrictEqual(taken.slice(0, 12).map((id) => keyOf.get(id)).sort(), keys)
          assert.deepStrictEqual(taken.slice(0, 12).sort(), keys.map((k) => ids.get(k)![0]).sort())
          assert.deepStrictEqual(taken.slice(12).sort(), keys.map((k) => ids.get(k)![1]).sort())
        })))

    it.live(name("jobs without a key take turns as one key; a key at its per-key limit is passed over"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const queue = yield* Queue.Queue
          const claimer = yield* Claimer.Claimer
          const sql = (yield* SqlClient.SqlClient).withoutTransforms()
          const keyless = yield* queue.enqueueMany(Tenanted, Array.from({ length: 6 }, (_, i) => ({ tenant: null, i })))
          const keyed = yield* queue.enqueueMany(Tenanted, Array.from({ length: 6 }, (_, i) => ({ tenant: "t", i })))
          const now = (yield* nowMicros) + 1000
          const first = yield* claimer.claim(groupsOf(Tenanted.name), 6, now, "w1", new Set([Tenanted.name]), fair(Tenanted.name))
          assert.deepStrictEqual(first.map((r) => r.id).sort(), [...keyless.slice(0, 3), ...keyed.slice(0, 3)].sort())

          const hot = yield* queue.enqueueMany(TenantedCapped, Array.from({ length: 300 }, (_, i) => ({ tenant: "hot", i })))
          const cool = yield* queue.enqueueMany(TenantedCapped, Array.from({ length: 3 }, (_, i) => ({ tenant: "cool", i })))
          const later = (yield* nowMicros) + 1000
          const limits = fair(TenantedCapped.name, { runningPerKey: 2 })
          const claim = (worker: string) =>
            Effect.map(
              claimer.claim(groupsOf(TenantedCapped.name), 10, later, worker, new Set([TenantedCapped.name]), limits),
              (rows) => rows.map((r) => r.id).sort()
            )
          // 2 of each key (their limit), then none of hot while its 2 run; cool's third.
          assert.deepStrictEqual(yield* claim("w2"), [...hot.slice(0, 2), ...cool.slice(0, 2)].sort())
          assert.deepStrictEqual(yield* claim("w3"), [])
          yield* sql`UPDATE ${sql(prefix + "jobs")} SET state = 'completed' WHERE id = ${cool[0]}`
          assert.deepStrictEqual(yield* claim("w4"), [cool[2]])
        })))

    it.live(name("with 80 keys at their limit of 1, a slot freed on any of them is found within a few claims"), () =>
      withQueue(target, (prefix) =>
        Effect.gen(function*() {
          const queue = yield* Queue.Queue
          const claimer = yield* Claimer.Claimer
          const sql = (yield* SqlClient.SqlClient).withoutTransforms()
          const keys = Array.from({ length: 80 }, (_, i) => `k${String(i).padStart(2, "0")}`)
          const second = new Map<string, string>()
          for (const key of keys) {
            const [, b] = yield* queue.enqueueMany(TenantedCapped, [{ tenant: key, i: 0 }, { tenant: key, i: 1 }])
            second.set(key, b)
          }
          const now = (yield* nowMicros) + 1000
          const limits = fair(TenantedCapped.name, { runningPerKey: 1 })
          const claim = (worker: string) =>
            Effect.map(
              claimer.claim(groupsOf(TenantedCapped.name), 80, now, worker, new Set([TenantedCapped.name]), limits),
              (rows) => rows.map((r) => r.id)
            )
          const taken: Array<string> = []
          for (let i = 0; i < 3; i++) taken.push(...yield* claim(`a${i}`))
          // One job of each key, never two.
          assert.strictEqual(taken.length, 80)
          assert.deepStrictEqual(yield* claim("full"), [])
          // The first job of k70 ends: its second is found, however the rotation stands.
          yield* sql`UPDATE ${sql(prefix + "jobs")} SET state = 'completed' WHERE limit_key = 'k70' AND state = 'running'`
          const found: Array<string> = []
          for (let i = 0; i < 3 && found.length === 0; i++) found.push(...yield* claim(`b${i}`))
          assert.deepStrictEqual(found, [second.get("k70")])
        })))

    it.live(name("keys that cannot start (jobs not yet due) never hold back the keys after them, with small claims"), () =>
      withQueue(target, () =>
        Effect.gen(function*() {
          const queue = yield* Queue.Queue
          const claimer = yield* Claimer.Claimer
          // 100 keys whose only jobs run in an hour, first in key order (more than one claim's walk
          // reads); then a key with due jobs.
          for (let i = 0; i < 100; i++) {
            yield* queue.enqueue(Tenanted, { tenant: `a${String(i).padStart(3, "0")}`, i }, { delay: "1 hour" })
          }
          const due = yield* queue.enqueueMany(Tenanted, Array.from({ length: 5 }, (_, i) => ({ tenant: "z", i })))
          const now = (yield* nowMicros) + 1000
          const taken: Array<string> = []
          for (let i = 0; i < 12 && taken.length < 5; i++) {
            const rows = yield* claimer.claim(groupsOf(Tenanted.name), 5, now, `w${i}`, new Set([Tenanted.name]), fair(Tenanted.name))
            taken.push(...rows.map((r) => r.id))
          }
          assert.deepStrictEqual(taken.sort(), [...due].sort())
        })))

    it.live(name("claims of 5 over 20 keys, two of them with nothing due: every other key gets its turns"), () =>
      withQueue(target, () =>
        Effect.gen(function*() {
          const queue = yield* Queue.Queue
          const claimer = yield* Claimer.Claimer
          const keyOf = new Map<string, string>()
          for (let k = 1; k <= 20; k++) {
            const key = `k${String(k).padStart(2, "0")}`
            const ids = k === 3 || k === 15
              ? [yield* queue.enqueue(Tenanted, { tenant: key, i: 0 }, { delay: "1 hour" })]
              : yield* queue.enqueueMany(Tenanted, Array.from({ length: 30 }, (_, i) => ({ tenant: key, i })))
            for (const id of ids) keyOf.set(id, key)
          }
          const now = (yield* nowMicros) + 1000
          const counts = new Map<string, number>()
          for (let i = 0; i < 16; i++) {
            const rows = yield* claimer.claim(groupsOf(Tenanted.name), 5, now, `w${i}`, new Set([Tenanted.name]), fair(Tenanted.name))
            assert.strictEqual(rows.length, 5)
            for (const r of rows) counts.set(keyOf.get(r.id)!, (counts.get(keyOf.get(r.id)!) ?? 0) + 1)
          }
          // 80 jobs over 18 keys: 4 or 5 each, by turns.
          assert.strictEqual(counts.size, 18, JSON.stringify(Object.fromEntries(counts)))
          for (const [key, n] of counts) assert.include([4, 5], n, `key ${key}: ${n}`)
        })))

    it.live(name("under a rate limit per key, a small key behind a backlog still gets its share"), () =>
      withQueue(target, () =>
        Effect.gen(function*() {
          const queue = yield* Queue.Queue
          const claimer = yield* Claimer.Claimer
          yield* queue.enqueueMany(TenantedRated, Array.from({ length: 300 }, (_, i) => ({ tenant: "big", i })))
          const small = yield* queue.enqueueMany(TenantedRated, Array.from({ length: 8 }, (_, i) => ({ tenant: "small", i })))
          const now = (yield* nowMicros) + 1000
          const limits = limitsOf([TenantedRated])
          const keyed = new Set([TenantedRated.name])
          const first = yield* claimer.claimWithHolds(groupsOf(TenantedRated.name), 10, now, "w1", keyed, limits)
          assert.strictEqual(first.claimed.length, 10)
          assert.deepStrictEqual(first.claimed.map((r) => r.id).filter((id) => small.includes(id)), small.slice(0, 5))
          const second = yield* claimer.claimWithHolds(groupsOf(TenantedRated.name), 10, now + 1, "w2", keyed, limits)
          assert.deepStrictEqual(second.claimed.map((r) => r.id).filter((id) => small.includes(id)), small.slice(5))
        })))

    it.live(name("a claim of a name with fair shares and one without: the other name's jobs take turns as one key"), () =>
      withQueue(target, () =>
        Effect.gen(function*() {
          const queue = yield* Queue.Queue
          const claimer = yield* Claimer.Claimer
          const plain = yield* queue.enqueueMany(Plain, Array.from({ length: 10 }, (_, i) => ({ i })))
          const a = yield* queue.enqueueMany(Tenanted, Array.from({ length: 10 }, (_, i) => ({ tenant: "a", i })))
          const b = yield* queue.enqueueMany(Tenanted, Array.from({ length: 10 }, (_, i) => ({ tenant: "b", i })))
          const now = (yield* nowMicros) + 1000
          const claimed = yield* claimer.claim(
            groupsOf(Plain.name, Tenanted.name),
            9,
            now,
            "w1",
            new Set([Plain.name, Tenanted.name]),
            fair(Tenanted.name)
          )
          const ids = claimed.map((r) => r.id)
          assert.deepStrictEqual(ids.filter((id) => plain.includes(id)), plain.slice(0, 3))
          assert.deepStrictEqual(ids.filter((id) => a.includes(id)), a.slice(0, 3))
          assert.deepStrictEqual(ids.filter((id) => b.includes(id)), b.slice(0, 3))
          // Each job of the name with fair shares carries its key (the worker's waiting jobs take turns by it).
          assert.deepStrictEqual(
            claimed.map((r) => [r.id, r.fairKey]).sort(),
            ids.map((id) => [id, a.includes(id) ? "a" : b.includes(id) ? "b" : undefined]).sort()
          )
        })))

    it.live(name("claims smaller than a turn take the oldest name's jobs first: a name with fair shares is not passed over by other names"), () =>
      withQueue(target, () =>
        Effect.gen(function*() {
          const queue = yield* Queue.Queue
          const claimer = yield* Claimer.Claimer
          const nowMs = Math.floor((yield* nowMicros) / 1000)
          // The fair name's jobs became due first, then the plain name's, then a second key's.
          const big = yield* queue.enqueueMany(Tenanted, Array.from({ length: 3 }, (_, i) => ({ tenant: "big", i })), {
            runAt: new Date(nowMs - 30_000)
          })
          const plain = yield* queue.enqueueMany(Plain, Array.from({ length: 3 }, (_, i) => ({ i })), { runAt: new Date(nowMs - 20_000) })
          const late = yield* queue.enqueueMany(Tenanted, [{ tenant: "late", i: 0 }], { runAt: new Date(nowMs - 10_000) })
          const now = (yield* nowMicros) + 1000
          const claim = (n: number) =>
            Effect.map(
              claimer.claim(groupsOf(Tenanted.name, Plain.name), n, now, "w1", new Set([Plain.name, Tenanted.name]), fair(Tenanted.name)),
              (rows) => rows.map((r) => r.id)
            )
          // A claim of one: the oldest job of the turn's first places (each name's first; the fair
          // name's first key in its rotation), not the plain name's for being plain.
          assert.deepStrictEqual(yield* claim(1), [big[0]])
          // A claim of three: the first places of the turn (the fair name's rotation goes on to
          // "late", then "big"), oldest name first, then the fair name's next key.
          const second = yield* claim(3)
          assert.sameMembers(second, [late[0], plain[0], big[1]])
          assert.strictEqual(second.length, 3)
        })))

    it.live(name("a worker at concurrency 4 starts a small key's jobs within its next claims, behind a 2,000-job backlog"), () =>
      withQueue(target, () =>
        Effect.gen(function*() {
          const queue = yield* Queue.Queue
          yield* queue.enqueueMany(Tenanted, Array.from({ length: 2000 }, (_, i) => ({ tenant: "big", i })))
          yield* queue.enqueueMany(Tenanted, Array.from({ length: 10 }, (_, i) => ({ tenant: "small", i })))
          const started: Array<string> = []
          const handler = Job.handler(Tenanted, (p) => Effect.sync(() => void started.push(p.tenant ?? "")))
          yield* Worker.make({ handlers: [handler], concurrency: 4, prefetch: 20 })
          yield* waitUntil(Effect.sync(() => started.filter((t) => t === "small").length === 10), 60_000, "the small key's 10 jobs started")
          // Half of each claim is the small key's: its 10 jobs start right after the jobs claimed
          // before them (at most 4 running and 20 claimed ahead), far ahead of the backlog (without
          // fair shares, after all 2,000).
          const lastSmall = started.lastIndexOf("small")
          assert.isBelow(lastSmall, 4 + 20 + 2 * 10 + 10, `the small key's last job started as number ${lastSmall + 1}`)
        })), 120_000)
  })
}
