/**
 * The environment, validated once at start-up and turned into the `Config` that `buildApp`
 * receives. Nothing else in `src/` reads `process.env` (a lint rule enforces it).
 */
import { randomBytes } from 'node:crypto'
import { existsSync, readFileSync } from 'node:fs'
import { isIP } from 'node:net'
import { totalmem } from 'node:os'
import { resolve } from 'node:path'
import { getHeapStatistics } from 'node:v8'
import { Type, type Static } from 'typebox'
import { createCoercingAjv } from './ajv.js'

/** A span of time as people write it: `30s`, `15m`, `1h`, `7d`. */
const DURATION = /^([1-9][0-9]*)([smhd])$/
const MS_PER_UNIT = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const

/** Milliseconds in a span written like `30s`; undefined when it is not written so. */
export function parseDuration (text: string): number | undefined {
  const match = DURATION.exec(text)
  return match === null ? undefined : Number(match[1]) * MS_PER_UNIT[match[2] as keyof typeof MS_PER_UNIT]
}

const EnvSchema = Type.Object({
  NODE_ENV: Type.String({ default: 'development' }),
  PORT: Type.Integer({ minimum: 0, maximum: 65535, default: 3000 }),
  HOST: Type.String({ minLength: 1, default: '0.0.0.0' }),
  DATABASE_URL: Type.String({ default: 'sqlite:data/app.db' }),
  DATABASE_POOL_SIZE: Type.Integer({ minimum: 1, maximum: 1000, default: 10 }),
  JWT_SECRET: Type.Optional(Type.String({ minLength: 1 })),
  AUTH: Type.Enum(['off', 'writes', 'all'], { default: 'off' }),
  CORS_ORIGIN: Type.Optional(Type.String({ minLength: 1 })),
  LOG_LEVEL: Type.Enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], { default: 'info' }),
  BODY_LIMIT: Type.Integer({ minimum: 1, default: 1048576 }),
  STATIC_DIR: Type.String({ minLength: 1, default: 'public' }),
  RATE_LIMIT_MAX: Type.Optional(Type.Integer({ minimum: 1 })),
  RATE_LIMIT_WINDOW: Type.String({ pattern: DURATION.source, default: '1m' }),
  OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: Type.Integer({ minimum: 0, default: 1000 }),
  OVERLOAD_MAX_HEAP_MB: Type.Optional(Type.Integer({ minimum: 0 })),
  HEADERS_TIMEOUT_MS: Type.Integer({ minimum: 1, default: 10_000 }),
  REQUEST_TIMEOUT_MS: Type.Integer({ minimum: 1, default: 30_000 }),
  KEEP_ALIVE_TIMEOUT_MS: Type.Integer({ minimum: 1, default: 72_000 }),
  MAX_CONNECTIONS: Type.Optional(Type.Integer({ minimum: 1 })),
  METRICS: Type.Enum(['on', 'off'], { default: 'on' }),
  TRUST_PROXY: Type.String({ default: 'off' }),
  IDEMPOTENCY_KEY_TTL: Type.String({ pattern: DURATION.source, default: '24h' }),
  SHUTDOWN_DRAIN_MS: Type.Optional(Type.Integer({ minimum: 0, maximum: 600_000 })),
  REDIS_URL: Type.Optional(Type.String({ pattern: '^rediss?://' })),
  // OpenTelemetry's standard variables: either endpoint turns tracing on; the exporter reads them.
  OTEL_EXPORTER_OTLP_ENDPOINT: Type.Optional(Type.String({ minLength: 1 })),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: Type.Optional(Type.String({ minLength: 1 })),
  OTEL_SERVICE_NAME: Type.String({ minLength: 1, default: 'user-records-service' })
})

type Env = Static<typeof EnvSchema>

/** Every variable the service reads. */
export const SETTINGS = Object.keys(EnvSchema.properties)

/** After the drain, how long requests in flight have to finish before the process exits 1. */
export const SHUTDOWN_GRACE_MS = 10_000

export type AuthMode = Env['AUTH']

export type DatabaseConfig =
  | { dialect: 'sqlite', filename: string }
  | { dialect: 'postgres', connectionString: string, poolSize: number }

