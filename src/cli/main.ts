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
import { CliError, describeError, run } from "./Cli.js"

// A reader that stops early (`sqlane jobs list | head`) closes the pipe: end quietly, as other
// commands do, instead of with an unhandled EPIPE.
for (const stream of [process.stdout, process.stderr]) {
  stream.on("error", (error: NodeJS.ErrnoException) => {
    if (error.code === "EPIPE") process.exit(0)
    throw error
  })
}

/** Text without ANSI escape sequences (colours and styles of @effect/cli's help and messages). */
const withoutAnsi = (text: string) => text.replace(/\u001b\[[0-9;]*[A-Za-z]/g, "")

/**
 * The console, without colours and styles on a stream that is not a terminal, or with `NO_COLOR`
 * set (https://no-color.org): help piped to a file or a pager reads as plain text.
 */
const plainConsole = (base: Console.Console): Console.Console => {
  const plain = (tty: boolean | undefined) => tty !== true || (process.env.NO_COLOR ?? "") !== ""
  const strip = (on: boolean) => (args: ReadonlyArray<unknown>) =>
    on ? args.map((a) => (typeof a === "string" ? withoutAnsi(a) : a)) : args
  const out = strip(plain(process.stdout.isTTY))
  const err = strip(plain(process.stderr.isTTY))
  return {
    ...base,
    log: (...args) => base.log(...out(args)),
    info: (...args) => base.info(...out(args)),
    error: (...args) => base.error(...err(args)),
    warn: (...args) => base.warn(...err(args)),
    unsafe: {
      ...base.unsafe,
      log: (...args) => base.unsafe.log(...out(args)),
      info: (...args) => base.unsafe.info(...out(args)),
      error: (...args) => base.unsafe.error(...err(args)),
      warn: (...args) => base.unsafe.warn(...err(args))
    }
  }
}

// @effect/cli's `--wizard` asks its questions on the terminal; with stdin from a file or a pipe it
// would wait forever for keys that never come.
const wizardWithoutTerminal = process.argv.includes("--wizard") && process.stdin.isTTY !== true

const program = Effect.suspend(() =>
  wizardWithoutTerminal
    ? new CliError({ message: "--wizard needs a terminal (stdin is not one)" })
    : run(process.argv)
).pipe(
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
  (self) => Console.consoleWith((base) => Effect.withConsole(self, plainConsole(base))),
  Effect.provide(NodeContext.layer)
)

NodeRuntime.runMain(program, { disableErrorReporting: true, disablePrettyLogger: true })
