/**
 * Entry point of the `sqlane` command (see `bin/sqlane.js`).
 *
 * @since 0.1.0
 */
import * as ValidationError from "@effect/cli/ValidationError"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Cause from "effect/Cause"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import { describeError, run } from "./Cli.js"

const program = Effect.suspend(() => run(process.argv)).pipe(
  // @effect/cli has already printed usage errors; everything else is one line on stderr.
  Effect.catchAllCause((cause) => {
    const failure = Cause.failureOption(cause)
    if (failure._tag === "Some" && ValidationError.isValidationError(failure.value)) return Effect.failCause(cause)
    if (Cause.isInterruptedOnly(cause)) return Effect.failCause(cause)
    const error = failure._tag === "Some" ? failure.value : Cause.squash(cause)
    return Console.error(`sqlane: ${describeError(error)}`).pipe(Effect.zipRight(Effect.failCause(cause)))
  }),
  // Logs go to stderr, so that stdout holds only the command's output (JSON with --json).
  Effect.provide(Logger.replace(Logger.defaultLogger, Logger.withConsoleError(Logger.logfmtLogger))),
  Logger.withMinimumLogLevel(LogLevel.Warning),
  Effect.provide(NodeContext.layer)
)

NodeRuntime.runMain(program, { disableErrorReporting: true })
