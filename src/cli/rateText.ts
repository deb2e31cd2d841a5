/**
 * Rate limits as the `sqlane limit` command reads and prints them: `STARTS/PERIOD`, such as
 * `100/1m` (100 starts a minute), `10/500ms`, `5000/1h`, `3/1d`.
 *
 * @internal
 */
import * as Duration from "effect/Duration"
import * as Option from "effect/Option"

/** The short units of a period, as Effect's `Duration` names them. */
const shortUnits: Readonly<Record<string, string>> = {
  ms: "millis",
  s: "seconds",
  sec: "seconds",
  m: "minutes",
  min: "minutes",
  h: "hours",
  d: "days",
  w: "weeks"
}

/** What `--rate` takes, for a message. */
export const rateForm = "STARTS/PERIOD, e.g. 100/1m (units ms, s, m, h, d, w, or a word: 100/1 minute)"

/**
 * A rate typed as `STARTS/PERIOD`: `STARTS` digits, `PERIOD` a number (1 if left out) and a unit —
 * `ms`, `s`, `m`, `h`, `d`, `w` or one Effect's `Duration` reads (`millis`, `seconds`, `minutes`…):
 * `100/1m`, `100/500ms`, `100/1.5s`, `100/m`, `100/1 minute`. Returns the rate as `Admin.setLimits`
 * takes it (its range is checked there, as a definition's), or undefined when the text is not of
 * that form.
 */
export const parseRate = (text: string): { readonly starts: number; readonly per: Duration.Duration } | undefined => {
  const match = /^\s*(\d+)\s*\/\s*(\d+(?:\.\d+)?)?\s*([a-z]+)\s*$/i.exec(text)
  if (match === null) return undefined
  const [, starts, amount, unit] = match
  const long = shortUnits[unit.toLowerCase()] ?? unit.toLowerCase()
  const per = Duration.decodeUnknown(`${amount ?? "1"} ${long}`)
  return Option.isNone(per) ? undefined : { starts: Number(starts), per: per.value }
}

/** A period in milliseconds in the largest unit that divides it: `1m`, `90s`, `1500ms`, `1d`. */
export const formatPeriod = (perMs: number): string => {
  for (const [unit, ms] of [["d", 86_400_000], ["h", 3_600_000], ["m", 60_000], ["s", 1000]] as const) {
    if (perMs % ms === 0) return `${perMs / ms}${unit}`
  }
  return `${perMs}ms`
}

/** A rate as `--rate` takes it: `100/1m`. */
export const formatRate = (rate: { readonly starts: number; readonly perMs: number }): string =>
  `${rate.starts}/${formatPeriod(rate.perMs)}`
