// Bundles console.jsx (Hawtio + React + PatternFly) with esbuild into a
// directory: index.html, console.js, console.css and their assets.
//
//   node build.mjs OUTDIR          (or HAWTIO_BUNDLE_DIR=OUTDIR node build.mjs)
//
// Also a module: `await buildConsole(outdir)`. The output is served under
// /hawtio/ (its <base href>), as Hawtio's own backend serves the console.

import { build } from 'esbuild'
import { mkdirSync, writeFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const here = dirname(fileURLToPath(import.meta.url))

export const INDEX_HTML = `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <base href="/hawtio/" />
    <link id="branding" rel="stylesheet" type="text/css" href="" />
    <link rel="stylesheet" href="console.css" />
    <title>Hawtio through jmxgate</title>
  </head>
  <body>
    <div id="root"></div>
    <script type="module" src="console.js"></script>
  </body>
</html>
`

export async function buildConsole(outdir) {
  outdir = resolve(outdir)
  mkdirSync(outdir, { recursive: true })
  const started = Date.now()
  const result = await build({
    absWorkingDir: here,
    entryPoints: { console: join(here, 'console.jsx') },
    bundle: true,
    format: 'esm',
    outdir,
    platform: 'browser',
    target: ['chrome120'],
    jsx: 'automatic',
    minify: true,
    sourcemap: false,
    logLevel: 'warning',
    // Hawtio's dist is CommonJS; these keep React in production mode.
    define: { 'process.env.NODE_ENV': '"production"', global: 'globalThis' },
    loader: {
      '.woff': 'file', '.woff2': 'file', '.ttf': 'file', '.eot': 'file',
      '.svg': 'file', '.png': 'file', '.jpg': 'file', '.gif': 'file',
    },
    assetNames: 'assets/[name]-[hash]',
  })
  writeFileSync(join(outdir, 'index.html'), INDEX_HTML)
  return { outdir, ms: Date.now() - started, warnings: result.warnings.length }
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const outdir = process.argv[2] ?? process.env.HAWTIO_BUNDLE_DIR
  if (!outdir) {
    console.error('usage: node build.mjs OUTDIR (or HAWTIO_BUNDLE_DIR)')
    process.exit(2)
  }
  const r = await buildConsole(outdir)
  console.log(`built the Hawtio console into ${r.outdir} in ${r.ms} ms`)
}
