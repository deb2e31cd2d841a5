/**
 * Compares the leading `major.minor.patch` of a server's version string.
 *
 * @internal
 */
export const versionAtLeast = (version: string, needed: ReadonlyArray<number>): boolean => {
  const parts = (version.match(/\d+(\.\d+)*/)?.[0] ?? "0").split(".").map(Number)
  for (let i = 0; i < needed.length; i++) {
    const p = parts[i] ?? 0
    if (p !== needed[i]) return p > needed[i]
  }
  return true
}
