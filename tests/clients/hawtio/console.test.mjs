// jmxgate's console in headless Chromium, as people use it: signing in
// with the browser's own Basic dialog, 10,000 targets grouped and paged, a
// read-only role's view of a target, an access request asked and approved
// in two browsers (after which the requester may run the operation), a
// form posted from another site refused, and a target's going down shown
// on the events page within seconds and on the fleet page with its
// breaker open.
//
// Run by tests/console/console_browser.rs:   node --test-reporter=spec console.test.mjs
// Environment:
//   JMXGATE_URL             the gateway with real agents, http://127.0.0.1:PORT
//   JMXGATE_SCALE_URL       a gateway with 10,000 stand-in targets (same users)
//   JMXGATE_LEAD, JMXGATE_DEV, JMXGATE_PASSWORD   the people (Basic)
//   JMXGATE_TARGET          a real agent the developer reaches read-only
//   JMXGATE_DOWN_TARGET     a real agent the Rust test stops when asked
//   JMXGATE_STOP_SIGNAL     the file whose creation asks for that
//   JMXGATE_SCREENSHOT_DIR  where screenshots go
//   CHROMIUM                the browser (default /usr/bin/chromium)

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdirSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:http'
import { join } from 'node:path'

import { browser, env, watch } from './browser.mjs'

const GATEWAY = env('JMXGATE_URL')
const SCALE = env('JMXGATE_SCALE_URL')
const LEAD = env('JMXGATE_LEAD')
const DEV = env('JMXGATE_DEV')
const PASSWORD = env('JMXGATE_PASSWORD')
const TARGET = env('JMXGATE_TARGET')
const DOWN_TARGET = env('JMXGATE_DOWN_TARGET')
const STOP_SIGNAL = env('JMXGATE_STOP_SIGNAL')
const SHOTS = env('JMXGATE_SCREENSHOT_DIR')
const WAIT = 60_000
const MEMORY = `${GATEWAY}/console/targets/${encodeURIComponent(TARGET)}?mbean=${encodeURIComponent('java.lang:type=Memory')}`

const violations = []
let lead
let dev

/** Reloads `url` until `check` holds (a page without script does not
 * update itself), within a generous deadline. */
async function until(page, url, what, check) {
  const deadline = Date.now() + 90_000
  for (;;) {
    await page.goto(url)
    if (await check()) return
    if (Date.now() > deadline) throw new Error(`never: ${what}`)
    await new Promise((r) => setTimeout(r, 1000))
  }
}

before(async () => {
  mkdirSync(SHOTS, { recursive: true })
  lead = await browser({ httpCredentials: { username: LEAD, password: PASSWORD } })
  dev = await browser({ httpCredentials: { username: DEV, password: PASSWORD } })
  watch(lead.page, 'lead', violations)
  watch(dev.page, 'dev', violations)
})

after(async () => {
  await lead?.close()
  await dev?.close()
})

test('the browser signs in with its own Basic dialog, or gets nothing', async () => {
  const answer = await lead.page.goto(`${GATEWAY}/console/`)
  assert.equal(answer.status(), 200)
  await lead.page.locator('header .who').getByText(LEAD, { exact: true }).waitFor({ timeout: WAIT })
  // Without credentials to give, headless Chromium ends the navigation at
  // the gateway's 401 (a person would see the dialog).
  const nobody = await browser()
  try {
    const refused = await nobody.page.goto(`${GATEWAY}/console/`).catch((e) => e)
    if (refused instanceof Error) {
      assert.match(refused.message, /ERR_INVALID_AUTH_CREDENTIALS/)
    } else {
      assert.equal(refused.status(), 401)
    }
    assert.equal(await nobody.page.locator('table.targets').count(), 0)
  } finally {
    await nobody.close()
  }
})

test('10,000 targets are grouped, counted and paged', async () => {
  const page = lead.page
  await page.goto(`${SCALE}/console/?group=namespace`)
  const groups = page.locator('table.groups tbody tr')
  await groups.first().waitFor({ timeout: WAIT })
  assert.equal(await groups.count(), 20)
  for (const row of await groups.all()) {
    // Never probed (probes are off there): 500 each, none up or down.
    assert.deepEqual(await row.locator('td').allInnerTexts().then((t) => t.slice(1)), ['0', '0', '500'])
  }
  assert.match(await page.locator('p.summary').innerText(), /10000 not yet probed/)
  const names = () => page.locator('table.targets tbody td.name').allInnerTexts()
  const first = await names()
  assert.equal(first.length, 100)
  await page.screenshot({ path: join(SHOTS, 'console-10000-grouped.png') })
  await Promise.all([page.waitForURL(/after=/), page.locator('a.next').click()])
  const second = await names()
  assert.equal(second.length, 100)
  assert.ok(second.every((n) => !first.includes(n)), 'the next page holds other targets')
  // A group's link filters to it.
  await Promise.all([page.waitForURL(/selector=/), page.getByRole('link', { name: 'ns-07', exact: true }).click()])
  const labels = await page.locator('table.targets tbody td.labels').allInnerTexts()
  assert.equal(labels.length, 100)
  assert.ok(labels.every((l) => l.includes('namespace=ns-07')), labels.join(' | '))
})

test('a read-only role sees the operations it may not run', async () => {
  const page = dev.page
  await page.goto(MEMORY)
  await page.getByText('not allowed to you').first().waitFor({ timeout: WAIT })
  assert.equal(await page.locator('form.exec').count(), 0, 'no operation to run')
  assert.equal(await page.locator('form.write').count(), 0, 'no attribute to set')
  // The target's header and its values in people's units.
  assert.match(await page.locator('dl.target-header').innerText(), /state\s+up/)
  assert.match(await page.locator('td.value').filter({ hasText: 'MiB' }).first().innerText(), /used\s+\d+ \(\d+\.\d MiB\)/)
  await page.screenshot({ path: join(SHOTS, 'console-read-only.png') })
})

