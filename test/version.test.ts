import { assert, describe, it } from "@effect/vitest"
import * as Either from "effect/Either"
import { checkVersion } from "../src/services/Migrations.js"

describe("server version check (FOR UPDATE SKIP LOCKED)", () => {
  const ok = (dialect: "pg" | "mysql", version: string) => Either.isRight(checkVersion(dialect, version))
  const error = (dialect: "pg" | "mysql", version: string) => Either.getLeft(checkVersion(dialect, version))

  it("accepts PostgreSQL 9.5+, MySQL 8.0.1+, MariaDB 10.6+", () => {
    for (const v of ["9.5", "9.6.24", "15.20 (Debian 15.20-0+deb12u1)", "18.1"]) assert.isTrue(ok("pg", v), v)
    for (const v of ["8.0.1", "8.0.36", "8.4.3", "9.1.0"]) assert.isTrue(ok("mysql", v), v)
    for (const v of ["10.6.0-MariaDB", "10.11.19-MariaDB-0+deb12u1", "11.8.2-MariaDB"]) assert.isTrue(ok("mysql", v), v)
  })

  it("refuses older servers, naming the version found and the version needed", () => {
    const pg = error("pg", "9.4.26")
    assert.strictEqual(pg._tag === "Some" && pg.value.message, "sqlane needs FOR UPDATE SKIP LOCKED: found PostgreSQL 9.4.26, need PostgreSQL 9.5 or newer")
    const maria = error("mysql", "10.5.23-MariaDB")
    assert.strictEqual(maria._tag === "Some" && maria.value.found, "MariaDB 10.5.23-MariaDB")
    assert.strictEqual(maria._tag === "Some" && maria.value.needed, "MariaDB 10.6")
    const mysql = error("mysql", "5.7.44-log")
    assert.strictEqual(mysql._tag === "Some" && mysql.value._tag, "UnsupportedDatabase")
    assert.isTrue(Either.isLeft(checkVersion("mysql", "8.0.0")))
  })
})
