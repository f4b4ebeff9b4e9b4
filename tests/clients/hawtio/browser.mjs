// Debian's headless Chromium for the console tests, as this machine runs
// it (no sandbox as root, no background networking), and what a page
// says that a test must see.

import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import { chromium } from 'playwright-core'

/** An environment variable the Rust test sets. */
export function env(name) {
  const v = process.env[name]
  if (!v) throw new Error(`${name} is not set: run this through its Rust test`)
  return v
}

/** A browser of its own (a profile of its own), with `options` for its
 * context (`httpCredentials`, `ignoreHTTPSErrors`). `close()` ends it. */
export async function browser(options = {}) {
  const userDataDir = mkdtempSync(join(tmpdir(), 'jmxgate-chromium-'))
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    viewport: { width: 1400, height: 900 },
    args: [
      '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
      '--disable-dev-shm-usage',
    ],
    ...options,
  })
  const page = context.pages()[0] ?? (await context.newPage())
  return {
    context,
    page,
    async close() {
      await context.close()
      rmSync(userDataDir, { recursive: true, force: true })
    },
  }
}

/** Logs a page's errors and refused requests; collects what its
 * Content-Security-Policy refused into `violations`. */
export function watch(page, label, violations) {
  page.on('console', (m) => {
    const text = m.text()
    if (/Content.Security.Policy|Refused to/i.test(text)) violations.push(`${label}: ${text}`)
    if ((m.type() === 'error' || m.type() === 'warning') && !/GL Driver Message/.test(text)) console.log(`[${label} ${m.type()}] ${text}`)
  })
  page.on('pageerror', (e) => console.log(`[${label} exception] ${e.stack ?? e}`))
}
