/**
 * Strings in the text of MySQL/MariaDB statements sent unprepared (the text protocol).
 *
 * mysql2 writes a string value as a quoted literal with backslash escapes (`\'`, `\\`, `\"`, …).
 * A server whose `sql_mode` has `NO_BACKSLASH_ESCAPES` reads a backslash there as itself: the value
 * is stored changed, and a quote after a backslash ends the literal early, so the rest of the value
 * is read as SQL. mysql2 does not pass the session's mode to its escaper. {@link literal} writes a
 * literal that both modes read the same way:
 * - no backslash: `'…'`, with each `'` doubled (the SQL standard's escape, which both modes accept;
 *   every other character, U+0000 included, stands for itself in both);
 * - with backslashes: each written as `\%`, which both modes read as the two characters `\%` (in
 *   the default mode `\%` is kept as it is outside patterns), and turned back by
 *   `REPLACE('…', '\%', LEFT('\%', 1))` — the way sql-escaper (mysql2's escaper) writes a backslash
 *   when it is told the mode. A `\%` already in the value becomes `\%%` and comes back as `\%`.
 *
 * Both forms keep the connection's character set and collation, like mysql2's own literals, so
 * they mix in one `UNION` (a literal with a character set introducer would take the set's default
 * collation and fail there with `ER_CANT_AGGREGATE_NCOLLATIONS`). A literal takes the value's
 * UTF-8 bytes plus one per `'` and per backslash, plus 2 (no backslash) or 32 (one `REPLACE`);
 * a value cut in pieces (see `backslashesPerPiece`) 8 more for `CONCAT()` and 34 per further piece
 * ({@link literalBytes}). Statements sent prepared (the binary protocol) carry their values apart
 * from the text and need none of this.
 *
 * @internal
 */

const replaceHead = "REPLACE('"
const replaceTail = "', '\\%', LEFT('\\%', 1))"

/**
 * The most backslashes in one `REPLACE`: MariaDB's `REPLACE` takes time quadratic in the matches it
 * replaces (200,000 backslashes in one: 2 s), so a longer value is cut after every 1,024th
 * backslash (an ASCII character: no surrogate pair is split) and its pieces joined by `CONCAT`,
 * which keeps their character set and collation.
 */
const backslashesPerPiece = 1024

const count = (s: string, c: string): number => {
  let n = 0
  for (let i = s.indexOf(c); i !== -1; i = s.indexOf(c, i + 1)) n++
  return n
}

/** `s` cut after every `backslashesPerPiece`-th backslash. */
const pieces = (s: string): Array<string> => {
  const out: Array<string> = []
  let start = 0
  let n = 0
  for (let i = s.indexOf("\\"); i !== -1; i = s.indexOf("\\", i + 1)) {
    if (++n === backslashesPerPiece) {
      out.push(s.slice(start, i + 1))
      start = i + 1
      n = 0
    }
  }
  if (start < s.length || out.length === 0) out.push(s.slice(start))
  return out
}

const pieceLiteral = (s: string): string => {
  const quoted = s.replaceAll("'", "''")
  return s.includes("\\") ? `${replaceHead}${quoted.replaceAll("\\", "\\%")}${replaceTail}` : `'${quoted}'`
}

const pieceBytes = (s: string): number => {
  const bytes = Buffer.byteLength(s, "utf8") + count(s, "'")
  const backslashes = count(s, "\\")
  return backslashes === 0 ? bytes + 2 : bytes + backslashes + replaceHead.length + replaceTail.length
}

/** `s` as a literal read the same with and without `NO_BACKSLASH_ESCAPES`. */
export const literal = (s: string): string => {
  if (!s.includes("\\")) return pieceLiteral(s)
  const parts = pieces(s)
  return parts.length === 1 ? pieceLiteral(parts[0]) : `CONCAT(${parts.map(pieceLiteral).join(", ")})`
}

/** The bytes of `literal(s)` in the statement. */
export const literalBytes = (s: string): number => {
  if (!s.includes("\\")) return pieceBytes(s)
  const parts = pieces(s)
  let bytes = 0
  for (const p of parts) bytes += pieceBytes(p)
  return parts.length === 1 ? bytes : bytes + "CONCAT()".length + 2 * (parts.length - 1)
}

/** A value mysql2's escaper writes as it is (its `toSqlString` protocol). */
interface Raw {
  readonly toSqlString: () => string
}

/** Statement values with every string turned into a {@link literal}, for mysql2's text protocol. */
export const values = (params: ReadonlyArray<unknown>): Array<unknown> =>
  params.map((p): unknown => {
    if (typeof p !== "string") return p
    const text = literal(p)
    return { toSqlString: () => text } satisfies Raw
  })
