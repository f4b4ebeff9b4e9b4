// The console's web server: it plays the part of Hawtio's own Java backend
// (hawtio-war / hawtio-springboot) for a console bundled by build.mjs, so
// that @hawtio/react runs unmodified:
//
//   /hawtio/                     the page (SPA: unknown paths get index.html)
//   /hawtio/user                 the console user, as JSON ("public" login)
//   /hawtio/proxy/enabled        "true": the Connect plugin is on
//   /hawtio/preset-connections   one connection, named after the target,
//                                to <gateway>/jolokia/targets/<target>
//                                (none without a target: connections are
//                                then added or imported by the person)
//   /hawtio/proxy/http/H/P/PATH  Hawtio's proxy: forwards to http://H:P/PATH,
//                                only to the gateway's host and port
//
// Hawtio sends the connection's credentials as X-Jolokia-Authorization; the
// proxy forwards the body and every end-to-end header unchanged (no cookies,
// no Host), and the gateway's answer likewise, but for a Basic challenge,
// which it rewrites as Hawtio's ProxyServlet does. Every proxied exchange is
// recorded (see `exchanges`) and, with `log`, printed.
//
// Standalone, against a running gateway:
//   node build.mjs /tmp/hawtio-console
//   node server.mjs /tmp/hawtio-console http://127.0.0.1:8080 orders-1 [port]
// then open http://127.0.0.1:PORT/hawtio/ and log in to the connection.

import { createServer, request as httpRequest } from 'node:http'
import { existsSync, readFileSync, statSync } from 'node:fs'
import { extname, join, normalize, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const TYPES = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.jpg': 'image/jpeg',
  '.gif': 'image/gif',
  '.woff': 'font/woff',
  '.woff2': 'font/woff2',
  '.ttf': 'font/ttf',
  '.eot': 'application/vnd.ms-fontobject',
}

// Hop-by-hop headers (RFC 9110 7.6.1), never forwarded; and what the proxy
// sets itself.
const HOP = new Set([
  'connection', 'keep-alive', 'proxy-authenticate', 'proxy-authorization', 'te', 'trailer',
  'transfer-encoding', 'upgrade', 'proxy-connection', 'host', 'content-length', 'cookie',
  'accept-encoding',
])
const HOP_RESPONSE = new Set([...HOP, 'set-cookie', 'content-encoding'])

export const HAWTCONFIG = {
  branding: { appName: 'Hawtio through jmxgate', showAppName: true },
  appearance: { showHeader: true, showBrand: true, showUserHeader: true, showSideBar: true },
  about: { title: 'Hawtio through jmxgate', productInfo: [] },
}

/**
 * Starts the server on 127.0.0.1 (port 0: any free one).
 * @param {{bundleDir: string, gateway: string, target: string, port?: number, log?: (line: string) => void}} opts
 */
