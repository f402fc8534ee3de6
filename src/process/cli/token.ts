/**
 * `npm run token -- --sub <subject> [--expires 1h] [--scope "users:read users:write"]`: prints an
 * HS256 token signed with JWT_SECRET, the kind the service accepts in its shared-secret mode.
 */
import '../supported-node.js'
import { parseArgs } from 'node:util'
import { createSigner } from 'fast-jwt'
import { ConfigError, loadMaxLifetime, loadSigningSecret, parseDuration, readEnvironment } from '../../config/config.js'

const USAGE = 'usage: npm run token -- --sub <subject> [--expires <number><s|m|h|d>, default 1h] [--scope "<scope> <scope>…"]'

function fail (message: string): never {
  process.stderr.write(`${message}\n`)
  process.exit(1)
}

let values
try {
  ({ values } = parseArgs({ options: { sub: { type: 'string' }, expires: { type: 'string', default: '1h' }, scope: { type: 'string' } } }))
} catch (error) {
  fail(`${(error as Error).message}; ${USAGE}`)
}

const { sub, expires, scope } = values
if (sub === undefined || sub === '') fail(`--sub is required; ${USAGE}`)
const expiresInMs = parseDuration(expires)
if (expiresInMs === undefined) fail(`--expires must look like 30s, 15m, 1h or 7d (got ${JSON.stringify(expires)}); ${USAGE}`)

let secret, maxLifetime
try {
  const environment = readEnvironment()
  maxLifetime = loadMaxLifetime(environment)
  secret = loadSigningSecret(environment)
} catch (error) {
  if (!(error instanceof ConfigError)) throw error
  fail(`Configuration error: ${error.message}`)
}
// The service refuses a token that lives longer than JWT_MAX_LIFETIME: none is minted.
if (expiresInMs > maxLifetime.ms) fail(`--expires ${expires} is longer than the service accepts (JWT_MAX_LIFETIME=${maxLifetime.text})`)

const sign = createSigner({ key: secret, algorithm: 'HS256', expiresIn: expiresInMs })
const scopes = scope?.split(' ').filter((one) => one !== '') ?? []
process.stdout.write(`${sign({ sub, ...(scopes.length > 0 && { scope: scopes.join(' ') }) })}\n`)
