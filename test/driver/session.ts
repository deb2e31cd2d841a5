/**
 * The driver's facts and session statements: `capabilities`, `connectionIdStatement`,
 * `endConnection`, `connectionCheckStatement`, the migrations (`migrations`, `migrationList`,
 * `migrationDropAll`, `migrationLocked`) and notifications between sessions (`channelListen`, `channelNotify`).
 */
import { assert, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import { waitUntil } from "../support/helpers.js"
import type { Target } from "../support/targets.js"
import { connectionId, session, withDriver } from "./fixtures.js"

export const sessionOps = (target: Target) => {
  const name = (title: string) => `[${target.id}] ${title}`

  describe("capabilities", () => {
    it.live(name("what the database can do"), () =>
      withDriver(target, ({ driver, sql }) =>
        Effect.gen(function*() {
          if (target.dialect === "pg") {
            assert.deepStrictEqual(driver.capabilities, {
              listenNotify: true,
              claimsRideOnEnds: true,
              maxStatementBytes: undefined,
              padSpaceKeys: false,
              multiStatements: true
            })
          } else {
            // The server's max_allowed_packet, as read at start.
            const [packet] = yield* sql<{ packet: number }>`SELECT @@max_allowed_packet AS packet`
            assert.deepStrictEqual(driver.capabilities, {
              listenNotify: false,
              claimsRideOnEnds: true,
              maxStatementBytes: Number(packet.packet),
              padSpaceKeys: true,
              multiStatements: true
            })
          }
          // The ride is there exactly when the capability says so.
          assert.strictEqual(driver.jobFinishManyAndClaim !== undefined, driver.capabilities.claimsRideOnEnds)
        })))
  })

  describe("connectionIdStatement", () => {
    it.live(name("reads the session's own id: the same on one connection, another on another"), () =>
      withDriver(target, ({ driver }) =>
        Effect.gen(function*() {
          const a = yield* session
          const b = yield* session
          const idA = yield* connectionId(driver, a)
          assert.isTrue(Number.isInteger(idA) && idA > 0, `connection id ${idA}`)
          assert.strictEqual(yield* connectionId(driver, a), idA)
          assert.notStrictEqual(yield* connectionId(driver, b), idA)
        })))
  })

  describe("endConnection", () => {
    it.live(name("ends the session of a connection id: its next statement fails, others go on"), () =>
      withDriver(target, ({ driver }) =>
        Effect.gen(function*() {
          const doomed = yield* session
          const other = yield* session
          yield* driver.endConnection(yield* connectionId(driver, doomed))
          // The server ends the session as it takes the signal: at once, or a moment later.
          yield* waitUntil(
            Effect.map(Effect.exit(doomed.executeValues("SELECT 1", [])), Exit.isFailure),
            5_000,
            "a statement on the ended connection to fail"
          )
          assert.deepStrictEqual((yield* other.executeValues("SELECT 1", [])).map((r) => r.map(Number)), [[1]])
        })))
  })

  describe("migrationList", () => {
    it.live(name("the ids of the migrations applied, in order; undefined without a migrations table"), () =>
      withDriver(target, ({ driver, prefix, sql }) =>
        Effect.gen(function*() {
          const known = Object.keys(driver.migrations)
            .map((key) => Number(key.split("_")[0])).sort((a, b) => a - b)
          assert.deepStrictEqual(yield* driver.migrationList(), known)
          yield* sql`DROP TABLE ${sql(prefix + "migrations")}`
          assert.strictEqual(yield* driver.migrationList(), undefined)
        })))
  })

  describe("migrationDropAll", () => {
    it.live(name("drops every table of the prefix, none of another; again, it does nothing"), () =>
      withDriver(target, ({ driver, prefix, sql }) =>
        Effect.gen(function*() {
          const tablesOf = (p: string) =>
            Effect.map(
              sql<{ name: string }>`SELECT table_name AS name FROM information_schema.tables
                WHERE table_schema = ${sql.literal(target.dialect === "pg" ? "current_schema()" : "DATABASE()")}
                  AND table_name LIKE ${`${p}%`}`,
              (rows) => rows.map((r) => r.name).sort()
            )
          const other = `${prefix}x_`
          yield* sql`CREATE TABLE ${sql(`${other}jobs`)} (id integer)`
          assert.deepStrictEqual(
            (yield* tablesOf(prefix)).filter((t) => !t.startsWith(other)),
            ["jobs", "limits", "migrations", "paused", "rates", "schedules", "stats", "workers"].map((t) => prefix + t)
          )
          yield* driver.migrationDropAll()
          assert.deepStrictEqual(yield* tablesOf(prefix), [`${other}jobs`])
          assert.strictEqual(yield* driver.migrationList(), undefined)
          yield* driver.migrationDropAll()
          yield* sql`DROP TABLE ${sql(`${other}jobs`)}`
        })))
  })

  describe("connectionCheckStatement", () => {
    it.live(name("answers on a live connection and fails on one whose session was ended"), () =>
      withDriver(target, ({ driver }) =>
        Effect.gen(function*() {
          const conn = yield* session
          const check = conn.executeRaw(driver.connectionCheckStatement, [])
          assert.isTrue(Exit.isSuccess(yield* Effect.exit(check)))
          yield* driver.endConnection(yield* connectionId(driver, conn))
          yield* waitUntil(
            Effect.map(Effect.exit(conn.executeRaw(driver.connectionCheckStatement, [])), Exit.isFailure),
            5_000,
            "the check on the ended connection to fail"
          )
        })))
  })

  describe("migrations", () => {
    it.live(name("keyed <id>_<name>, ids 1, 2, 3, … without a gap, each name a word"), () =>
      withDriver(target, ({ driver }) =>
        Effect.sync(() => {
          const keys = Object.keys(driver.migrations)
          const ids = keys.map((key) => Number(key.split("_")[0])).sort((a, b) => a - b)
          assert.deepStrictEqual(ids, Array.from({ length: keys.length }, (_, i) => i + 1))
          for (const key of keys) assert.match(key, /^\d+_[a-z0-9_]+$/)
        })))
  })

  describe("migrationLocked", () => {
    it.live(name("runs one body at a time: a second waits for the first to end"), () =>
      withDriver(target, ({ driver }) =>
        Effect.gen(function*() {
          const log: Array<string> = []
          const body = (who: string) =>
            Effect.gen(function*() {
              log.push(`${who} in`)
              yield* Effect.sleep("300 millis")
              log.push(`${who} out`)
              return who
            })
          const first = yield* Effect.fork(driver.migrationLocked(body("a")))
          yield* waitUntil(Effect.sync(() => log.length > 0), 5_000, "the first body to start")
          const second = yield* Effect.fork(driver.migrationLocked(body("b")))
          assert.strictEqual(yield* Fiber.join(first), "a")
          assert.strictEqual(yield* Fiber.join(second), "b")
          assert.deepStrictEqual(log, ["a in", "a out", "b in", "b out"])
        })))
  })

  describe("channelListen and channelNotify", () => {
    if (target.dialect === "pg") {
      it.live(name("a notification sent after LISTEN is active reaches the listener; one on another channel does not"), () =>
        withDriver(target, ({ driver, prefix }) =>
          Effect.gen(function*() {
            const channel = `${prefix}test`
            const ready = yield* Deferred.make<void>()
            const heard: Array<string> = []
            yield* Effect.forkScoped(
              driver.channelListen(channel, () => Deferred.unsafeDone(ready, Effect.void), (p) => void heard.push(p))
            )
            yield* Deferred.await(ready).pipe(Effect.timeout("10 seconds"))
            yield* driver.channelNotify(`${prefix}other`, "elsewhere")
            yield* driver.channelNotify(channel, "hello")
            yield* waitUntil(Effect.sync(() => heard.length > 0), 5_000, "the notification")
            yield* driver.channelNotify(channel, "again")
            yield* waitUntil(Effect.sync(() => heard.length > 1), 5_000, "the second notification")
            assert.deepStrictEqual(heard, ["hello", "again"])
          })))
    } else {
      it.live(name("without LISTEN/NOTIFY: channelListen fails at once, channelNotify does nothing"), () =>
        withDriver(target, ({ driver, prefix }) =>
          Effect.gen(function*() {
            assert.isFalse(driver.capabilities.listenNotify)
            const listened = yield* Effect.exit(driver.channelListen(`${prefix}test`, () => {}, () => {}))
            assert.isTrue(Exit.isFailure(listened))
            assert.isTrue(Exit.isSuccess(yield* Effect.exit(driver.channelNotify(`${prefix}test`, "hello"))))
          })))
    }
  })
}
