/** Percentiles (nearest rank on sorted samples), medians, timing and formatting. */

export const percentile = (xs: ReadonlyArray<number>, p: number): number => {
  if (xs.length === 0) return NaN
  const s = [...xs].sort((a, b) => a - b)
  const rank = Math.ceil((p / 100) * s.length)
  return s[Math.min(s.length - 1, Math.max(0, rank - 1))]
}

export const median = (xs: ReadonlyArray<number>): number => {
  if (xs.length === 0) return NaN
  const s = [...xs].sort((a, b) => a - b)
  const m = s.length >> 1
  return s.length % 2 === 1 ? s[m] : (s[m - 1] + s[m]) / 2
}

/** Monotonic time in ms; the same clock (CLOCK_MONOTONIC) in every process of the machine. */
export const nowMs = (): number => Number(process.hrtime.bigint()) / 1e6

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))

/** Numbers the way the tables show them: 3 significant digits below 100, thousands separators above. */
export const fmt = (v: number | undefined): string => {
  if (v === undefined || Number.isNaN(v)) return "—"
  if (!Number.isFinite(v)) return "∞"
  const a = Math.abs(v)
  if (a >= 100) return Math.round(v).toLocaleString("en-US")
  if (a >= 10) return v.toFixed(1)
  if (a >= 1) return v.toFixed(2)
  return v.toFixed(2)
}

/** Resolves when `done()` returns true, polling every `everyMs`; false on timeout. */
export const waitFor = async (done: () => boolean, timeoutMs: number, everyMs = 2): Promise<boolean> => {
  const end = nowMs() + timeoutMs
  while (!done()) {
    if (nowMs() > end) return false
    await sleep(everyMs)
  }
  return true
}