export interface Config {
  production: boolean
  port: number
  host: string
  database: DatabaseConfig
  /** The signing secret, and whether it was generated because none was configured. */
  jwt: { secret: string, generated: boolean }
  auth: AuthMode
  /** `true` reflects any requesting origin (the specification's policy). */
  corsOrigin: true | string[]
  logLevel: string
  bodyLimit: number
  staticDir: string
  /** Requests per client address per window on API routes; undefined when off. */
  rateLimit: { max: number, windowMs: number, redisUrl: string | undefined } | undefined
  /** Above these, API routes answer 503 instead of queueing more work; 0 turns one off. */
  overload: { maxEventLoopDelayMs: number, maxHeapBytes: number }
  /** How long a client may take to send its headers, its whole request, and its next request. */
  timeouts: { headersMs: number, requestMs: number, keepAliveMs: number }
  /** Client connections open at once; more are closed as they arrive. */
  maxConnections: number
  /** Whether `/metrics` exists. */
  metrics: boolean
  /**
   * Which proxies' `X-Forwarded-For` names the client: none, the nearest N hops, or these
   * addresses.
   */
  trustProxy: false | number | string[]
  /** How long an `Idempotency-Key` of `POST /users` is kept, in milliseconds. */
  idempotencyKeyTtlMs: number
  /** After SIGTERM, how long the service goes on answering, `/ready` saying 503, before it closes. */
  shutdownDrainMs: number
  /** Traces over OTLP, with the service's name in them; undefined when off. */
  tracing: { serviceName: string } | undefined
}

/** A configuration mistake; its message is the one line printed before the process exits. */
export class ConfigError extends Error {
  override name = 'ConfigError'
}

/** Never echoed in an error message: they may hold credentials. */
const SECRET_VARIABLES = new Set(['DATABASE_URL', 'JWT_SECRET', 'REDIS_URL'])

const validateEnv = createCoercingAjv().compile<Env>(EnvSchema)

/** The process environment over `.env` from the working folder: the environment wins. */
export function readEnvironment (): Record<string, string | undefined> {
  if (existsSync('.env')) process.loadEnvFile('.env')
  return process.env
}

/**
 * Validates the environment and derives the configuration. Empty variables count as unset, as in a
 * shell's `VAR= command`.
 */
