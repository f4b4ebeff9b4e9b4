// The Hawtio console (@hawtio/react, unmodified) in headless Chromium,
// talking to one target of jmxgate through Hawtio's Connect plugin: the
// console logs in to the connection with its own login form and sends the
// credentials as X-Jolokia-Authorization, through the console server's
// /hawtio/proxy (server.mjs) to <gateway>/jolokia/targets/<target>.
//
// Run by tests/console/hawtio.rs:   node --test-reporter=spec hawtio.test.mjs
// Environment:
//   JMXGATE_URL             the gateway, http://127.0.0.1:PORT
//   JMXGATE_TARGET          the target the console connects to
//   JMXGATE_USER, JMXGATE_PASSWORD   the gateway user Hawtio logs in as
//   JMXGATE_EXPECTED_NAME   jmxgate.test:type=Types Name, as the agent holds it
//   JMXGATE_SCREENSHOT_DIR  where screenshots and proxy-log.json go
//   JMXGATE_EXPECT_RBAC=1   also expect the gateway's Hawtio RBAC (denied
//                           operations locked in the UI, the ACL MBean found)
//   JMXGATE_EXPECT_LIST_RBAC=1  also expect listCache=true lists (8.x agents)
//                           to carry canInvoke / opByString decorations
//   HAWTIO_BUNDLE_DIR       a console built by build.mjs (else built here)
//   CHROMIUM                the browser (default /usr/bin/chromium)

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync, existsSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import { chromium } from 'playwright-core'

import { buildConsole } from './build.mjs'
import { startConsoleServer } from './server.mjs'

function env(name) {
  const v = process.env[name]
  if (!v) throw new Error(`${name} is not set: run this through tests/console/hawtio.rs`)
  return v
}

const GATEWAY = env('JMXGATE_URL')
const TARGET = env('JMXGATE_TARGET')
const USER = env('JMXGATE_USER')
const PASSWORD = env('JMXGATE_PASSWORD')
const EXPECTED_NAME = env('JMXGATE_EXPECTED_NAME')
const SHOTS = env('JMXGATE_SCREENSHOT_DIR')
const EXPECT_RBAC = process.env.JMXGATE_EXPECT_RBAC === '1'
const EXPECT_LIST_RBAC = process.env.JMXGATE_EXPECT_LIST_RBAC === '1'
const WAIT = 60_000

let console_ // the console server
let context
let page
let userDataDir
let builtHere
/** Requests the page tried to send anywhere but the console server. */
const outside = []

before(async () => {
  mkdirSync(SHOTS, { recursive: true })
  let bundleDir = process.env.HAWTIO_BUNDLE_DIR
  if (!bundleDir || !existsSync(join(bundleDir, 'index.html'))) {
    bundleDir = bundleDir ?? mkdtempSync(join(tmpdir(), 'jmxgate-hawtio-bundle-'))
    builtHere = process.env.HAWTIO_BUNDLE_DIR ? undefined : bundleDir
    const r = await buildConsole(bundleDir)
    console.log(`built the console into ${r.outdir} in ${r.ms} ms`)
  }
  console_ = await startConsoleServer({ bundleDir, gateway: GATEWAY, target: TARGET, log: (l) => console.log(l) })
  console.log(`console on ${console_.url}, connection ${TARGET} -> ${GATEWAY}/jolokia/targets/${TARGET}`)

  userDataDir = mkdtempSync(join(tmpdir(), 'jmxgate-hawtio-chromium-'))
  context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    viewport: { width: 1400, height: 900 },
    args: [
      '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
      // Shared memory in a temporary file instead of /dev/shm: a renderer
      // crashed once ("Page crashed") in a full run on a loaded machine.
      '--disable-dev-shm-usage',
    ],
  })
  // The console must need nothing from the Internet (no CDN, no fonts).
  await context.route('**/*', (route) => {
    const u = new URL(route.request().url())
    if (u.protocol === 'data:' || u.protocol === 'blob:' || u.host === `127.0.0.1:${console_.port}`) {
      return route.continue()
    }
    outside.push(route.request().url())
    return route.abort()
  })
  page = context.pages()[0] ?? (await context.newPage())
  page.on('console', (m) => {
    if ((m.type() === 'error' || m.type() === 'warning') && !/Failed to load resource|GL Driver Message/.test(m.text())) console.log(`[page ${m.type()}] ${m.text()}`)
  })
  page.on('response', (r) => {
    if (r.status() >= 400) console.log(`[page] HTTP ${r.status()} for ${r.request().method()} ${r.url()}`)
  })
  page.on('pageerror', (e) => console.log(`[page exception] ${e.stack ?? e}`))
  page.on('framenavigated', (f) => { if (f === page.mainFrame()) console.log(`[page] at ${f.url()}`) })
})

