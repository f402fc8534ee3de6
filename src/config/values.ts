/** The values of variables that are more than a number or a word: durations, lists, URLs, secrets. */
import { isIP } from 'node:net'
import { resolve } from 'node:path'
import { ConfigError } from './config-error.js'

/** A span of time as people write it: `30s`, `15m`, `1h`, `7d`. */
export const DURATION = /^([1-9][0-9]*)([smhd])$/
const MS_PER_UNIT = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const

/** Milliseconds in a span written like `30s`; undefined when it is not written so. */
export function parseDuration (text: string): number | undefined {
  const match = DURATION.exec(text)
  return match === null ? undefined : Number(match[1]) * MS_PER_UNIT[match[2] as keyof typeof MS_PER_UNIT]
}

/** An address, or a network as address/prefix length: `10.0.0.1`, `10.0.0.0/8`, `::1/128`. */
function isAddressOrNetwork (text: string): boolean {
  const [address = '', prefix, ...rest] = text.split('/')
  const version = isIP(address)
  if (version === 0 || rest.length > 0) return false
  return prefix === undefined || (/^[0-9]{1,3}$/.test(prefix) && Number(prefix) <= (version === 4 ? 32 : 128))
}

export function parseTrustProxy (text: string): false | number | string[] {
  if (text === 'off') return false
  if (/^[1-9][0-9]{0,1}$/.test(text)) return Number(text)
  const entries = text.split(',').map((entry) => entry.trim())
  if (entries.every(isAddressOrNetwork)) return entries
  throw new ConfigError(`TRUST_PROXY must be off, a hop count from 1 to 99, or a comma-separated list of addresses and networks such as 10.0.0.0/8 (got ${JSON.stringify(text)})`)
}

/** Where the users are kept: a SQLite file (or `:memory:`), or a PostgreSQL database. */
export type DatabaseConfig =
  | { dialect: 'sqlite', filename: string }
  | { dialect: 'postgres', connectionString: string, poolSize: number }

export function parseDatabaseUrl (url: string, poolSize: number): DatabaseConfig {
  if (url.startsWith('sqlite:') && url.length > 'sqlite:'.length) {
    return { dialect: 'sqlite', filename: url.slice('sqlite:'.length) }
  }
  if (/^postgres(ql)?:\/\//.test(url) && URL.canParse(url) && new URL(url).hostname !== '') {
    return { dialect: 'postgres', connectionString: url, poolSize }
  }
  throw new ConfigError('DATABASE_URL must be sqlite:<path>, sqlite::memory: or postgres://user:password@host:port/database')
}

/** Query parameters of a PostgreSQL URL that carry a credential or a key (node-postgres and libpq's). */
const CREDENTIAL_PARAMETERS = ['password', 'sslpassword', 'sslkey', 'sslcert', 'sslrootcert', 'passfile']

/**
 * The database URL as it may be shown: its password and every credential-bearing parameter as
 * `***`, a SQLite file by its absolute path.
 */
export function describeDatabase (database: DatabaseConfig): string {
  if (database.dialect === 'sqlite') return `sqlite:${database.filename === ':memory:' ? ':memory:' : resolve(database.filename)}`
  const url = new URL(database.connectionString)
  if (url.password !== '') url.password = '***'
  for (const name of [...url.searchParams.keys()]) {
    if (CREDENTIAL_PARAMETERS.includes(name.toLowerCase())) url.searchParams.set(name, '***')
  }
  return url.href.replaceAll('%2A%2A%2A', '***')
}

export function parseOrigins (list: string): string[] {
  const origins = list.split(',').map((origin) => origin.trim()).filter((origin) => origin !== '')
  for (const origin of origins) {
    if (!URL.canParse(origin) || new URL(origin).origin !== origin) {
      throw new ConfigError(`CORS_ORIGIN must be a comma-separated list of origins such as https://example.com (got ${JSON.stringify(origin)})`)
    }
  }
  if (origins.length === 0) throw new ConfigError('CORS_ORIGIN must name at least one origin')
  return origins
}
