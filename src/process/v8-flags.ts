/**
 * Turns off V8's allocation-site pretenuring before any other module runs
 * (docs/decisions/0015-no-allocation-site-pretenuring.md). Set here so that it holds however the
 * service starts; NODE_OPTIONS refuses it.
 */
import { setFlagsFromString } from 'node:v8'

setFlagsFromString('--no-allocation-site-pretenuring')
