/**
 * A headless Chromium (the Debian package's /usr/bin/chromium), driven with playwright-core, for
 * the dashboard's browser tests and screenshots. Launched with a fresh profile and without the
 * background connections Chromium makes on its own (a machine without outside network refuses
 * them, and they are no part of what is tested).
 */
import * as fs from "node:fs"
import { type Browser, chromium } from "playwright-core"

export const chromiumPath = process.env.SQLANE_CHROMIUM ?? "/usr/bin/chromium"

/** Why the browser tests cannot run here, or undefined when they can. */
export const chromiumMissing = (): string | undefined =>
  fs.existsSync(chromiumPath)
    ? undefined
    : `${chromiumPath} not found: install Chromium (Debian: apt-get install chromium) or set SQLANE_CHROMIUM`

export interface Launched {
  readonly browser: Browser
  readonly close: () => Promise<void>
}

/**
 * Starts Chromium. Each launch runs on a fresh user-data-dir: playwright-core makes a temporary one
 * (it refuses a `--user-data-dir` argument) and removes it when the browser closes.
 */
export const launchChromium = async (): Promise<Launched> => {
  const browser = await chromium.launch({
    executablePath: chromiumPath,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync"
    ]
  })
  return {
    browser,
    close: () => browser.close().catch(() => {})
  }
}
