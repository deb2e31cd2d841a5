/**
 * Turning values sqlane did not make — payloads, handler results, errors, names — into what a row
 * can hold, in one place.
 *
 * - {@link toJson}: a value as JSON text, or why not (and where): values `JSON.stringify` would
 *   change are refused, never silently changed — NaN and ±Infinity and an invalid `Date` (JSON would
 *   write `null`), a `Map`, `Set`, `WeakMap` or `WeakSet` (`{}`), an array hole or an array element
 *   that is `undefined`, a function or a symbol (`null`) — and so are bigints, cycles and nesting
 *   too deep to serialize. An object property whose value is `undefined`, a function or a symbol is
 *   left out, as `JSON.stringify` does (an absent property). JSON text never holds a raw U+0000 or a
 *   lone surrogate: `JSON.stringify` writes them as the escapes `\u0000` and `\ud800`, which `text`
 *   and `LONGTEXT` columns store as they are, so they round-trip losslessly on every database.
 * - {@link errorJson}: a typed failure's encoded value as JSON text for its attempt's record,
 *   leniently: NaN and ±Infinity as the strings `"NaN"`, `"Infinity"`, `"-Infinity"`, bigints as
 *   strings of digits.
 * - {@link text}: a free text (an error message) as a column can hold it on every database: U+0000
 *   (PostgreSQL `text` cannot hold it) and lone surrogates (not UTF-8: the drivers would write
 *   U+FFFD) become U+FFFD, and it is cut to a length.
 * - {@link describe}: a one-line description of any thrown or failed value, that never throws
 *   (`[unprintable value]` for one that cannot be read at all, such as a `Proxy` whose traps throw).
 * - {@link guardCause}: a cause whose values Effect itself cannot print, with stand-ins that it can
 *   (Effect's logger and `Cause.pretty` would throw, and so would a fiber ending with it).
 * - {@link defectStack} and {@link ownProperties}: a defect's stack and its own enumerable
 *   properties, bounded and JSON-safe, for its attempt's record.
 * - {@link checkIdentifier}: why a job name or key cannot be stored, if it cannot.
 *
 * @internal
 */
import * as Cause from "effect/Cause"
import * as MysqlText from "./mysqlText.js"
import type { Finish } from "./driver/Driver.js"

/** The most characters of an error message stored per attempt (in `last_error` and in the history). */
export const maxMessageLength = 16_384

/** The most characters of a typed failure's JSON stored in an attempt's record; larger ones are left out. */
export const maxErrorJsonLength = 65_536

/** The most characters (UTF-16 code units) of a job name, unique key or mutex key: `VARCHAR(255)`. */
export const maxIdentifierLength = 255

// A UTF-16 code unit that is half of a surrogate pair without its other half.
const loneSurrogate = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/
const loneSurrogates = new RegExp(loneSurrogate.source, "g")

/** What {@link toJson} could not serialize, and where (`$` is the value itself, `$.a[0]` a path). */
export interface NotJson {
  readonly path: string
  readonly reason: string
}

/** Why a value would change in JSON, checked before its `toJSON` (a `Date`'s gives `null` when invalid). */
const changedBeforeToJson = (value: unknown): string | undefined =>
  value instanceof Date && Number.isNaN(value.getTime()) ? "an invalid Date (JSON would store null)" : undefined

/** Why a value would change in JSON, checked after its `toJSON`. */
const changedAfterToJson = (value: unknown): string | undefined =>
  value instanceof Map
    ? "a Map (JSON would store {}); encode it with a schema such as Schema.ReadonlyMap"
    : value instanceof Set
    ? "a Set (JSON would store {}); encode it with a schema such as Schema.ReadonlySet"
    : value instanceof WeakMap || value instanceof WeakSet
    ? "a WeakMap or WeakSet (JSON would store {})"
    : undefined

/** Why an array element would change in JSON (`null`): `undefined`, a function or a symbol. */
const changedInArray = (value: unknown): string | undefined =>
  value === undefined || typeof value === "function" || typeof value === "symbol"
    ? `${value === undefined ? "undefined" : `a ${typeof value}`} in an array (JSON would store null)`
    : undefined

const keyPath = (path: string, key: string | number) =>
  typeof key === "number" ? `${path}[${key}]` : /^[A-Za-z_$][\w$]*$/.test(key) ? `${path}.${key}` : `${path}[${JSON.stringify(key)}]`

