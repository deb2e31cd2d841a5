/**
 * The driver's facts and session statements: `dialect`, `capabilities`, `connectionIdStatement`,
 * `endConnection`, `migrationList`.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as MigrationsInternal from "../../src/internal/migrations.js"
import { waitUntil } from "../support/helpers.js"
import type { Target } from "../support/targets.js"
import { connectionId, session, withDriver } from "./fixtures.js"

export const sessionOps = (target: Target) => {
  const name = (title: string) => `[${target.id}] ${title}`

  describe("capabilities", () => {
    it.live(name("the dialect and what the database can do"), () =>
      withDriver(target, ({ driver, sql }) =>
        Effect.gen(function*() {
          assert.strictEqual(driver.dialect, target.dialect)
          if (target.dialect === "pg") {
            assert.deepStrictEqual(driver.capabilities, {
              listenNotify: true,
              claimsRideOnEnds: true,
              maxStatementBytes: undefined,
              padSpaceKeys: false
            })
          } else {
            // The server's max_allowed_packet, as read at start.
            const [packet] = yield* sql<{ packet: number }>`SELECT @@max_allowed_packet AS packet`
            assert.deepStrictEqual(driver.capabilities, {
              listenNotify: false,
              claimsRideOnEnds: true,
              maxStatementBytes: Number(packet.packet),
              padSpaceKeys: true
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
          const known = Object.keys(MigrationsInternal.forDialect(target.dialect, prefix))
            .map((key) => Number(key.split("_")[0])).sort((a, b) => a - b)
          assert.deepStrictEqual(yield* driver.migrationList(), known)
          yield* sql`DROP TABLE ${sql(prefix + "migrations")}`
          assert.strictEqual(yield* driver.migrationList(), undefined)
        })))
  })
}