after(async () => {
  if (console_) {
    writeFileSync(join(SHOTS, 'proxy-log.json'), JSON.stringify(console_.exchanges, null, 2))
    summarise(console_.exchanges)
  }
  if (outside.length) console.log(`requests outside the console server (aborted): ${outside.join(', ')}`)
  await context?.close()
  await console_?.close()
  if (userDataDir) rmSync(userDataDir, { recursive: true, force: true })
  if (builtHere) rmSync(builtHere, { recursive: true, force: true })
})

async function shot(name) {
  const path = join(SHOTS, name)
  await page.screenshot({ path, fullPage: false })
  console.log(`screenshot: ${path}`)
}

/** What Hawtio sent to the gateway, in short. */
function summarise(exchanges) {
  const kinds = new Map()
  for (const e of exchanges) {
    let items = []
    try {
      const b = e.body ? JSON.parse(e.body) : null
      items = b === null ? [] : Array.isArray(b) ? b : [b]
    } catch {
      items = []
    }
    const auth = e.headers['x-jolokia-authorization'] ? 'X-Jolokia-Authorization'
      : e.headers.authorization ? 'Authorization' : 'none'
    const listCache = /[?&]listCache=true/.test(e.path) ? 'listCache=true' : null
    const names = items.length
      ? items.map((i) => [i.type, i.mbean, i.operation, i.path, i.config?.listCache || (i.type === 'list' && listCache) ? 'listCache=true' : null].filter(Boolean).join(' '))
      : [`${e.method} ${e.path}`]
    for (const n of names) {
      const k = `${n} [credentials: ${auth}; HTTP ${e.status}]`
      kinds.set(k, (kinds.get(k) ?? 0) + 1)
    }
  }
  console.log(`--- what Hawtio sent through the proxy (${exchanges.length} HTTP requests)`)
  for (const [k, n] of kinds) console.log(`${String(n).padStart(4)} x ${k}`)
}

/** The Jolokia items Hawtio sent, flattened, with their exchange. */
function sentItems() {
  const out = []
  for (const e of console_.exchanges) {
    try {
      const b = e.body ? JSON.parse(e.body) : null
      for (const i of b === null ? [] : Array.isArray(b) ? b : [b]) out.push({ item: i, exchange: e })
    } catch { /* not JSON */ }
  }
  return out
}

test('Hawtio connects to the target through the gateway and logs in with its form', async () => {
  await page.goto(console_.url)
  // Preset connection -> /hawtio/?con=<id> -> the gateway says 401 -> the
  // Connect plugin's login form for the connection.
  // (The JMX plugin's link shows only once Hawtio has the MBeans: logged in,
  // or let in without credentials.)
  const loginForm = page.locator('#connect-login-form')
  const jmxLink = page.getByRole('link', { name: 'JMX', exact: true })
  await Promise.race([
    loginForm.waitFor({ timeout: WAIT }),
    jmxLink.waitFor({ timeout: WAIT }),
  ])
  if (await loginForm.isVisible()) {
    await shot('login.png')
    await page.locator('#connect-login-form-username').fill(USER)
    await page.locator('#connect-login-form-password').fill(PASSWORD)
    await page.getByRole('button', { name: 'Log in' }).click()
    await loginForm.waitFor({ state: 'detached', timeout: WAIT })
  } else {
    console.log('no login form: the gateway let Hawtio in without credentials')
  }
  // After login Hawtio goes back to the console with the connection.
  await page.waitForURL((u) => !u.pathname.includes('/connect/login'), { timeout: WAIT })
  await jmxLink.waitFor({ timeout: WAIT })
  await shot('connected.png')
  const logins = console_.exchanges.filter((e) => e.headers['x-jolokia-authorization'])
  console.log(`requests with X-Jolokia-Authorization so far: ${logins.length}`)
})

test('the JMX tree shows the target\'s MBeans, not the filtered one', async () => {
  await page.goto(new URL('jmx', console_.url).href)
  const tree = page.locator('div#jmx-tree-view')
  await tree.waitFor({ timeout: WAIT })
  const domain = tree.getByRole('treeitem', { name: 'jmxgate.test', exact: false }).first()
  await domain.waitFor({ timeout: WAIT })
  // Expand the domain.
  await tree.getByRole('button', { name: 'jmxgate.test', exact: true }).first().click()
  for (const name of ['Types', 'Operations', 'Pattern']) {
    await tree.getByRole('button', { name, exact: true }).first().waitFor({ timeout: WAIT })
  }
  await shot('tree.png')
  const labels = await tree.locator('button, .pf-v6-c-tree-view__node-text').allInnerTexts()
  console.log(`tree labels: ${JSON.stringify([...new Set(labels.map((l) => l.trim()).filter(Boolean))])}`)
  assert.equal(await tree.getByRole('button', { name: 'Counter', exact: true }).count(), 0,
    'jmxgate.test:type=Counter is filtered by the policy and must not be in the tree')
})

