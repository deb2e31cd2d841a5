/**
 * The `sqlane` command line: look into a queue and act on it without writing SQL.
 *
 * ```
 * sqlane migrate [--dry-run]
 * sqlane status
 * sqlane jobs list [--name N] [--state S] [--limit N] [--before ID]
 * sqlane jobs show ID [--full]
 * sqlane retry ID… | sqlane retry --name N [--state dead|cancelled]
 * sqlane cancel ID…
 * sqlane pause NAME | sqlane resume NAME
 * sqlane limit [NAME [N] [--per-key K] [--clear]]
 * sqlane prune
 * sqlane dashboard [--port 7070] [--host 127.0.0.1] [--read-only] [--basic-auth USER:PASS]
 * ```
 *
 * Every command takes `--database-url` (or `DATABASE_URL`: `postgres://…`, `mysql://…`,
 * `mariadb://…`), `--prefix` (or `SQLANE_PREFIX`, default `sqlane_`) and `--json`. Output is a
 * table by default and JSON with `--json`. An error prints one line to stderr and exits 1.
 *
 * @since 0.1.0
 */
import * as Command from "@effect/cli/Command"
import { cancel, pause, resume, retry } from "./actions.js"
import { dashboard } from "./dashboard.js"
import { jobs, status } from "./jobs.js"
import { limit } from "./limits.js"
import { migrate, prune } from "./maintenance.js"

export { CliError } from "./CliError.js"

/**
 * The `sqlane` command and its subcommands.
 *
 * @since 0.1.0
 * @category commands
 */
export const command = Command.make("sqlane").pipe(
  Command.withDescription("operate a sqlane job queue on PostgreSQL, MySQL or MariaDB"),
  Command.withSubcommands([migrate, status, jobs, retry, cancel, pause, resume, limit, prune, dashboard])
)

/**
 * Runs the CLI on `argv` (as `process.argv`: the first two entries are skipped).
 *
 * @since 0.1.0
 * @category commands
 */
export const run = Command.run(command, { name: "sqlane", version: "0.1.0" })

/**
 * One line describing a failure, for stderr.
 *
 * @since 0.1.0
 * @category errors
 */
export const describeError = (error: unknown): string => {
  if (typeof error === "object" && error !== null) {
    const e = error as { _tag?: string; message?: unknown; cause?: unknown }
    if (e._tag === "SqlError") {
      const cause = e.cause as { message?: string; code?: string } | undefined
      return `database error: ${cause?.message ?? String(e.message)}`.replace(/\s+/g, " ")
    }
    // The line starts with "sqlane: " already (src/cli/main.ts); a message that has it (a package
    // missing) does not repeat it.
    if (typeof e.message === "string" && e.message.length > 0) return e.message.replace(/^sqlane: /, "").replace(/\s+/g, " ")
    if (e._tag !== undefined) return e._tag
  }
  return String(error).replace(/\s+/g, " ")
}
