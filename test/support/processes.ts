import { type ChildProcess, spawn } from "node:child_process"
import * as path from "node:path"
import * as Effect from "effect/Effect"
import { inject } from "vitest"

const workerScript = path.join(import.meta.dirname, "worker-process.ts")

export interface Child {
  readonly process: ChildProcess
  /** Resolves with the exit code, or the signal that ended it. */
  readonly exit: Promise<number | NodeJS.Signals>
}

/** Starts test/support/worker-process.ts in a child Node process; killed when the scope closes. */
export const spawnWorker = (args: ReadonlyArray<string>, env: Record<string, string> = {}) =>
  Effect.acquireRelease(
    Effect.sync((): Child => {
      const child = spawn(process.execPath, ["--import", "tsx", workerScript, ...args], {
        env: { ...process.env, ...env },
        stdio: ["ignore", "inherit", "inherit"]
      })
      const exit = new Promise<number | NodeJS.Signals>((resolve) =>
        child.on("exit", (code, signal) => resolve(signal ?? code ?? -1))
      )
      return { process: child, exit }
    }),
    (child) => Effect.sync(() => child.process.exitCode === null && child.process.kill("SIGKILL"))
  )

export const awaitExit = (child: Child) => Effect.promise(() => child.exit)

/** The `sqlane` command as a clone runs it: bin/sqlane.js, compiling src through tsx. */
export const binScript = path.join(import.meta.dirname, "..", "..", "bin", "sqlane.js")

/** The `sqlane` command compiled once for the run by test/support/globalSetup.ts (faster to start). */
const cliScript = inject("cliScript")

export interface ScriptResult {
  readonly exit: number | NodeJS.Signals
  readonly stdout: string
  readonly stderr: string
}

export interface CliRun {
  readonly code: number | NodeJS.Signals
  readonly stdout: string
  readonly stderr: string
}

/** Runs a TypeScript program (e.g. an example) in a child Node process, collecting its output; killed when the scope closes. */
export const runScript = (script: string, env: Record<string, string | undefined> = {}) =>
  Effect.acquireUseRelease(
    Effect.sync(() =>
      spawn(process.execPath, ["--import", "tsx", script], {
        env: { ...process.env, ...env },
        stdio: ["ignore", "pipe", "pipe"]
      })
    ),
    (child) =>
      Effect.promise(() =>
        new Promise<ScriptResult>((resolve) => {
          let stdout = ""
          let stderr = ""
          child.stdout!.on("data", (chunk) => (stdout += chunk))
          child.stderr!.on("data", (chunk) => (stderr += chunk))
          child.on("close", (code, signal) => resolve({ exit: signal ?? code ?? -1, stdout, stderr }))
        })
      ),
    (child) => Effect.sync(() => child.exitCode === null && child.signalCode === null && child.kill("SIGKILL"))
  )

/**
 * Runs the `sqlane` command with `<args>` in a child process (as `npx sqlane` would) and collects its
 * output: the run's compiled CLI, or `script` (e.g. `binScript`).
 */
export const runCli = (
  args: ReadonlyArray<string>,
  env: Record<string, string | undefined> = {},
  script: string = cliScript
) =>
  Effect.async<CliRun>((resume) => {
    const childEnv: Record<string, string> = {}
    for (const [k, v] of Object.entries({ ...process.env, DATABASE_URL: undefined, SQLANE_PREFIX: undefined, ...env })) {
      if (v !== undefined) childEnv[k] = v
    }
    const child = spawn(process.execPath, [script, ...args], {
      env: childEnv,
      stdio: ["ignore", "pipe", "pipe"]
    })
    let stdout = ""
    let stderr = ""
    child.stdout!.on("data", (d) => (stdout += d))
    child.stderr!.on("data", (d) => (stderr += d))
    child.on("close", (code, signal) => resume(Effect.succeed({ code: signal ?? code ?? -1, stdout, stderr })))
    return Effect.sync(() => child.kill("SIGKILL"))
  })

/**
 * Runs the `sqlane` command as `… | head -c 1` would: its stdout is closed after the first bytes.
 * Succeeds with its exit code and stderr.
 */
export const runCliClosingEarly = (args: ReadonlyArray<string>, env: Record<string, string | undefined> = {}) =>
  Effect.async<CliRun>((resume) => {
    const childEnv: Record<string, string> = {}
    for (const [k, v] of Object.entries({ ...process.env, DATABASE_URL: undefined, SQLANE_PREFIX: undefined, ...env })) {
      if (v !== undefined) childEnv[k] = v
    }
    const child = spawn(process.execPath, [cliScript, ...args], { env: childEnv, stdio: ["ignore", "pipe", "pipe"] })
    let stdout = ""
    let stderr = ""
    child.stdout!.once("data", (d) => {
      stdout += d
      child.stdout!.destroy()
    })
    child.stderr!.on("data", (d) => (stderr += d))
    child.on("close", (code, signal) => resume(Effect.succeed({ code: signal ?? code ?? -1, stdout, stderr })))
    return Effect.sync(() => child.kill("SIGKILL"))
  })

export interface CliServer {
  /** The first line of stdout matching the pattern given (e.g. the address a server listens on). */
  readonly line: string
  /** What the command wrote to stderr so far. */
  readonly stderr: () => string
}

/**
 * Starts the `sqlane` command with `<args>` in a child process that keeps running (a server), and
 * succeeds once a line of its stdout matches `ready`; fails when it exits first. Killed when the
 * scope closes.
 */
export const spawnCliUntil = (
  args: ReadonlyArray<string>,
  ready: RegExp,
  env: Record<string, string | undefined> = {}
) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const childEnv: Record<string, string> = {}
      for (const [k, v] of Object.entries({ ...process.env, DATABASE_URL: undefined, SQLANE_PREFIX: undefined, ...env })) {
        if (v !== undefined) childEnv[k] = v
      }
      return spawn(process.execPath, [cliScript, ...args], { env: childEnv, stdio: ["ignore", "pipe", "pipe"] })
    }),
    (child) => Effect.sync(() => child.exitCode === null && child.signalCode === null && child.kill("SIGKILL"))
  ).pipe(
    Effect.flatMap((child) =>
      Effect.async<CliServer, Error>((resume) => {
        let stdout = ""
        let stderr = ""
        child.stderr!.on("data", (d) => (stderr += d))
        child.stdout!.on("data", (d) => {
          stdout += d
          const line = stdout.split("\n").find((l) => ready.test(l))
          if (line !== undefined) resume(Effect.succeed({ line, stderr: () => stderr }))
        })
        child.on("close", (code, signal) =>
          resume(Effect.fail(new Error(`sqlane exited (${signal ?? code}) before ${ready}: ${stdout}${stderr}`)))
        )
      })
    )
  )