/**
 * A path of keys (a `ParseIssue`'s, as `ParseResult.ArrayFormatter` gives it) as the JSON path
 * {@link toJson} writes: `["items", 2, "qty"]` is `$.items[2].qty`, `[]` is `$`.
 */
export const jsonPath = (keys: ReadonlyArray<PropertyKey>): string => {
  let path = "$"
  for (const key of keys) path = typeof key === "symbol" ? `${path}[${String(key)}]` : keyPath(path, key)
  return path.length <= 300 ? path : `${path.slice(0, 150)}…${path.slice(-100)}`
}

/**
 * Finds the first value JSON cannot hold as it is, walking iteratively (no stack to overflow).
 * Only called once `JSON.stringify` has refused, so it costs nothing on the common path.
 */
const findNotJson = (root: unknown): NotJson => {
  const ancestors = new Map<object, number>()
  // [value, path, depth, exit marker, an array's element (0: no, 1: yes, 2: a hole)]
  const stack: Array<readonly [unknown, string, number, boolean, 0 | 1 | 2]> = [[root, "$", 0, false, 0]]
  let deepest: readonly [string, number] = ["$", 0]
  while (stack.length > 0) {
    const [raw, path, depth, exit, element] = stack.pop()!
    if (exit) {
      ancestors.delete(raw as object)
      continue
    }
    if (element === 2) return { path, reason: "an array hole (JSON would store null)" }
    const before = changedBeforeToJson(raw)
    if (before !== undefined) return { path, reason: before }
    let value = raw
    if (value !== null && typeof value === "object" && typeof (value as any).toJSON === "function") {
      try {
        value = (value as any).toJSON()
      } catch (e) {
        return { path, reason: `its toJSON threw: ${describe(e)}` }
      }
    }
    if (typeof value === "number" && !Number.isFinite(value)) return { path, reason: `${value} is not a JSON number` }
    if (typeof value === "bigint") return { path, reason: `a bigint (${value}n) is not a JSON number; use Schema.BigInt` }
    const inArray = element === 1 ? changedInArray(value) : undefined
    if (inArray !== undefined) return { path, reason: inArray }
    if (value === null || typeof value !== "object") continue
    const after = changedAfterToJson(value)
    if (after !== undefined) return { path, reason: after }
    if (ancestors.has(value)) return { path, reason: "a cyclic reference" }
    if (depth > deepest[1]) deepest = [path, depth]
    ancestors.set(value, depth)
    stack.push([value, path, depth, true, 0])
    if (Array.isArray(value)) {
      for (let i = value.length - 1; i >= 0; i--) {
        stack.push([value[i], keyPath(path, i), depth + 1, false, i in value ? 1 : 2])
      }
    } else {
      const keys = Object.keys(value)
      for (let i = keys.length - 1; i >= 0; i--) {
        stack.push([(value as any)[keys[i]], keyPath(path, keys[i]), depth + 1, false, 0])
      }
    }
  }
  return { path: deepest[0], reason: `nested ${deepest[1]} levels deep, deeper than JSON.stringify can go` }
}

/**
 * The replacer of the second, strict pass: throws at the first value JSON would change (then
 * {@link findNotJson} says which and where). `this` is the holder of `key`: its value before `toJSON`.
 */
function refuseChanged(this: any, key: string, value: unknown) {
  switch (typeof value) {
    case "string":
    case "boolean":
      return value
    case "number":
      if (!Number.isFinite(value)) throw new RangeError("not finite")
      return value
    case "object":
      if (value === null) {
        if (changedBeforeToJson(this[key]) !== undefined) throw new RangeError("changed")
        if (Array.isArray(this) && !(key in this)) throw new RangeError("a hole") // the replacer sees a hole as undefined
        return value
      }
      if (changedAfterToJson(value) !== undefined) throw new RangeError("changed")
      return value
    default:
      // undefined, a function or a symbol: left out of an object, `null` in an array.
      if (Array.isArray(this)) throw new RangeError("changed")
      return value
  }
}

/**
 * A value as JSON text. Refused (with the path of the first offending value): NaN and ±Infinity
 * (JSON would store `null` and the value would change), bigints, cycles, nesting too deep for
 * `JSON.stringify`, and a value that is not JSON at all (`undefined`, a function). Never throws.
 */
