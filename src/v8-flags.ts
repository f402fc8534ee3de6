/**
 * Turns off V8's allocation-site pretenuring, before any other module of the service runs.
 * When a new process's first young-generation collection falls while its first burst of
 * connections is in flight, V8 can decide that the listener lists which Node's HTTP code and
 * Fastify make for every socket and response live long, and from then on make them in the
 * old generation, for the life of the process: every young collection then keeps them, and
 * what they hold, alive until a full one. What that costs, how often it happens, and what
 * the flag costs: docs/benchmarks.md, "Before and after: allocation-site pretenuring off".
 * Set here rather than on the command line because it then holds however the service is
 * started (`npm start`, the container, `node dist/server.js` under a process manager), and
 * NODE_OPTIONS refuses it.
 */
import { setFlagsFromString } from 'node:v8'

setFlagsFromString('--no-allocation-site-pretenuring')
