/**
 * The dashboard's browser UI: the static files `scripts/build-ui.mjs` builds from ui/ (index.html
 * and content-hashed assets), read once when the dashboard is built, and the security headers of
 * every dashboard response (a Content-Security-Policy without inline script, `nosniff`).
 *
 * The files are found beside the compiled modules (`dist/dashboard-ui/` in the package) or, when
 * sqlane runs from its sources, in the repository's `build/dashboard-ui/` (`npm run build:ui`).
 *
 * @internal
 */
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as fs from "node:fs"
import { fileURLToPath } from "node:url"

/** The built UI: its page and its assets by file name, or why there is none. */
export type Files =
  | { readonly _tag: "Built"; readonly index: Uint8Array; readonly assets: ReadonlyMap<string, Asset> }
  | { readonly _tag: "Missing"; readonly searched: ReadonlyArray<string> }

interface Asset {
  readonly body: Uint8Array
  readonly contentType: string
}

const contentTypes: Record<string, string> = {
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".txt": "text/plain; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png"
}

/** Where the built UI may be: beside dist/'s modules (the package), then the repository's build/ (sources). */
const candidates = () => [
  fileURLToPath(new URL("../../dashboard-ui/", import.meta.url)),
  fileURLToPath(new URL("../../../build/dashboard-ui/", import.meta.url))
]

/** Reads the first built UI found (synchronously: a few files, once per dashboard). */
export const load = (): Files => {
  const searched = candidates()
  for (const dir of searched) {
    if (!fs.existsSync(`${dir}index.html`)) continue
    const assets = new Map<string, Asset>()
    const assetDir = `${dir}assets/`
    for (const file of fs.existsSync(assetDir) ? fs.readdirSync(assetDir) : []) {
      const ext = /\.[a-z]+$/.exec(file)?.[0] ?? ""
      assets.set(file, { body: fs.readFileSync(assetDir + file), contentType: contentTypes[ext] ?? "application/octet-stream" })
    }
    return { _tag: "Built", index: fs.readFileSync(`${dir}index.html`), assets }
  }
  return { _tag: "Missing", searched }
}

/**
 * Headers of every dashboard response: scripts, styles and requests from the dashboard's own
 * origin only (no inline script), no framing, no MIME sniffing, no referrer.
 */
export const securityHeaders: Record<string, string> = {
  "content-security-policy":
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "x-frame-options": "DENY"
}

/** The UI's answer to a GET of `path` (below the base path), or undefined when the path is not the UI's. */
export const respond = (files: Files, path: string): HttpServerResponse.HttpServerResponse | undefined => {
  const isPage = path === "/" || path === "/index.html"
  const asset = /^\/assets\/([\w.-]+)$/.exec(path)?.[1]
  if (!isPage && asset === undefined) return undefined
  if (files._tag === "Missing") {
    return HttpServerResponse.text(
      `The dashboard's browser UI is not built (looked in ${files.searched.join(", ")}): run \`npm run build:ui\`. ` +
        "The JSON API answers below api/.",
      { status: 503 }
    )
  }
  if (isPage) {
    // The page is small and names the current assets: always revalidated.
    return HttpServerResponse.uint8Array(files.index, {
      contentType: "text/html; charset=utf-8",
      headers: { "cache-control": "no-cache" }
    })
  }
  const found = files.assets.get(asset!)
  if (found === undefined) return HttpServerResponse.text("not found", { status: 404 })
  // Content-hashed names: a new build has new names, so an asset never changes.
  return HttpServerResponse.uint8Array(found.body, {
    contentType: found.contentType,
    headers: { "cache-control": "public, max-age=31536000, immutable" }
  })
}