export const toJson = (value: unknown): { readonly json: string } | NotJson => {
  try {
    // What JSON would change comes out as `null` (NaN, ±Infinity, an invalid Date, holes and
    // undefined, functions and symbols in arrays) or `{}` (Map, Set): only JSON with one of them in
    // it is checked again with the (three times slower) replacer that refuses them.
    const plain = JSON.stringify(value)
    const json = plain !== undefined && (plain.includes("null") || plain.includes("{}"))
      ? JSON.stringify(value, refuseChanged)
      : plain
    if (json !== undefined) return { json }
    return { path: "$", reason: `${typeof value} is not a JSON value` }
  } catch {
    try {
      const found = findNotJson(value)
      // A path through deep nesting is long: keep its two ends.
      return found.path.length <= 300
        ? found
        : { ...found, path: `${found.path.slice(0, 150)}…${found.path.slice(-100)}` }
    } catch (e) {
      return { path: "$", reason: describe(e) }
    }
  }
}

const lenientNumbers = (_key: string, value: unknown) =>
  typeof value === "number" ? (Number.isFinite(value) ? value : String(value)) : typeof value === "bigint" ? String(value) : value

/**
 * A typed failure's encoded value as JSON text for its attempt's record (for reading, not decoding),
 * or `null` when it has none (`undefined`, a cycle, a `toJSON` that throws): NaN and ±Infinity are
 * written as the strings `"NaN"`, `"Infinity"` and `"-Infinity"` (JSON would write `null`), bigints
 * as strings of digits. Never throws.
 */
export const errorJson = (value: unknown): string | null => {
  try {
    const plain = JSON.stringify(value)
    return (plain !== undefined && plain.includes("null") ? JSON.stringify(value, lenientNumbers) : plain) ?? null
  } catch {
    try {
      return JSON.stringify(value, lenientNumbers) ?? null // a bigint threw
    } catch {
      return null
    }
  }
}

/**
 * A free text as every database stores it the same: U+0000 and lone surrogates replaced by
 * U+FFFD, cut to `max` characters (with a note of how long it was).
 */
export const text = (s: string, max = maxMessageLength): string => {
  let out = s.includes("\u0000") ? s.replaceAll("\u0000", "\uFFFD") : s
  if (loneSurrogate.test(out)) out = out.replace(loneSurrogates, "\uFFFD")
  if (out.length > max) {
    const note = `… (cut: ${s.length} characters)`
    let cut = out.slice(0, Math.max(0, max - note.length))
    // Do not leave half a surrogate pair at the cut.
    if (/[\ud800-\udbff]$/.test(cut)) cut = cut.slice(0, -1)
    out = cut + note
  }
  return out
}

/** What {@link describe} says of a value that cannot be read at all. */
export const unprintable = "[unprintable value]"

/**
 * A one-line description of a thrown or failed value: `Name: message` for errors, `Tag: message`
 * for tagged errors with a message, the JSON of other values (bigints as digits), else `String(u)`,
 * else {@link unprintable}. Never throws, whatever getters, prototypes or traps the value has.
 */
export const describe = (u: unknown): string => {
  if (standIns.has(u as object)) return unprintable
  try {
    if (u === undefined) return "undefined"
    if (typeof u === "string") return u
    if (u instanceof Error) return u.message ? `${u.name}: ${u.message}` : String(u.name)
    if (typeof u === "object" && u !== null && "message" in u && typeof (u as any).message === "string") {
      const tag = "_tag" in u && typeof (u as any)._tag === "string" ? `${(u as any)._tag}: ` : ""
      return `${tag}${(u as any).message}`
    }
  } catch {
    // a getter threw: fall through
  }
  try {
    const json = JSON.stringify(u, (_k, v) => (typeof v === "bigint" ? v.toString() : v))
    if (json !== undefined) return json
  } catch {
    // cyclic, or a toJSON threw: fall through
  }
  try {
    return String(u)
  } catch {
    // e.g. an object without a prototype
  }
  try {
    return Object.prototype.toString.call(u)
  } catch {
    // e.g. a Proxy whose traps throw
    return unprintable
  }
}

/** The values {@link guardCause} stood in for, by their stand-in. */
const standIns = new WeakMap<object, unknown>()

/** Whether Effect can print `u` (its logger, `Cause.pretty`); primitives always. */
const printable = (u: unknown): boolean => {
  if ((typeof u !== "object" && typeof u !== "function") || u === null) return true
  try {
    Cause.pretty(Cause.die(u))
    return true
  } catch {
    return false
  }
}

const standInFor = (u: unknown): Error => {
  const standIn = new Error(unprintable)
  standIn.name = "UnprintableValue"
  standIns.set(standIn, u)
  return standIn
}

