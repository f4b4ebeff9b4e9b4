// Signing in to jmxgate's console at an OpenID provider, in headless
// Chromium: a console page sends the browser to the provider's login
// form, the provider sends it back signed in, and signing out ends it.
//
// Run by tests/console/console_oidc.rs:   node --test-reporter=spec console-sign-in.test.mjs
// Environment:
//   JMXGATE_URL             the gateway, http://127.0.0.1:PORT
//   JMXGATE_ISSUER          the provider, https://127.0.0.1:PORT
//   JMXGATE_LOGIN           who signs in (the provider takes any password)
//   JMXGATE_SEEN, JMXGATE_UNSEEN   a target their roles reach, one they don't
//   JMXGATE_SCREENSHOT_DIR  where screenshots go
//   CHROMIUM                the browser (default /usr/bin/chromium)

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'

import { browser, env, watch } from './browser.mjs'

const GATEWAY = env('JMXGATE_URL')
const ISSUER = env('JMXGATE_ISSUER')
const LOGIN = env('JMXGATE_LOGIN')
const SEEN = env('JMXGATE_SEEN')
const UNSEEN = env('JMXGATE_UNSEEN')
const SHOTS = env('JMXGATE_SCREENSHOT_DIR')
const WAIT = 60_000

const violations = []
let person

before(async () => {
  mkdirSync(SHOTS, { recursive: true })
  // The provider's certificate is from the test's own CA.
  person = await browser({ ignoreHTTPSErrors: true })
  watch(person.page, 'console', violations)
})

after(async () => {
  await person?.close()
})

test('a console page signs in at the provider and comes back', async () => {
  const page = person.page
  await page.goto(`${GATEWAY}/console/?group=namespace`)
  // The provider's own login form.
  await page.waitForURL((u) => u.href.startsWith(ISSUER), { timeout: WAIT })
  await page.fill('input[name=login]', LOGIN)
  await page.fill('input[name=password]', 'any password')
  await page.screenshot({ path: join(SHOTS, 'console-sign-in-provider.png') })
  await Promise.all([
    page.waitForURL((u) => u.href.startsWith(`${GATEWAY}/console/?group=namespace`), { timeout: WAIT }),
    page.getByRole('button', { name: 'Sign-in' }).click(),
  ])
  await page.locator('header .who').getByText(LOGIN, { exact: true }).waitFor({ timeout: WAIT })
  await page.getByRole('link', { name: SEEN, exact: true }).waitFor({ timeout: WAIT })
  assert.equal(await page.getByRole('link', { name: UNSEEN, exact: true }).count(), 0)
  await page.screenshot({ path: join(SHOTS, 'console-signed-in.png') })
  // The session is a cookie the page's scripts can't read.
  const cookies = await person.context.cookies(`${GATEWAY}/console/`)
  const session = cookies.find((c) => c.name === 'jmxgate_console_session')
  assert.ok(session, cookies.map((c) => c.name).join(', '))
  assert.equal(session.httpOnly, true)
  assert.equal(session.sameSite, 'Lax')
  assert.equal(await page.evaluate(() => document.cookie.includes('jmxgate_console_session')).catch(() => false), false)
})

test('signing out ends the session', async () => {
  const page = person.page
  await Promise.all([
    page.waitForURL(`${GATEWAY}/console/signed-out`, { timeout: WAIT }),
    page.getByRole('button', { name: 'Sign out', exact: true }).click(),
  ])
  await page.getByText('You are signed out of the console.').waitFor({ timeout: WAIT })
  const left = (await person.context.cookies(`${GATEWAY}/console/`)).filter((c) => c.name === 'jmxgate_console_session')
  assert.deepEqual(left, [])
  assert.deepEqual(violations, [], 'the pages ran within their Content-Security-Policy')
})
