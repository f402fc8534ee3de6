/**
 * What `npm start` runs: the Node check and V8's flags, then the service. The service is imported
 * only once they have run, so that no module of it, however the bundle splits them, runs first.
 */
import './supported-node.js'
import './v8-flags.js'

await import('./service.js')