const replaceUnprintable = (cause: Cause.Cause<unknown>): Cause.Cause<unknown> => {
  switch (cause._tag) {
    case "Fail":
      return printable(cause.error) ? cause : Cause.fail(standInFor(cause.error))
    case "Die":
      return printable(cause.defect) ? cause : Cause.die(standInFor(cause.defect))
    case "Sequential":
      return Cause.sequential(replaceUnprintable(cause.left), replaceUnprintable(cause.right))
    case "Parallel":
      return Cause.parallel(replaceUnprintable(cause.left), replaceUnprintable(cause.right))
    default:
      return cause
  }
}

/**
 * `cause` as it is when Effect can print it (nearly always), else with each failure or defect it
 * cannot print (a `Proxy` whose traps throw, a value whose `toString` and JSON both throw) replaced by
 * an `Error` saying {@link unprintable}. A fiber that ends with a cause Effect cannot print never
 * tells its observers (its exit is logged first, when the log level lets `Debug` through), and
 * `Cause.pretty` throws on it. {@link originalOf} gives the value a stand-in replaced.
 */
export const guardCause = <E>(cause: Cause.Cause<E>): Cause.Cause<E> => {
  try {
    Cause.pretty(cause)
    return cause
  } catch {
    return replaceUnprintable(cause) as Cause.Cause<E>
  }
}

/** The value a stand-in of {@link guardCause} replaced, or `u` itself. */
export const originalOf = (u: unknown): unknown => (standIns.has(u as object) ? standIns.get(u as object) : u)

/** `Cause.pretty`, or the description of its first failure or defect when Effect cannot print it. Never throws. */
export const prettyCause = (cause: Cause.Cause<unknown>): string => {
  try {
    return Cause.pretty(cause)
  } catch {
    try {
      return describe(Cause.squash(cause))
    } catch {
      return unprintable
    }
  }
}

/** The most characters of a defect's stack stored in its attempt's record. */
export const maxStackLength = 4_096

/** The most characters of a defect's own properties (as JSON) stored in its attempt's record. */
export const maxPropertiesLength = 4_096

/** The most characters of one property's value (as JSON) stored in an attempt's record. */
const maxPropertyLength = 1_024

/**
 * A defect's `stack` (an `Error`'s, or any object's string `stack`), as {@link text} stores it, cut
 * at {@link maxStackLength} characters; `undefined` when it has none or it cannot be read.
 */
export const defectStack = (u: unknown): string | undefined => {
  if ((typeof u !== "object" && typeof u !== "function") || u === null) return undefined
  try {
    const stack = (u as { stack?: unknown }).stack
    return typeof stack === "string" && stack.length > 0 ? text(stack, maxStackLength) : undefined
  } catch {
    return undefined // a getter that throws
  }
}

/**
 * A thrown object's own enumerable properties (an error's `code`, `errno`, `syscall`…) as JSON
 * values: a value JSON cannot hold is recorded as its description (a string), one whose JSON is
 * longer than 1,024 characters as that JSON cut (a string), one whose getter throws as
 * {@link unprintable}. At most {@link maxPropertiesLength} characters of JSON in all: the
 * properties that do not fit are left out, and the key `"…"` says how many. `undefined` when it has
 * none or they cannot be listed.
 */
export const ownProperties = (u: unknown): Record<string, unknown> | undefined => {
  if ((typeof u !== "object" && typeof u !== "function") || u === null || standIns.has(u)) return undefined
  let keys: ReadonlyArray<string>
  try {
    keys = Object.keys(u)
  } catch {
    return undefined // a Proxy whose ownKeys trap throws
  }
  if (keys.length === 0) return undefined
  const out: Record<string, unknown> = {}
  let length = 2 // {}
  let kept = 0
  for (const key of keys) {
    let value: unknown
    try {
      value = (u as Record<string, unknown>)[key]
    } catch {
      value = unprintable
    }
    const json = errorJson(value)
    const entry: unknown = json === null
      ? text(describe(value), maxPropertyLength)
      : json.length > maxPropertyLength
      ? text(json, maxPropertyLength)
      : JSON.parse(json)
    const size = JSON.stringify(key).length + 1 + JSON.stringify(entry).length + (kept > 0 ? 1 : 0)
    // Room for the note of what was left out.
    if (length + size > maxPropertiesLength - 40) break
    // A key such as `__proto__` is a property like any other.
    Object.defineProperty(out, key, { value: entry, enumerable: true, writable: true, configurable: true })
    length += size
    kept++
  }
  if (kept < keys.length) out["…"] = `${keys.length - kept} more ${keys.length - kept === 1 ? "property" : "properties"} left out`
  return out
}

