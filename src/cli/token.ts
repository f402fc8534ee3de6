/**
 * `npm run token -- --sub <subject> [--expires 1h]`: prints an HS256 token signed with
 * JWT_SECRET, the kind the service accepts when AUTH asks for one.
 */
import { parseArgs } from 'node:util'
import { createSigner } from 'fast-jwt'
import { ConfigError, loadSigningSecret, readEnvironment } from '../config.js'

const USAGE = 'usage: npm run token -- --sub <subject> [--expires <number><s|m|h|d>, default 1h]'
const DURATION = /^([1-9][0-9]*)([smhd])$/
const SECONDS_PER_UNIT = { s: 1, m: 60, h: 3600, d: 86400 } as const

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
const duration = DURATION.exec(expires)
if (duration === null) fail(`--expires must look like 30s, 15m, 1h or 7d (got ${JSON.stringify(expires)}); ${USAGE}`)

let secret
try {
  secret = loadSigningSecret(readEnvironment())
} catch (error) {
  if (!(error instanceof ConfigError)) throw error
  fail(`Configuration error: ${error.message}`)
}

const seconds = Number(duration[1]) * SECONDS_PER_UNIT[duration[2] as keyof typeof SECONDS_PER_UNIT]
const sign = createSigner({ key: secret, algorithm: 'HS256', expiresIn: seconds * 1000 })
process.stdout.write(`${sign({ sub })}\n`)
