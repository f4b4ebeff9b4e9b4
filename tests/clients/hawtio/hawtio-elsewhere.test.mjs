// "Open in Hawtio" for a Hawtio elsewhere (`[console] hawtio` a URL), in
// headless Chromium: Hawtio (@hawtio/react, unmodified) on a server of its
// own with its proxy (server.mjs, as Hawtio's Java backend), the viewer's
// connections imported from the console into Hawtio's Connect page, then
// the link on a target's console page opening Hawtio at that target's
// connection, through the gateway, showing the agent's values.
//
// Run by tests/console/console_browser.rs:   node --test-reporter=spec hawtio-elsewhere.test.mjs
// Environment:
//   JMXGATE_URL             the gateway, http://127.0.0.1:PORT
//   JMXGATE_HAWTIO_PORT     where Hawtio listens (the gateway's [console] hawtio names it)
//   HAWTIO_BUNDLE_DIR       Hawtio's build (build.mjs)
//   JMXGATE_TARGET          the target to open
//   JMXGATE_USER, JMXGATE_PASSWORD   the gateway user (Basic)
//   JMXGATE_EXPECTED_NAME   jmxgate.test:type=Types Name, as the agent holds it
//   JMXGATE_SCREENSHOT_DIR  where screenshots go
//   CHROMIUM                the browser (default /usr/bin/chromium)

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import { browser, env, watch } from './browser.mjs'
import { startConsoleServer } from './server.mjs'

const GATEWAY = env('JMXGATE_URL')
const HAWTIO_PORT = Number(env('JMXGATE_HAWTIO_PORT'))
const BUNDLE = env('HAWTIO_BUNDLE_DIR')
const TARGET = env('JMXGATE_TARGET')
const USER = env('JMXGATE_USER')
const PASSWORD = env('JMXGATE_PASSWORD')
const EXPECTED_NAME = env('JMXGATE_EXPECTED_NAME')
const SHOTS = env('JMXGATE_SCREENSHOT_DIR')
const WAIT = 60_000

const violations = []
let hawtio
let person

before(async () => {
  mkdirSync(SHOTS, { recursive: true })
  // No preset connection: the target's comes from the console.
  hawtio = await startConsoleServer({ bundleDir: BUNDLE, gateway: GATEWAY, target: null, port: HAWTIO_PORT })
  person = await browser({ httpCredentials: { username: USER, password: PASSWORD, origin: GATEWAY } })
  watch(person.page, 'console', violations)
})

after(async () => {
  await person?.close()
  await hawtio?.close()
})

test('the viewer imports their connections, and Open in Hawtio lands on the target', async () => {
  const page = person.page
  // The connections file, as the console's link downloads it.
  const file = join(mkdtempSync(join(tmpdir(), 'jmxgate-connections-')), 'jmxgate-connections.json')
  const got = await person.context.request.get(`${GATEWAY}/console/hawtio-connections.json`)
  assert.equal(got.status(), 200)
  const connections = await got.json()
  assert.ok(connections.some((c) => c.name === TARGET), JSON.stringify(connections))
  writeFileSync(file, JSON.stringify(connections))

  // Hawtio's own Connect page: Import connections.
  await page.goto(`${hawtio.url}connect/remote`)
  const toolbar = page.locator('#connect-toolbar')
  await toolbar.waitFor({ timeout: WAIT })
  await toolbar.locator('button').filter({ hasNotText: 'Add connection' }).last().click()
  await page.getByRole('menuitem', { name: 'Import connections' }).click()
  await page.locator('input[type=file]').setInputFiles(file)
  await page.getByRole('button', { name: 'Import', exact: true }).click()
  await page.getByText(TARGET, { exact: true }).first().waitFor({ timeout: WAIT })
  await page.screenshot({ path: join(SHOTS, 'hawtio-elsewhere-imported.png') })

  // The console's link opens that Hawtio at the target's connection.
  await page.goto(`${GATEWAY}/console/targets/${encodeURIComponent(TARGET)}`)
  const link = page.getByRole('link', { name: 'Open in Hawtio', exact: true })
  assert.equal(await link.getAttribute('href'), `${hawtio.url}?con=${encodeURIComponent(TARGET)}`)
  const [tab] = await Promise.all([person.context.waitForEvent('page', { timeout: WAIT }), link.click()])
  // Hawtio asks for the connection's credentials (the gateway's), once.
  const loginForm = tab.locator('#connect-login-form')
  const jmxLink = tab.getByRole('link', { name: 'JMX', exact: true })
  await Promise.race([loginForm.waitFor({ timeout: WAIT }), jmxLink.waitFor({ timeout: WAIT })])
  if (await loginForm.isVisible()) {
    await tab.locator('#connect-login-form-username').fill(USER)
    await tab.locator('#connect-login-form-password').fill(PASSWORD)
    await tab.getByRole('button', { name: 'Log in' }).click()
    await loginForm.waitFor({ state: 'detached', timeout: WAIT })
  }
  await jmxLink.waitFor({ timeout: WAIT })
  await tab.goto(`${hawtio.url}jmx`)
  const tree = tab.locator('div#jmx-tree-view')
  await tree.waitFor({ timeout: WAIT })
  await tree.getByRole('button', { name: 'jmxgate.test', exact: true }).first().click({ timeout: WAIT })
  await tree.getByRole('button', { name: 'Types', exact: true }).first().click({ timeout: WAIT })
  await tab.getByRole('navigation', { name: 'MBean Nav' }).getByRole('link', { name: 'Attributes', exact: true }).click({ timeout: WAIT })
  const table = tab.locator('#attribute-table-with-panel')
  const row = table.locator('tbody tr').filter({ has: tab.locator('td:first-child:text-is("Name")') })
  await row.locator('td').nth(1).getByText(EXPECTED_NAME, { exact: true }).waitFor({ timeout: WAIT })
  await tab.screenshot({ path: join(SHOTS, 'hawtio-elsewhere.png') })
  // Everything went to the gateway through Hawtio's proxy, to that target.
  const paths = hawtio.exchanges.map((e) => e.path)
  assert.ok(paths.length > 0 && paths.every((p) => p.includes(`/jolokia/targets/${TARGET}`)), paths.join(', '))
  assert.deepEqual(violations, [], 'the console ran within its Content-Security-Policy')
})
