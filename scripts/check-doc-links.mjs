// Checks the relative links of README.md and docs/*.md: every linked file exists, and every
// `#anchor` names a heading (GitHub's slugs) or an `<a id>` of the page it points to.
// Links to http(s) and mailto are not followed: the check runs offline. Exits 1 on a broken link.
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs"
import * as path from "node:path"

const root = path.resolve(import.meta.dirname, "..")
const pages = ["README.md", ...readdirSync(path.join(root, "docs")).filter((f) => f.endsWith(".md")).map((f) => `docs/${f}`)]

/** The text outside fenced code blocks. */
const outsideFences = (text) => text.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, "")

/** The text outside fenced code blocks and inline code, where links are links. */
const prose = (text) => outsideFences(text).replace(/`[^`\n]*`/g, "")

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to dashes, repeats numbered. */
const anchors = (text) => {
  const seen = new Map()
  const result = new Set()
  for (const [, heading] of outsideFences(text).matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const base = heading
      .replace(/`/g, "")
      .replace(/\[([^\]]*)\]\([^)]*\)/g, "$1")
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, "")
      .replace(/\s/g, "-")
    const n = seen.get(base) ?? 0
    seen.set(base, n + 1)
    result.add(n === 0 ? base : `${base}-${n}`)
  }
  for (const [, id] of text.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) result.add(id)
  return result
}

const broken = []
for (const page of pages) {
  const text = readFileSync(path.join(root, page), "utf8")
  for (const [, target] of prose(text).matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
    if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue
    const [file, anchor] = target.split("#", 2)
    const resolved = file ? path.resolve(path.dirname(path.join(root, page)), decodeURI(file)) : path.join(root, page)
    if (!existsSync(resolved)) {
      broken.push(`${page}: ${target} (no such file)`)
      continue
    }
    if (anchor !== undefined && statSync(resolved).isFile() && resolved.endsWith(".md")) {
      if (!anchors(readFileSync(resolved, "utf8")).has(anchor)) broken.push(`${page}: ${target} (no such heading)`)
    }
  }
}

if (broken.length > 0) {
  console.error(`${broken.length} broken link(s):\n  ${broken.join("\n  ")}`)
  process.exit(1)
}
console.log(`links checked: ${pages.length} pages`)
