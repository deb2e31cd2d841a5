/** How times, durations, counts, JSON text and errors are shown. */
import { ApiError, type BoundedCount } from "./api"

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

/**
 * Text from the queue set apart inside a longer text (U+2068 FIRST STRONG ISOLATE … U+2069 POP
 * DIRECTIONAL ISOLATE): a name holding right-to-left text or a U+202E override cannot reorder the
 * text after it. In markup, `<bdi>` does the same.
 */
export const isolate = (text: string): string => `\u2068${text}\u2069`

/**
 * An error as one line of text. A parameter the API could not decode (`HttpApiDecodeError`, whose
 * `message` is the whole schema) is named with the first issue's own message, when that is short.
 */
export const errorText = (e: unknown): string => {
  if (e instanceof ApiError && e.body._tag === "HttpApiDecodeError") {
    const issues = (e.body as { readonly issues?: unknown }).issues
    const first = (Array.isArray(issues) ? issues[0] : undefined) as { readonly path?: unknown; readonly message?: unknown } | undefined
    const path = Array.isArray(first?.path) && first.path.length > 0 ? first.path.join(".") : "a parameter"
    const message = typeof first?.message === "string" && first.message.length <= 120 && !first.message.includes("\n")
      ? `: ${first.message}`
      : ""
    return `the server refused ${path}${message}`
  }
  return e instanceof Error ? e.message : String(e)
}
