// "Open in Hawtio" from jmxgate's console, in headless Chromium: the
// gateway serves Hawtio's build (`[console] hawtio`) below
// /console/hawtio/<target>/, and the link on a target's console page opens
// Hawtio already connected to that target, with the browser's own Basic
// login (no Hawtio login form, no connect step, no proxy).
//
// Run by tests/console/console_browser.rs:   node --test-reporter=spec open-in-hawtio.test.mjs
// Environment:
//   JMXGATE_URL             the gateway, http://127.0.0.1:PORT
//   JMXGATE_TARGET          the target to open
//   JMXGATE_USER, JMXGATE_PASSWORD   the gateway user (Basic)
//   JMXGATE_EXPECTED_NAME   jmxgate.test:type=Types Name, as the agent holds it
//   JMXGATE_SCREENSHOT_DIR  where screenshots go
//   CHROMIUM                the browser (default /usr/bin/chromium)

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import { chromium } from 'playwright-core'

function env(name) {
  const v = process.env[name]
  if (!v) throw new Error(`${name} is not set: run this through tests/console/console_browser.rs`)
  return v
}

const GATEWAY = env('JMXGATE_URL')
const TARGET = env('JMXGATE_TARGET')
const USER = env('JMXGATE_USER')
const PASSWORD = env('JMXGATE_PASSWORD')
const EXPECTED_NAME = env('JMXGATE_EXPECTED_NAME')
const SHOTS = env('JMXGATE_SCREENSHOT_DIR')
const WAIT = 60_000

let context
let userDataDir
/** Requests the pages tried to send anywhere but the gateway. */
const outside = []
/** What the pages' policy refused (a CSP violation is a test failure). */
const violations = []

function watch(page, label) {
  page.on('console', (m) => {
    const text = m.text()
    if (/Content.Security.Policy|Refused to/i.test(text)) violations.push(`${label}: ${text}`)
    if ((m.type() === 'error' || m.type() === 'warning') && !/GL Driver Message/.test(text)) console.log(`[${label} ${m.type()}] ${text}`)
  })
  page.on('response', (r) => {
    if (r.status() >= 400) console.log(`[${label}] HTTP ${r.status()} for ${r.request().method()} ${r.url()}`)
  })
  page.on('pageerror', (e) => console.log(`[${label} exception] ${e.stack ?? e}`))
}

before(async () => {
  mkdirSync(SHOTS, { recursive: true })
  userDataDir = mkdtempSync(join(tmpdir(), 'jmxgate-console-chromium-'))
  context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    viewport: { width: 1400, height: 900 },
    // The browser's own Basic login, as a person answers its dialog.
    httpCredentials: { username: USER, password: PASSWORD },
    args: [
      '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
      '--disable-dev-shm-usage',
    ],
  })
  const gateway = new URL(GATEWAY).host
  await context.route('**/*', (route) => {
    const u = new URL(route.request().url())
    if (u.protocol === 'data:' || u.protocol === 'blob:' || u.host === gateway) return route.continue()
    outside.push(route.request().url())
    return route.abort()
  })
})

after(async () => {
  if (outside.length) console.log(`requests outside the gateway (aborted): ${outside.join(', ')}`)
  await context?.close()
  if (userDataDir) rmSync(userDataDir, { recursive: true, force: true })
})

test('the console shows the fleet and draws a fleet answer within its policy', async () => {
  const page = context.pages()[0] ?? (await context.newPage())
  watch(page, 'console')
  await page.goto(`${GATEWAY}/console/?group=role`)
  await page.getByRole('link', { name: TARGET, exact: true }).waitFor({ timeout: WAIT })
  await page.screenshot({ path: join(SHOTS, 'console-fleet.png') })
  const top = new URLSearchParams({ mbean: 'java.lang:type=Threading', attribute: 'ThreadCount', selector: '*', op: 'top', n: '5' })
  await page.goto(`${GATEWAY}/console/answers?${top}`)
  const bar = page.locator('svg.chart rect.bar')
  await bar.first().waitFor({ timeout: WAIT })
  const box = await bar.first().boundingBox()
  assert.ok(box && box.width > 0, 'the bar is drawn')
  await page.screenshot({ path: join(SHOTS, 'console-answers.png') })
  assert.deepEqual(violations, [], 'the pages ran within their Content-Security-Policy')
})

test('Open in Hawtio lands on the target, connected, with its values', async () => {
  const page = context.pages()[0] ?? (await context.newPage())
  await page.goto(`${GATEWAY}/console/targets/${encodeURIComponent(TARGET)}`)
  const link = page.getByRole('link', { name: 'Open in Hawtio', exact: true })
  await link.waitFor({ timeout: WAIT })
  await page.screenshot({ path: join(SHOTS, 'console-target.png') })
  const [hawtio] = await Promise.all([context.waitForEvent('page', { timeout: WAIT }), link.click()])
  watch(hawtio, 'hawtio')
  await hawtio.waitForLoadState()
  const landed = new URL(hawtio.url())
  assert.ok(decodeURIComponent(landed.pathname).startsWith(`/console/hawtio/${TARGET}/`), landed.href)

  // Connected without a login form or a connection to pick: the JMX tree
  // holds the target's MBeans.
  await hawtio.goto(new URL('jmx', landed).href)
  const tree = hawtio.locator('div#jmx-tree-view')
  await tree.waitFor({ timeout: WAIT })
  assert.equal(await hawtio.locator('#connect-login-form').count(), 0, 'no Hawtio login form')
  await tree.getByRole('button', { name: 'jmxgate.test', exact: true }).first().click({ timeout: WAIT })
  await tree.getByRole('button', { name: 'Types', exact: true }).first().click({ timeout: WAIT })
  await hawtio.getByRole('navigation', { name: 'MBean Nav' }).getByRole('link', { name: 'Attributes', exact: true }).click({ timeout: WAIT })
  const table = hawtio.locator('#attribute-table-with-panel')
  const row = table.locator('tbody tr').filter({ has: hawtio.locator('td:first-child:text-is("Name")') })
  await row.locator('td').nth(1).getByText(EXPECTED_NAME, { exact: true }).waitFor({ timeout: WAIT })
  await hawtio.screenshot({ path: join(SHOTS, 'open-in-hawtio.png') })
  assert.deepEqual(violations, [], 'the pages ran within their Content-Security-Policy')
  assert.deepEqual(outside, [], 'nothing was fetched from anywhere but the gateway')
})
