/**
 * Strings in the text of MySQL/MariaDB statements sent unprepared (the text protocol).
 *
 * mysql2 writes a string value as a quoted literal with backslash escapes (`\'`, `\\`, `\"`, …).
 * A server whose `sql_mode` has `NO_BACKSLASH_ESCAPES` reads a backslash there as itself: the value
 * is stored changed, and a quote after a backslash ends the literal early, so the rest of the value
 * is read as SQL. mysql2 does not pass the session's mode to its escaper. {@link literal} writes a
 * literal that both modes read the same way:
 * - no backslash and no U+0000: `'…'`, with each `'` doubled (the SQL standard's escape, which
 *   both modes accept);
 * - otherwise its UTF-8 bytes in hex with a character set introducer, `_utf8mb4 X'…'`, which
 *   no mode reads differently.
 *
 * Either form is at most twice the value's UTF-8 bytes plus 11 ({@link literalBytes}). Statements
 * sent prepared (the binary protocol) carry their values apart from the text and need none of this.
 *
 * @internal
 */

const needsHex = (s: string): boolean => s.includes("\\") || s.includes("\u0000")

/** `s` as a literal read the same with and without `NO_BACKSLASH_ESCAPES`. */
export const literal = (s: string): string =>
  needsHex(s) ? `_utf8mb4 X'${Buffer.from(s, "utf8").toString("hex")}'` : `'${s.replaceAll("'", "''")}'`

/** The bytes of `literal(s)` in the statement. */
export const literalBytes = (s: string): number => {
  const bytes = Buffer.byteLength(s, "utf8")
  if (needsHex(s)) return 2 * bytes + 11
  let quotes = 0
  for (let i = s.indexOf("'"); i !== -1; i = s.indexOf("'", i + 1)) quotes++
  return bytes + quotes + 2
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