test('a role asked for and approved in the console lets the requester run the operation', async () => {
  await dev.page.goto(`${GATEWAY}/console/access`)
  await dev.page.selectOption('select[name=role]', 'ops')
  await dev.page.fill('input[name=reason]', 'INC-42 gc the shop')
  // A duration that is none: said, and what was typed is still there.
  await dev.page.fill('input[name=duration]', 'soon')
  await Promise.all([dev.page.waitForLoadState('load'), dev.page.getByRole('button', { name: 'Ask', exact: true }).click()])
  await dev.page.locator('p.error').getByText('duration').waitFor({ timeout: WAIT })
  assert.equal(await dev.page.inputValue('input[name=reason]'), 'INC-42 gc the shop')
  assert.equal(await dev.page.inputValue('input[name=duration]'), 'soon')
  await dev.page.fill('input[name=duration]', '30m')
  await Promise.all([dev.page.waitForURL(/\/console\/access$/), dev.page.getByRole('button', { name: 'Ask', exact: true }).click()])
  await dev.page.getByText('INC-42 gc the shop').first().waitFor({ timeout: WAIT })

  await lead.page.goto(`${GATEWAY}/console/access`)
  // The page fits the window: nothing to scroll sideways.
  assert.ok(await lead.page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth), 'the access page is no wider than the window')
  await lead.page.fill('input[name=comment]', 'go ahead')
  await lead.page.screenshot({ path: join(SHOTS, 'console-approval.png') })
  await Promise.all([lead.page.waitForURL(/\/console\/access$/), lead.page.getByRole('button', { name: 'Approve', exact: true }).click()])
  await lead.page.getByText('approved').first().waitFor({ timeout: WAIT })

  const gc = dev.page.locator('form.exec').filter({ has: dev.page.locator('input[name=operation][value=gc]') })
  await until(dev.page, MEMORY, 'the developer may run gc', async () => (await gc.count()) > 0)
  // Run it from the page, and set an attribute: the answers are the agent's.
  await Promise.all([dev.page.waitForLoadState('load'), gc.getByRole('button', { name: 'Run' }).click()])
  await dev.page.locator('div.outcome p.ok').getByText('gc(): done').waitFor({ timeout: WAIT })
  const verbose = dev.page.locator('form.write').filter({ has: dev.page.locator('input[name=attribute][value=Verbose]') })
  await verbose.locator('input[name=value]').fill('false')
  await Promise.all([dev.page.waitForLoadState('load'), verbose.getByRole('button', { name: 'Set' }).click()])
  await dev.page.locator('div.outcome p.ok').getByText('Verbose = false: done').waitFor({ timeout: WAIT })
  await dev.page.screenshot({ path: join(SHOTS, 'console-ran-gc.png') })
})

test('a form posted from another site is refused', async () => {
  // Another site (localhost is not 127.0.0.1) whose page posts an access
  // request to the gateway as soon as it loads.
  const attacker = createServer((_req, res) => {
    res.setHeader('content-type', 'text/html')
    res.end(`<form id="f" method="post" action="${GATEWAY}/console/access">
      <input name="role" value="ops"><input name="duration" value="30m">
      <input name="reason" value="made elsewhere"><input name="csrf" value="guessed">
      </form><script>document.getElementById('f').submit()</script>`)
  })
  await new Promise((resolve) => attacker.listen(0, '127.0.0.1', resolve))
  try {
    const posted = dev.page.waitForResponse((r) => r.request().method() === 'POST' && r.url() === `${GATEWAY}/console/access`, { timeout: WAIT })
    await dev.page.goto(`http://localhost:${attacker.address().port}/`)
    const answer = await posted
    assert.equal(answer.status(), 403)
    assert.match(await answer.text(), /another site/)
  } finally {
    attacker.close()
  }
  await dev.page.goto(`${GATEWAY}/console/access`)
  assert.equal(await dev.page.getByText('made elsewhere').count(), 0, 'nothing was asked')
})

test('a target going down is on the events page within seconds', async () => {
  const page = dev.page
  await page.goto(`${GATEWAY}/console/events`)
  writeFileSync(STOP_SIGNAL, 'stop\n')
  const down = page.locator('table.events tr.target_down').filter({ has: page.getByRole('link', { name: DOWN_TARGET, exact: true }) })
  await until(page, `${GATEWAY}/console/events`, `${DOWN_TARGET} down`, async () => (await down.count()) > 0)
  await page.screenshot({ path: join(SHOTS, 'console-events.png') })
  // On the fleet page: down, and its breaker open once reads of it failed.
  const row = lead.page.locator('table.targets tbody tr').filter({ has: lead.page.getByRole('link', { name: DOWN_TARGET, exact: true }) })
  await until(lead.page, `${GATEWAY}/console/?group=namespace`, `${DOWN_TARGET} down with its breaker open`, async () =>
    (await row.getAttribute('class')) === 'down' && (await row.locator('td').nth(2).innerText()) === 'open')
  assert.match(await lead.page.locator('table.groups tbody tr').first().innerText(), /shop\s+1\s+1\s+0/)
  await lead.page.screenshot({ path: join(SHOTS, 'console-fleet-down.png') })
  assert.deepEqual(violations, [], 'the pages ran within their Content-Security-Policy')
})
