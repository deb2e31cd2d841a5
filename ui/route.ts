/**
 * Hash routing (`#/jobs?name=…`): the page itself is always the one index.html at the base path,
 * so it works mounted anywhere (`/`, `/sqlane/`) with relative URLs only.
 */
import { useEffect, useState } from "preact/hooks"

export interface Route {
  /** The path after `#`, e.g. `/jobs/42`. */
  readonly path: string
  readonly params: URLSearchParams
}

export const current = (): Route => {
  const hash = location.hash.replace(/^#/, "") || "/"
  const q = hash.indexOf("?")
  return q < 0
    ? { path: hash, params: new URLSearchParams() }
    : { path: hash.slice(0, q), params: new URLSearchParams(hash.slice(q + 1)) }
}

/** The href of a route: `#/path?params` (empty params left out). */
export const href = (path: string, params: Record<string, string | undefined> = {}) => {
  const search = new URLSearchParams()
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== "") search.set(k, v)
  const text = search.toString()
  return `#${path}${text === "" ? "" : `?${text}`}`
}

export const go = (path: string, params: Record<string, string | undefined> = {}) => {
  location.hash = href(path, params)
}

export const useRoute = (): Route => {
  const [route, setRoute] = useState(current)
  useEffect(() => {
    const onChange = () => setRoute(current())
    addEventListener("hashchange", onChange)
    return () => removeEventListener("hashchange", onChange)
  }, [])
  return route
}