export async function startConsoleServer({ bundleDir, gateway, target, port = 0, log }) {
  const gw = new URL(gateway)
  const gwPort = Number(gw.port || 80)
  const exchanges = []
  const index = readFileSync(join(bundleDir, 'index.html'))

  const json = (res, status, value) => {
    res.writeHead(status, { 'Content-Type': 'application/json' })
    res.end(JSON.stringify(value))
  }

  const server = createServer((req, res) => {
    const url = new URL(req.url, 'http://console')
    const path = url.pathname
    if (path === '/' || path === '/hawtio') {
      res.writeHead(302, { Location: '/hawtio/' })
      res.end()
      return
    }
    if (!path.startsWith('/hawtio/')) {
      res.writeHead(404)
      res.end()
      return
    }
    const rest = path.slice('/hawtio/'.length)
    if (rest.startsWith('proxy/') && rest !== 'proxy/enabled') {
      proxy(req, res, rest.slice('proxy/'.length) + url.search)
      return
    }
    switch (rest) {
      case 'user':
        return json(res, 200, 'public')
      case 'proxy/enabled':
        res.writeHead(200, { 'Content-Type': 'text/plain' })
        return res.end('true')
      case 'preset-connections':
        if (!target) return json(res, 200, [])
        return json(res, 200, [{
          name: target,
          scheme: gw.protocol.replace(':', ''),
          host: gw.hostname,
          port: gwPort,
          path: `/jolokia/targets/${target}`,
        }])
      case 'hawtconfig.json':
        return json(res, 200, HAWTCONFIG)
    }
    // Static files of the bundle, else the page (client-side routes).
    const file = normalize(join(bundleDir, rest))
    if (rest && file.startsWith(resolve(bundleDir)) && existsSync(file) && statSync(file).isFile()) {
      res.writeHead(200, { 'Content-Type': TYPES[extname(file)] ?? 'application/octet-stream' })
      res.end(readFileSync(file))
      return
    }
    if (/\.(js|css|json|map|png|svg|ico|woff2?|ttf)$/.test(rest) || rest.startsWith('auth/') || rest === 'refresh') {
      res.writeHead(404)
      res.end()
      return
    }
    res.writeHead(200, { 'Content-Type': TYPES['.html'] })
    res.end(index)
  })

  /** Hawtio's proxy: proxy/<scheme>/<host>/<port>/<path>, to the gateway only. */
  function proxy(req, res, spec) {
    const m = spec.match(/^(https?)\/([^/]+)\/(\d+)(\/.*)?$/)
    if (!m || m[1] !== 'http' || m[2] !== gw.hostname || Number(m[3]) !== gwPort) {
      res.writeHead(403, { 'Content-Type': 'application/json' })
      res.end(JSON.stringify({ reason: 'HOST_NOT_ALLOWED' }))
      return
    }
    const targetPath = m[4] ?? '/'
    const headers = {}
    for (const [k, v] of Object.entries(req.headers)) {
      if (!HOP.has(k)) headers[k] = v
    }
    const chunks = []
    req.on('data', (c) => chunks.push(c))
    req.on('end', () => {
      const body = Buffer.concat(chunks)
      if (body.length > 0) headers['content-length'] = String(body.length)
      const record = {
        n: exchanges.length + 1,
        method: req.method,
        path: targetPath,
        headers: redact(headers),
        body: body.toString('utf8'),
      }
      exchanges.push(record)
      const out = httpRequest({
        host: gw.hostname, port: gwPort, method: req.method, path: targetPath, headers,
      }, (answer) => {
        const back = {}
        for (const [k, v] of Object.entries(answer.headers)) {
          if (!HOP_RESPONSE.has(k)) back[k] = v
        }
        // As Hawtio's own ProxyServlet (copyResponseHeaders) does: a
        // remote Basic challenge becomes `Hawtio original-scheme="Basic"`,
        // so the browser never opens its own login dialog over the console.
        const challenges = back['www-authenticate']
        if (challenges !== undefined) {
          back['www-authenticate'] = [].concat(challenges).map((v) =>
            v.toLowerCase().startsWith('basic ') ? `Hawtio original-scheme="Basic" ${v.slice(6)}` : v)
        }
        const parts = []
        answer.on('data', (c) => parts.push(c))
        answer.on('end', () => {
          const text = Buffer.concat(parts)
          record.status = answer.statusCode
          record.responseHeaders = answer.headers
          record.sentHeaders = back
          record.response = text.toString('utf8')
          log?.(describe(record))
          back['content-length'] = String(text.length)
          res.writeHead(answer.statusCode, back)
          res.end(text)
        })
      })
      out.on('error', (e) => {
        record.status = 502
        record.response = String(e)
        log?.(describe(record))
        res.writeHead(502, { 'Content-Type': 'text/plain' })
        res.end(String(e))
      })
      out.end(body)
    })
  }

  await new Promise((ok) => server.listen(port, '127.0.0.1', ok))
  return {
    server,
    port: server.address().port,
    url: `http://127.0.0.1:${server.address().port}/hawtio/`,
    exchanges,
    close: () => new Promise((ok) => { server.closeAllConnections?.(); server.close(() => ok()) }),
  }
}

/** Credentials shown as the user name only: `Basic <user>:***`. */
function redact(headers) {
  const out = { ...headers }
  for (const k of ['authorization', 'x-jolokia-authorization']) {
    const v = out[k]
    if (typeof v === 'string' && /^basic /i.test(v)) {
      const user = Buffer.from(v.slice(6).trim(), 'base64').toString('utf8').split(':')[0]
      out[k] = `Basic <${user}:***>`
    } else if (typeof v === 'string') {
      out[k] = v.replace(/ .*/, ' <redacted>')
    }
  }
  return out
}

/** One line per exchange for the test's output. */
export function describe(r) {
  const h = r.headers
  const auth = [
    h['x-jolokia-authorization'] ? `X-Jolokia-Authorization: ${h['x-jolokia-authorization']}` : null,
    h.authorization ? `Authorization: ${h.authorization}` : null,
  ].filter(Boolean).join(', ') || 'no credentials'
  const challenge = r.responseHeaders?.['www-authenticate']
  const body = r.body.length > 600 ? r.body.slice(0, 600) + `…(${r.body.length} chars)` : r.body
  return `[proxy #${r.n}] ${r.method} ${r.path} (${auth}) -> ${r.status}` +
    (challenge ? ` WWW-Authenticate: ${challenge}` : '') + (body ? `\n    ${body}` : '')
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const [bundleDir, gateway, target, port] = process.argv.slice(2)
  if (!bundleDir || !gateway || !target) {
    console.error('usage: node server.mjs BUNDLE_DIR GATEWAY_URL TARGET [PORT]')
    process.exit(2)
  }
  const s = await startConsoleServer({ bundleDir, gateway, target, port: Number(port ?? 0), log: console.log })
  console.log(`Hawtio console on ${s.url} (connection "${target}" -> ${gateway}/jolokia/targets/${target})`)
}
