// A minimal Hawtio console: @hawtio/react with all its built-in plugins
// (connect, jmx, rbac, camel, runtime, logs, ...), booted as its README's
// "simple, synchronous usage" shows: registerPlugins(), hawtio.bootstrap(),
// then <Hawtio />. Bundled by build.mjs; served under /hawtio/ by
// server.mjs, which plays Hawtio's backend (user, proxy, preset connections).

import '@hawtio/react/dist/index.css'
import '@patternfly/react-core/dist/styles/base.css'

import React from 'react'
import ReactDOM from 'react-dom/client'

import { configManager, hawtio, registerPlugins } from '@hawtio/react'
import { Hawtio } from '@hawtio/react/ui'

configManager.addProductInfo('jmxgate Hawtio test console', '1')
registerPlugins()

const root = ReactDOM.createRoot(document.getElementById('root'))
hawtio.bootstrap().then(() => {
  root.render(
    <React.StrictMode>
      <Hawtio />
    </React.StrictMode>,
  )
  document.body.dataset.hawtio = 'rendered'
})
