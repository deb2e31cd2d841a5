/**
 * Builds the dashboard's browser UI (ui/) into static files: one JavaScript bundle and one
 * stylesheet with content-hashed names, and the index.html that loads them by relative URLs.
 *
 *   node scripts/build-ui.mjs                        → build/dashboard-ui/ (running from source)
 *   node scripts/build-ui.mjs dist/dashboard-ui      → the package's copy (`npm run build`)
 */
import * as esbuild from "esbuild"
import * as fs from "node:fs"
import * as path from "node:path"

const repo = path.join(import.meta.dirname, "..")
const outDir = path.resolve(repo, process.argv[2] ?? "build/dashboard-ui")

fs.rmSync(outDir, { recursive: true, force: true })
const result = await esbuild.build({
  entryPoints: { app: path.join(repo, "ui", "main.ts") },
  outdir: path.join(outDir, "assets"),
  entryNames: "[name]-[hash]",
  bundle: true,
  minify: true,
  format: "esm",
  target: ["es2020", "chrome100", "firefox100", "safari15"],
  legalComments: "linked",
  metafile: true,
  logLevel: "warning"
})
const outputs = Object.keys(result.metafile.outputs).map((file) => path.basename(file))
const js = outputs.find((f) => f.endsWith(".js"))
const css = outputs.find((f) => f.endsWith(".css"))
if (js === undefined || css === undefined) throw new Error(`build-ui: expected one .js and one .css, got ${outputs.join(", ")}`)
const template = fs.readFileSync(path.join(repo, "ui", "index.html"), "utf8")
fs.writeFileSync(
  path.join(outDir, "index.html"),
  template.replace("{{css}}", `assets/${css}`).replace("{{js}}", `assets/${js}`)
)
const size = (f) => fs.statSync(path.join(outDir, "assets", f)).size
console.log(`dashboard UI → ${path.relative(repo, outDir) || "."}: ${js} ${size(js)} B, ${css} ${size(css)} B`)