async function selectMBean(name) {
  const tree = page.locator('div#jmx-tree-view')
  await tree.getByRole('button', { name, exact: true }).first().click()
  await page.waitForURL((u) => u.searchParams.has('nid'), { timeout: WAIT })
}

test('the Attributes tab shows the value the agent holds', async () => {
  await selectMBean('Types')
  await openTab('Attributes')
  const table = page.locator('#attribute-table-with-panel')
  await table.waitFor({ timeout: WAIT })
  const row = (name) => table.locator('tbody tr').filter({ has: page.locator(`td:first-child:text-is("${name}")`) })
  await row('Name').locator('td').nth(1).getByText(EXPECTED_NAME, { exact: true }).waitFor({ timeout: WAIT })
  await shot('attributes.png')
  // A number the agent holds, too.
  assert.equal((await row('Double').locator('td').nth(1).innerText()).trim(), '3.14159')
  if (EXPECT_RBAC) {
    // The policy lets this user write Flag and no other attribute: Hawtio
    // asks the gateway (canInvoke of set<Attribute>) and offers Save only
    // for Flag.
    const drawer = page.locator('#attribute-form')
    const open = async (name) => {
      await row(name).locator('td').first().click()
      await page.getByRole('heading', { name: `Attribute: ${name}` }).waitFor({ timeout: WAIT })
    }
    await open('Flag')
    await drawer.getByRole('button', { name: 'Save', exact: true }).waitFor({ timeout: WAIT })
    assert.equal(await page.locator('#attribute-form-value').getAttribute('readonly'), null, 'Flag is editable')
    await shot('attribute-writable.png')
    await open('Name')
    // Give Hawtio's canInvoke for setName time to come back before judging.
    await page.waitForTimeout(1500)
    assert.equal(await drawer.getByRole('button', { name: 'Save', exact: true }).count(), 0, 'no Save for Name')
    assert.notEqual(await page.locator('#attribute-form-value').getAttribute('readonly'), null, 'Name is read-only')
    await shot('attribute-denied.png')
  }
})

/** The MBean's Attributes / Operations / Chart tab (links in the MBean Nav). */
async function openTab(title) {
  await page.getByRole('navigation', { name: 'MBean Nav' }).getByRole('link', { name: title, exact: true }).click()
  await page.waitForURL((u) => u.pathname.endsWith(`/jmx/${title.toLowerCase()}`), { timeout: WAIT })
}

/** The operation's item in the Operations tab (Hawtio names it `name(types)`). */
function operation(signature) {
  return page.locator('#jmx-operation-list > li')
    .filter({ has: page.locator(`button[aria-labelledby="operation ${signature} ex-toggle1"]`) })
}

/** Expands an operation's item; returns its Execute button. */
async function expand(signature) {
  const item = operation(signature)
  await item.waitFor({ timeout: WAIT })
  const toggle = item.locator('button[id="ex-toggle1"]')
  if ((await toggle.getAttribute('aria-expanded')) !== 'true') await toggle.click()
  const execute = page.locator(`[id="operation-execute-${signature}"]`).getByRole('button', { name: 'Execute' })
  await execute.waitFor({ timeout: WAIT })
  return execute
}

/** Whether Hawtio marks the operation as not invocable (its lock icon cell). */
async function locked(signature) {
  return (await operation(signature).locator('.pf-v6-c-data-list__cell.pf-m-icon').count()) > 0
}

test('an allowed operation runs from the Operations tab and shows its result', async () => {
  await selectMBean('Operations')
  await openTab('Operations')
  const execute = await expand('noArgs()')
  assert.equal(await execute.isEnabled(), true, 'noArgs() is allowed')
  assert.equal(await locked('noArgs()'), false)
  await execute.click()
  await page.locator('[id="operation-result-noArgs()"]').getByText('ok', { exact: true }).first()
    .waitFor({ timeout: WAIT })

  // echo(java.lang.String) with an argument typed into its form.
  const echo = await expand('echo(java.lang.String)')
  await page.locator('[id="operation-execute-echo(java.lang.String)"] input').first().fill('hello from hawtio')
  await echo.click()
  await page.locator('[id="operation-result-echo(java.lang.String)"]')
    .getByText('hello from hawtio', { exact: true }).first().waitFor({ timeout: WAIT })
  await operation('echo(java.lang.String)').scrollIntoViewIfNeeded()
  await shot('operations.png')

  const execs = sentItems().filter(({ item }) => item.type === 'exec' && item.mbean === 'jmxgate.test:type=Operations')
  for (const op of ['noArgs', 'echo']) {
    assert.ok(execs.some(({ item, exchange }) => item.operation.startsWith(op) && exchange.status === 200),
      `${op} went through the proxy: ${JSON.stringify(execs.map((e) => e.item))}`)
  }
})