export function loadConfig (environment: Record<string, string | undefined>): Config {
  // Ajv converts the values in place (`"3000"` becomes 3000); its check then types them.
  const env: Record<string, unknown> = {}
  for (const key of Object.keys(EnvSchema.properties)) {
    const value = environment[key]
    if (value !== undefined && value !== '') env[key] = value
  }

  if (!validateEnv(env)) {
    const [error] = validateEnv.errors ?? []
    const name = error?.instancePath.slice(1) || String(error?.params.missingProperty ?? 'environment')
    const got = name in env && !SECRET_VARIABLES.has(name) ? ` (got ${JSON.stringify(env[name])})` : ''
    const problem = error?.keyword === 'enum'
      ? `must be one of ${(error.params.allowedValues as string[]).join(', ')}`
      : error?.keyword === 'pattern' && error.params.pattern === DURATION.source
        ? 'must be a duration such as 30s, 15m, 1h or 7d'
        : error?.message ?? 'is invalid'
    throw new ConfigError(`${name} ${problem}${got}`)
  }
  const parsed: Env = env
  const production = parsed.NODE_ENV === 'production'

  if (parsed.HEADERS_TIMEOUT_MS > parsed.REQUEST_TIMEOUT_MS) {
    throw new ConfigError('HEADERS_TIMEOUT_MS must not be more than REQUEST_TIMEOUT_MS')
  }

  if (parsed.JWT_SECRET === undefined) {
    if (production) throw new ConfigError('JWT_SECRET is required when NODE_ENV=production')
    // A generated secret is known to no one, so no client could get a token.
    if (parsed.AUTH !== 'off') throw new ConfigError(`JWT_SECRET is required when AUTH=${parsed.AUTH}`)
  } else if (production) {
    checkSecretStrength(parsed.JWT_SECRET)
  }

  const database = parseDatabaseUrl(parsed.DATABASE_URL, parsed.DATABASE_POOL_SIZE)
  return {
    production,
    port: parsed.PORT,
    host: parsed.HOST,
    database,
    jwt: parsed.JWT_SECRET === undefined
      ? { secret: randomBytes(32).toString('base64url'), generated: true }
      : { secret: parsed.JWT_SECRET, generated: false },
    auth: parsed.AUTH,
    corsOrigin: parsed.CORS_ORIGIN === undefined ? true : parseOrigins(parsed.CORS_ORIGIN),
    logLevel: parsed.LOG_LEVEL,
    bodyLimit: parsed.BODY_LIMIT,
    staticDir: parsed.STATIC_DIR,
    rateLimit: parsed.RATE_LIMIT_MAX === undefined
      ? undefined
      : { max: parsed.RATE_LIMIT_MAX, windowMs: parseDuration(parsed.RATE_LIMIT_WINDOW) as number, redisUrl: parsed.REDIS_URL },
    overload: {
      maxEventLoopDelayMs: parsed.OVERLOAD_MAX_EVENT_LOOP_DELAY_MS,
      maxHeapBytes: heapToShedAt(parsed.OVERLOAD_MAX_HEAP_MB)
    },
    timeouts: {
      headersMs: parsed.HEADERS_TIMEOUT_MS,
      requestMs: parsed.REQUEST_TIMEOUT_MS,
      keepAliveMs: parsed.KEEP_ALIVE_TIMEOUT_MS
    },
    maxConnections: connectionLimit(parsed.MAX_CONNECTIONS, database),
    metrics: parsed.METRICS === 'on',
    trustProxy: parseTrustProxy(parsed.TRUST_PROXY),
    idempotencyKeyTtlMs: parseDuration(parsed.IDEMPOTENCY_KEY_TTL) as number,
    // Behind a load balancer (production) it takes a few health checks to notice; at a
    // terminal or in tests there is none to wait for.
    shutdownDrainMs: parsed.SHUTDOWN_DRAIN_MS ?? (production ? DEFAULT_DRAIN_MS : 0),
    tracing: parsed.OTEL_EXPORTER_OTLP_ENDPOINT === undefined && parsed.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT === undefined
      ? undefined
      : { serviceName: parsed.OTEL_SERVICE_NAME }
  }
}

/** An address, or a network as address/prefix length: `10.0.0.1`, `10.0.0.0/8`, `::1/128`. */
function isAddressOrNetwork (text: string): boolean {
  const [address = '', prefix, ...rest] = text.split('/')
  const version = isIP(address)
  if (version === 0 || rest.length > 0) return false
  return prefix === undefined || (/^[0-9]{1,3}$/.test(prefix) && Number(prefix) <= (version === 4 ? 32 : 128))
}

function parseTrustProxy (text: string): Config['trustProxy'] {
  if (text === 'off') return false
  if (/^[1-9][0-9]{0,1}$/.test(text)) return Number(text)
  const entries = text.split(',').map((entry) => entry.trim())
  if (entries.every(isAddressOrNetwork)) return entries
  throw new ConfigError(`TRUST_PROXY must be off, a hop count from 1 to 99, or a comma-separated list of addresses and networks such as 10.0.0.0/8 (got ${JSON.stringify(text)})`)
}

const DEFAULT_DRAIN_MS = 5000

const MB = 1024 * 1024

/**
 * The heap in use past which API routes shed load: below the heap V8 allows, or the process runs
 * out of heap before it sheds anything.
 */
function heapToShedAt (megabytes: number | undefined): number {
  const limitMb = Math.floor(getHeapStatistics().heap_size_limit / MB)
  if (megabytes === undefined) return Math.min(1024, Math.floor(limitMb * 0.75)) * MB
  if (megabytes >= limitMb) {
    throw new ConfigError(`OVERLOAD_MAX_HEAP_MB must be below the heap this process may have, ${limitMb} MB (set by Node from the memory ` +
      `of the machine or container, or by --max-old-space-size), or it could never shed load; 0 turns it off (got ${megabytes})`)
  }
  return megabytes * MB
}

/** Descriptors kept for everything but client connections and PostgreSQL's pool: files being sent (at most 64, plugins/file-limit.ts), SQLite's files, logs, Node's own. */
const RESERVED_DESCRIPTORS = 128

/**
 * The memory kept for each client connection by default: a client that does not read its page holds
 * what the kernel has not taken of it.
 */
