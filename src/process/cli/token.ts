/**
 * `npm run token -- --sub <subject> [--expires 1h]`: prints an HS256 token signed with JWT_SECRET,
 * the kind the service accepts.
 */
import '../supported-node.js'
import { parseArgs } from 'node:util'
import { createSigner } from 'fast-jwt'
import { ConfigError, loadSigningSecret, parseDuration, readEnvironment } from '../../config/config.js'

const USAGE = 'usage: npm run token -- --sub <subject> [--expires <number><s|m|h|d>, default 1h]'

function fail (message: string): never {
  process.stderr.write(`${message}\n`)
  process.exit(1)
}

let values
try {
  ({ values } = parseArgs({ options: { sub: { type: 'string' }, expires: { type: 'string', default: '1h' } } }))
} catch (error) {
  fail(`${(error as Error).message}; ${USAGE}`)
}

const { sub, expires } = values
if (sub === undefined || sub === '') fail(`--sub is required; ${USAGE}`)
const expiresInMs = parseDuration(expires)
if (expiresInMs === undefined) fail(`--expires must look like 30s, 15m, 1h or 7d (got ${JSON.stringify(expires)}); ${USAGE}`)

let secret
try {
  secret = loadSigningSecret(readEnvironment())
} catch (error) {
  if (!(error instanceof ConfigError)) throw error
  fail(`Configuration error: ${error.message}`)
}

const sign = createSigner({ key: secret, algorithm: 'HS256', expiresIn: expiresInMs })
process.stdout.write(`${sign({ sub })}\n`)