/**
 * Why a job name, unique key or mutex key cannot be stored the same on every database, or
 * `undefined` when it can: 1–255 UTF-16 code units (the `VARCHAR(255)` of MySQL/MariaDB counts
 * characters, so a string of 255 code units always fits), no U+0000 (PostgreSQL `text` cannot
 * hold it), no lone surrogate (not UTF-8: the drivers would store U+FFFD, and two different keys
 * would become one). Quotes, `%`, `_` and backslashes are ordinary characters: every value is a
 * parameter, never part of the SQL text or of a `LIKE` pattern.
 */
export const checkIdentifier = (value: unknown): string | undefined => {
  if (typeof value !== "string") return `must be a string, got ${value === null ? "null" : typeof value}`
  if (value.length === 0) return "must not be empty"
  if (value.length > maxIdentifierLength) {
    return `is ${value.length} UTF-16 code units long (its JavaScript length); the limit is ${maxIdentifierLength} (VARCHAR(255))`
  }
  if (value.includes("\u0000")) return "must not contain U+0000 (PostgreSQL text cannot hold it)"
  if (loneSurrogate.test(value)) return "must not contain a lone surrogate (it is not UTF-8)"
  return undefined
}

/**
 * Why a job name cannot be used, if it cannot: as {@link checkIdentifier}, and no trailing space —
 * MySQL/MariaDB compare names ignoring trailing spaces (PAD SPACE), so `"a "` and `"a"` would be one
 * name there (a worker of one would claim the other's jobs) and two on PostgreSQL.
 */
export const checkJobName = (value: unknown): string | undefined =>
  checkIdentifier(value) ?? (typeof value === "string" && value.endsWith(" ")
    ? "must not end with a space (MySQL/MariaDB compare names ignoring trailing spaces)"
    : undefined)

/** Room left in a statement for everything but an attempt's record (its SQL text, ids, times). */
const recordOverheadBytes = 65_536

/**
 * The end of an attempt as the database can store it in one statement: when its record (last
 * error, error history, result) is larger than the statement limit (`maxStatementBytes`,
 * MySQL/MariaDB `max_allowed_packet`; `undefined`: no limit, PostgreSQL), the job is dead-lettered
 * with a last error saying so, and its history and result are left as they were. Without this the
 * server would close the connection on the write (MySQL/MariaDB answer an oversized packet by
 * hanging up, which looks like a network error), and the write would be retried forever.
 */
export const fitRecord = (finish: Finish, maxStatementBytes: number | undefined): Finish => {
  if (maxStatementBytes === undefined) return finish
  const units = (finish.lastError?.length ?? 0) + (finish.errors?.length ?? 0) + (finish.result?.length ?? 0)
  const limit = maxStatementBytes - recordOverheadBytes
  // The record travels in the statement's text, as literals (mysqlText): at most 3 bytes per UTF-16
  // code unit (UTF-8, or an ASCII quote or backslash written twice) and 36 per string. Count bytes
  // only for records that may be too large.
  if (units * 3 + 108 <= limit) return finish
  const bytes = (finish.lastError === null ? 0 : MysqlText.literalBytes(finish.lastError)) +
    (finish.errors === null ? 0 : MysqlText.literalBytes(finish.errors)) +
    (finish.result === null ? 0 : MysqlText.literalBytes(finish.result))
  if (bytes <= limit) return finish
  const what = finish.state === "completed" ? "its result" : "its error record"
  return unrecorded(
    finish,
    `${what} takes ${bytes} bytes in a statement; this database takes at most ${limit} in one statement ` +
      `(max_allowed_packet less ${recordOverheadBytes})`
  )
}

/**
 * The end of an attempt the database could not record, as the dead letter written in its place:
 * `last_error` says why (`sqlane could not record this attempt's end: <why>`, a free text as `text`
 * stores it), and the job's error history and result are left as they were.
 */
export const unrecorded = (finish: Finish, why: string): Finish => ({
  ...finish,
  state: "dead",
  runAtUs: null,
  finishedAtUs: finish.finishedAtUs ?? finish.endedAtUs ?? finish.runAtUs ?? 0,
  lastError: text(`sqlane could not record this attempt's end: ${why}`),
  errors: null,
  result: null
})
