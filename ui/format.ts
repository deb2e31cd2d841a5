/** How times, durations, counts and JSON text are shown. */
import type { BoundedCount } from "./api"

/** A duration in ms as `850 ms`, `12.5 s`, `4 min`, `3 h`, `2 d`. */
export const duration = (ms: number | null | undefined): string => {
  if (ms === null || ms === undefined || !Number.isFinite(ms)) return "—"
  const a = Math.abs(ms)
  if (a < 1000) return `${Math.round(ms)} ms`
  if (a < 60_000) return `${(ms / 1000).toFixed(1)} s`
  if (a < 3_600_000) return `${Math.round(ms / 60_000)} min`
  if (a < 86_400_000) return `${(ms / 3_600_000).toFixed(1)} h`
  return `${(ms / 86_400_000).toFixed(1)} d`
}

/** An ISO time as local `YYYY-MM-DD HH:MM:SS`, or — for null. */
export const time = (iso: string | null | undefined): string => {
  if (iso === null || iso === undefined) return "—"
  const d = new Date(iso)
  if (Number.isNaN(d.getTime())) return iso
  const p = (n: number) => String(n).padStart(2, "0")
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`
}

/** How long ago an ISO time was: `5 s ago`, `in 3 min`. */
export const ago = (iso: string | null | undefined, now = Date.now()): string => {
  if (iso === null || iso === undefined) return ""
  const ms = now - Date.parse(iso)
  if (!Number.isFinite(ms)) return ""
  return ms >= 0 ? `${duration(ms)} ago` : `in ${duration(-ms)}`
}

/** A bounded count: `10000+` when there are at least that many. */
export const count = (c: BoundedCount): string => `${c.count.toLocaleString("en-US")}${c.atLeast ? "+" : ""}`

/** JSON text pretty-printed (two spaces), or the text itself when it is not JSON. */
export const prettyJson = (text: string | null): string => {
  if (text === null) return "null"
  try {
    return JSON.stringify(JSON.parse(text), null, 2)
  } catch {
    return text
  }
}

/** A datetime-local input's value (local time) as ISO 8601, or undefined when empty or invalid. */
export const localToIso = (value: string | null): string | undefined => {
  if (value === null || value === "") return undefined
  const d = new Date(value)
  return Number.isNaN(d.getTime()) ? undefined : d.toISOString()
}

/** An error as one line of text. */
export const errorText = (e: unknown): string => (e instanceof Error ? e.message : String(e))