const MEMORY_PER_CONNECTION = 128 * 1024

/**
 * How many client connections may be open at once: by default what the open-file limit leaves after
 * the pool and a reserve, and what memory allows (docs/decisions/0008-connection-limit.md).
 */
function connectionLimit (setting: number | undefined, database: DatabaseConfig): number {
  const openFiles = openFileLimit()
  const pool = database.dialect === 'postgres' ? database.poolSize : 0
  const available = openFiles - RESERVED_DESCRIPTORS - pool
  const budget = `the open-file limit is ${openFiles}, less ${RESERVED_DESCRIPTORS} kept for the process` +
    (pool > 0 ? ` and ${pool} for DATABASE_POOL_SIZE` : '')
  if (available < 1) {
    throw new ConfigError(`No open file is left for client connections: ${budget} (raise the limit${pool > 0 ? ', or lower DATABASE_POOL_SIZE' : ''})`)
  }
  if (setting === undefined) return Math.min(available, Math.floor(processMemory() / MEMORY_PER_CONNECTION))
  if (setting > available) {
    throw new ConfigError(`MAX_CONNECTIONS must be at most ${available}: ${budget} (raise the limit, or lower MAX_CONNECTIONS) (got ${setting})`)
  }
  return setting
}

/** The memory the process may have: its control group's limit (a container's), or the machine's where that is lower or unset. */
function processMemory (): number {
  return Math.min(process.constrainedMemory() || Infinity, totalmem())
}

/** The process's soft limit of open files, from /proc/self/limits; Infinity where there is none or it cannot be read. */
function openFileLimit (): number {
  let limits: string
  try {
    limits = readFileSync('/proc/self/limits', 'utf8')
  } catch {
    return Infinity
  }
  const soft = /^Max open files\s+(\d+|unlimited)/m.exec(limits)?.[1]
  return soft === undefined || soft === 'unlimited' ? Infinity : Number(soft)
}

function parseDatabaseUrl (url: string, poolSize: number): DatabaseConfig {
  if (url.startsWith('sqlite:') && url.length > 'sqlite:'.length) {
    return { dialect: 'sqlite', filename: url.slice('sqlite:'.length) }
  }
  if (/^postgres(ql)?:\/\//.test(url) && URL.canParse(url) && new URL(url).hostname !== '') {
    return { dialect: 'postgres', connectionString: url, poolSize }
  }
  throw new ConfigError('DATABASE_URL must be sqlite:<path>, sqlite::memory: or postgres://user:password@host:port/database')
}

/** The minimum for an HS256 secret: as many bytes as the hash it keys (RFC 7518 §3.2). */
const MIN_SECRET_BYTES = 32

function checkSecretStrength (secret: string): void {
  if (Buffer.byteLength(secret) < MIN_SECRET_BYTES) {
    throw new ConfigError(`JWT_SECRET must be at least ${MIN_SECRET_BYTES} bytes when NODE_ENV=production`)
  }
}

/** The signing secret alone, for `npm run token`, with the same rules. */
export function loadSigningSecret (environment: Record<string, string | undefined>): string {
  const secret = environment.JWT_SECRET
  if (secret === undefined || secret === '') throw new ConfigError('JWT_SECRET is not set: tokens are signed with it')
  if (environment.NODE_ENV === 'production') checkSecretStrength(secret)
  return secret
}

/**
 * The database URL as it may be shown: any password as `***`, a SQLite file by its absolute path.
 */
export function describeDatabase (database: DatabaseConfig): string {
  if (database.dialect === 'sqlite') return `sqlite:${database.filename === ':memory:' ? ':memory:' : resolve(database.filename)}`
  const url = new URL(database.connectionString)
  if (url.password !== '') url.password = '***'
  return url.href
}

function parseOrigins (list: string): string[] {
  const origins = list.split(',').map((origin) => origin.trim()).filter((origin) => origin !== '')
  for (const origin of origins) {
    if (!URL.canParse(origin) || new URL(origin).origin !== origin) {
      throw new ConfigError(`CORS_ORIGIN must be a comma-separated list of origins such as https://example.com (got ${JSON.stringify(origin)})`)
    }
  }
  if (origins.length === 0) throw new ConfigError('CORS_ORIGIN must name at least one origin')
  return origins
}
