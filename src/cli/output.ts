/**
 * What the `sqlane` command prints: JSON, plain text tables, ages, and long texts cut for a terminal.
 *
 * @since 0.1.0
 */
import * as Console from "effect/Console"
import type * as Admin from "../services/Admin.js"

export const printJson = (value: unknown) => Console.log(JSON.stringify(value, null, 2))

export const cell = (u: unknown): string => {
  if (u === undefined || u === null) return ""
  if (u instanceof Date) return u.toISOString()
  return String(u).replace(/\s+/g, " ")
}

/**
 * A plain text table: a header row and left-aligned columns, long cells cut at 60 characters (or at
 * `widest[i]` for column i).
 */
export const table = (
  header: ReadonlyArray<string>,
  rows: ReadonlyArray<ReadonlyArray<unknown>>,
  widest: ReadonlyArray<number | undefined> = []
): string => {
  const cells = rows.map((r) => r.map((c, i) => {
    const s = cell(c)
    const most = widest[i] ?? 60
    return s.length > most ? s.slice(0, most - 1) + "…" : s
  }))
  const widths = header.map((h, i) => Math.max(h.length, ...cells.map((r) => r[i]?.length ?? 0)))
  const line = (r: ReadonlyArray<string>) => r.map((c, i) => c.padEnd(widths[i])).join("  ").trimEnd()
  return [line(header), ...cells.map(line)].join("\n")
}

export const age = (ms: number | undefined): string => {
  if (ms === undefined) return ""
  if (ms < 1000) return `${ms}ms`
  const s = Math.floor(ms / 1000)
  if (s < 60) return `${s}s`
  const m = Math.floor(s / 60)
  if (m < 60) return `${m}m${s % 60 ? `${s % 60}s` : ""}`
  const h = Math.floor(m / 60)
  if (h < 48) return `${h}h${m % 60 ? `${m % 60}m` : ""}`
  return `${Math.floor(h / 24)}d${h % 24 ? `${h % 24}h` : ""}`
}

export const progressText = (p: Admin.Progress | undefined) =>
  p === undefined ? "" : p.message === undefined ? String(p.value) : `${p.value} ${p.message}`

export const iso = (d: Date | undefined) => (d === undefined ? null : d.toISOString())

export const summaryJson = (j: Admin.JobSummary) => ({
  id: j.id,
  name: j.name,
  state: j.state,
  attempts: j.attempts,
  priority: j.priority,
  runAt: iso(j.runAt),
  createdAt: iso(j.createdAt),
  claimedAt: iso(j.claimedAt),
  finishedAt: iso(j.finishedAt),
  workerId: j.workerId ?? null,
  lastError: j.lastError ?? null,
  progress: j.progress === undefined ? null : progressJson(j.progress)
})

export const progressJson = (p: Admin.Progress) => ({
  value: p.value,
  message: p.message ?? null,
  attempt: p.attempt,
  at: p.at
})

/** The most characters of a payload, result, message, stack or properties `jobs show` prints without `--full`. */
export const shownLength = 4_096

/** `s` as `jobs show` prints it: cut at {@link shownLength} characters (unless `full`), saying how long it is. */
export const clip = (s: string, full: boolean): string => {
  if (full || s.length <= shownLength) return s
  let cut = s.slice(0, shownLength)
  // Do not leave half a surrogate pair at the cut.
  if (/[\ud800-\udbff]$/.test(cut)) cut = cut.slice(0, -1)
  return `${cut}… (${s.length.toLocaleString("en-US")} characters; --full shows all)`
}

/** A text of several lines, each after `indent`. */
export const indented = (s: string, indent: string) => s.split("\n").map((line) => indent + line).join("\n")

/**
 * An attempt's error as `Tag: message`, the tag once: the stored message of a typed failure already
 * starts with its tag (`Boom: {…}`, see `describe`), a defect's with its name (`Error: nope`).
 */
export const withTag = (tag: string | undefined, message: string) =>
  tag === undefined || message === tag || message.startsWith(`${tag}:`) ? message : `${tag}: ${message}`
