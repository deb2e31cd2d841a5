/**
 * Live data: a hook that loads once, then again every 2 s (or the interval given) while the tab is
 * visible (polling pauses while it is hidden and resumes at once when it is shown), without
 * reloading the page.
 */
import { useEffect, useRef, useState } from "preact/hooks"

export const pollMs = 2000

export interface Live<A> {
  /** The latest data, kept while a later load fails. */
  readonly data: A | undefined
  /** The error of the latest load, if it failed. */
  readonly error: unknown
  /** Loads again now (after an action). */
  readonly refresh: () => void
}

export const useLive = <A>(load: () => Promise<A>, deps: ReadonlyArray<unknown>, everyMs = pollMs): Live<A> => {
  const [state, setState] = useState<{ data: A | undefined; error: unknown }>({ data: undefined, error: undefined })
  const loadRef = useRef(load)
  loadRef.current = load
  const refreshRef = useRef<() => void>(() => {})
  useEffect(() => {
    let stopped = false
    let running = false
    let timer: ReturnType<typeof setTimeout> | undefined
    setState({ data: undefined, error: undefined })
    const schedule = () => {
      clearTimeout(timer)
      if (!stopped && document.visibilityState === "visible") timer = setTimeout(run, everyMs)
    }
    const run = async () => {
      if (running || stopped) return
      running = true
      try {
        const data = await loadRef.current()
        if (!stopped) setState({ data, error: undefined })
      } catch (error) {
        if (!stopped) setState((s) => ({ data: s.data, error }))
      } finally {
        running = false
        schedule()
      }
    }
    const onVisibility = () => (document.visibilityState === "visible" ? void run() : clearTimeout(timer))
    refreshRef.current = () => void run()
    document.addEventListener("visibilitychange", onVisibility)
    void run()
    return () => {
      stopped = true
      clearTimeout(timer)
      document.removeEventListener("visibilitychange", onVisibility)
    }
  }, [...deps, everyMs])
  return { ...state, refresh: () => refreshRef.current() }
}
