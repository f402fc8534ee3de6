/**
 * The change feed's settings: how long events are kept, and where webhooks go, signed with what,
 * retried for how long (the Standard Webhooks specification's secret: `whsec_` and base64).
 */
import { ConfigError } from './config-error.js'
import { parseDuration } from './values.js'

export interface WebhookConfig {
  /** Each endpoint gets every event, in order; written without the credentials of `authorization`. */
  urls: string[]
  /** Basic authentication of the endpoints whose entry carried `user:password@`, by their URL. */
  authorization: Record<string, string>
  /** The HMAC-SHA256 key, decoded from `whsec_…`. */
  key: Buffer
  /** How long an event is retried before it is kept as failed. */
  retryForMs: number
  /** The first retry's delay; each next one doubles, up to RETRY_DELAY_CAP_MS. */
  retryBaseMs: number
}

export interface EventsConfig {
  /** Events older than this are purged, once every webhook endpoint is past them. */
  retentionMs: number
  /** Streams of `GET /events` open at once on this instance, and for one client (a token's subject, else an address). */
  maxReaders: number
  maxReadersPerClient: number
  /** How often an idle stream sends a comment, so that proxies keep it open. */
  heartbeatMs: number
  webhooks: WebhookConfig | undefined
}

/** A WEBHOOK_URLS entry as an error message may show it: whatever stands between `//` and `@` is masked. */
const withoutPassword = (entry: string) => entry.replace(/\/\/[^/@]*@/, '//***@')

const SECRET = /^whsec_([A-Za-z0-9+/]+={0,2})$/

/** Streams for one client unless EVENTS_MAX_READERS_PER_CLIENT says otherwise: a few tabs or processes of one user. */
const DEFAULT_READERS_PER_CLIENT = 8

export function parseEventsConfig (env: {
  EVENTS_RETENTION: string
  EVENTS_HEARTBEAT_MS: number
  EVENTS_MAX_READERS?: number | undefined
  EVENTS_MAX_READERS_PER_CLIENT?: number | undefined
  WEBHOOK_URLS?: string | undefined
  WEBHOOK_SECRET?: string | undefined
  WEBHOOK_RETRY_FOR: string
  WEBHOOK_RETRY_BASE_MS: number
}, maxConnections: number): EventsConfig {
  // Streams hold their connections for as long as they are open: at most half of them, so that
  // streams alone never fill the connection limit.
  const readersBound = Math.max(1, Math.floor(maxConnections / 2))
  const maxReaders = env.EVENTS_MAX_READERS ?? readersBound
  if (maxReaders > readersBound) {
    throw new ConfigError(`EVENTS_MAX_READERS must be at most half of MAX_CONNECTIONS (${maxConnections}), ${readersBound}: raise MAX_CONNECTIONS first (got ${maxReaders})`)
  }
  const common = {
    retentionMs: parseDuration(env.EVENTS_RETENTION) as number,
    heartbeatMs: env.EVENTS_HEARTBEAT_MS,
    maxReaders,
    maxReadersPerClient: Math.min(env.EVENTS_MAX_READERS_PER_CLIENT ?? DEFAULT_READERS_PER_CLIENT, maxReaders)
  }
  if (env.WEBHOOK_URLS === undefined) {
    if (env.WEBHOOK_SECRET !== undefined) throw new ConfigError('WEBHOOK_SECRET is set but WEBHOOK_URLS is not: set both, or neither')
    return { ...common, webhooks: undefined }
  }
  const urls: string[] = []
  const authorization: Record<string, string> = {}
  for (const entry of env.WEBHOOK_URLS.split(',').map((one) => one.trim())) {
    const parsed = URL.canParse(entry) ? new URL(entry) : undefined
    if (parsed === undefined || !['http:', 'https:'].includes(parsed.protocol)) throw new ConfigError(`WEBHOOK_URLS must be http or https URLs, comma-separated (got ${JSON.stringify(withoutPassword(entry))})`)
    // Credentials in the URL are sent as Basic authentication (RFC 7617) and the URL is kept and
    // logged without them; an entry without them stays as written, since its cursor is kept by that text.
    if (parsed.username === '' && parsed.password === '') {
      urls.push(entry)
      continue
    }
    let credentials: string
    try {
      credentials = `${decodeURIComponent(parsed.username)}:${decodeURIComponent(parsed.password)}`
    } catch {
      throw new ConfigError(`WEBHOOK_URLS has an entry whose user or password is not valid percent-encoding (${JSON.stringify(withoutPassword(entry))})`)
    }
    parsed.username = ''
    parsed.password = ''
    urls.push(parsed.href)
    authorization[parsed.href] = `Basic ${Buffer.from(credentials).toString('base64')}`
  }
  if (new Set(urls).size !== urls.length) throw new ConfigError('WEBHOOK_URLS names an endpoint twice')
  const secret = SECRET.exec(env.WEBHOOK_SECRET ?? '')
  const key = secret === null ? undefined : Buffer.from(secret[1]!, 'base64')
  if (key === undefined || key.length < 24 || key.length > 64) {
    throw new ConfigError('WEBHOOK_SECRET must be whsec_ and 24 to 64 bytes in base64, as the Standard Webhooks specification gives it (make one with: echo whsec_$(openssl rand -base64 32))')
  }
  return { ...common, webhooks: { urls, authorization, key, retryForMs: parseDuration(env.WEBHOOK_RETRY_FOR) as number, retryBaseMs: env.WEBHOOK_RETRY_BASE_MS } }
}