test('denied operations are locked in the UI (gateway RBAC)', { skip: !EXPECT_RBAC && 'JMXGATE_EXPECT_RBAC is not 1' }, async () => {
  // The RBAC tree processor found the gateway's ACL MBean...
  const searches = sentItems().filter(({ item }) => item.type === 'search' && item.mbean === '*:type=security,area=jmx,*')
  assert.ok(searches.length > 0, 'Hawtio searched for an ACL MBean')
  const found = searches.map(({ exchange }) => exchange.response).join('\n')
  assert.match(found, /hawtio:type=security,area=jmx,name=JmxgateRBAC/, found)
  // ... and asked it.
  // Then either asked canInvoke (agents of protocol < 8: Hawtio's "general"
  // list mode) or took the decorations of a listCache=true list (8.x agents:
  // its "native" mode, which asks nothing more when every MBean is decorated).
  const asked = sentItems().filter(({ item }) => item.type === 'exec' && /canInvoke/.test(item.operation ?? ''))
  const decorated = console_.exchanges.filter((e) => /[?&]listCache=true/.test(e.path) && /"canInvoke"/.test(e.response ?? ''))
  console.log(`RBAC: ${asked.length} canInvoke execs, ${decorated.length} decorated listCache lists`)
  assert.ok(asked.length > 0 || decorated.length > 0, 'Hawtio asked canInvoke or got a decorated list')

  await selectMBean('Operations')
  await openTab('Operations')
  for (const sig of ['reset()', 'fail()']) {
    const execute = await expand(sig)
    assert.equal(await locked(sig), true, `${sig} is denied and must carry Hawtio's lock`)
    assert.equal(await execute.isDisabled(), true, `${sig} is denied and its Execute button must be disabled`)
  }
  for (const sig of ['noArgs()', 'echo(java.lang.String)', 'add(int,int)']) {
    assert.equal(await locked(sig), false, `${sig} is allowed`)
  }
  await operation('fail()').scrollIntoViewIfNeeded()
  await shot('operations-rbac.png')
  // No browser request got a Basic challenge (which would open the
  // browser's own login dialog instead of Hawtio's form): the gateway's
  // own challenge to Hawtio's header is in Hawtio's form, and Hawtio's
  // proxy rewrites the one to its credential-less probe.
  const challenged = console_.exchanges.filter((e) => /^basic/i.test(String(e.sentHeaders?.['www-authenticate'] ?? '')))
  assert.deepEqual(challenged.map((e) => `${e.method} ${e.path} ${e.status}`), [])
})

test('listCache lists carry Hawtio RBAC decorations (gateway RBAC)', { skip: !EXPECT_LIST_RBAC && 'JMXGATE_EXPECT_LIST_RBAC is not 1' }, () => {
  // Hawtio lists with listCache=true when the agent speaks protocol 8 or
  // later ("native" mode); a 7.x agent (Jolokia 1.7.1) gets a plain list.
  const lists = console_.exchanges.filter((e) => /[?&]listCache=true/.test(e.path) && e.status === 200)
  if (lists.length === 0) {
    console.log('no listCache=true list was sent (a protocol 7 agent): nothing to check')
    return
  }
  for (const e of lists) {
    const answers = JSON.parse(e.response)
    for (const a of Array.isArray(answers) ? answers : [answers]) {
      if (a.request?.type !== 'list' || a.status !== 200) continue
      const { domains = a.value, cache = {} } = a.value.domains ? a.value : {}
      const raw = domains['jmxgate.test']?.['type=Operations']
      const ops = typeof raw === 'string' ? cache[raw] : raw
      assert.ok(ops, `no jmxgate.test:type=Operations in ${e.path}`)
      assert.equal(ops.canInvoke, true, 'MBean-level canInvoke')
      const by = ops.opByString ?? {}
      assert.equal(by['reset()']?.canInvoke, false, `opByString['reset()']: ${JSON.stringify(by['reset()'])}`)
      assert.equal(by['fail()']?.canInvoke, false, `opByString['fail()']: ${JSON.stringify(by['fail()'])}`)
      assert.equal(by['noArgs()']?.canInvoke, true, `opByString['noArgs()']: ${JSON.stringify(by['noArgs()'])}`)
      assert.equal(by['echo(java.lang.String)']?.canInvoke, true)
      assert.equal(ops.op?.reset?.canInvoke, false, `op.reset: ${JSON.stringify(ops.op?.reset)}`)
    }
  }
})

test('nothing was fetched from outside the console server', () => {
  assert.deepEqual(outside, [])
})
