/**
 * The environment, validated once at start-up and turned into the `Config` that `buildApp`
 * receives. Nothing else in `src/` reads `process.env` (a lint rule enforces it).
 */
import { existsSync, readFileSync } from 'node:fs'
import { Type, type Static } from 'typebox'
import { createCoercingAjv } from '../validation/ajv.js'
import { ConfigError } from './config-error.js'
import { type EventsConfig, parseEventsConfig } from './events.js'
import { connectionLimit, heapToShedAt } from './limits.js'
import { DEFAULT_MAX_LIFETIME, DEFAULT_SCOPE_CLAIMS, parseTokenConfig, type TokenConfig } from './tokens.js'
import { type DatabaseConfig, DURATION, parseDatabaseUrl, parseDuration, parseOrigins, parseTrustProxy } from './values.js'

export { ConfigError } from './config-error.js'
export { loadMaxLifetime, loadSigningSecret } from './tokens.js'
export { describeDatabase, parseDuration } from './values.js'

/** Every variable the service reads, its type, bounds and default; docs/configuration.md's table is checked against it. */
export const EnvSchema = Type.Object({
  NODE_ENV: Type.String({ default: 'development' }),
  PORT: Type.Integer({ minimum: 0, maximum: 65535, default: 3000 }),
  HOST: Type.String({ minLength: 1, default: '0.0.0.0' }),
  DATABASE_URL: Type.String({ default: 'sqlite:data/app.db' }),
  DATABASE_POOL_SIZE: Type.Integer({ minimum: 1, maximum: 1000, default: 10 }),
  MIGRATE: Type.Enum(['on', 'off'], { default: 'on' }),
  JWT_SECRET: Type.Optional(Type.String({ minLength: 1 })),
  JWT_JWKS_URL: Type.Optional(Type.String({ pattern: '^https?://[^/]' })),
  JWT_PUBLIC_KEY: Type.Optional(Type.String({ minLength: 1 })),
  JWT_ALGORITHMS: Type.Optional(Type.String({ minLength: 1 })),
  JWT_ISSUER: Type.Optional(Type.String({ minLength: 1 })),
  JWT_AUDIENCE: Type.Optional(Type.String({ minLength: 1 })),
  JWT_MAX_LIFETIME: Type.String({ pattern: DURATION.source, default: DEFAULT_MAX_LIFETIME }),
  JWT_TYP: Type.Optional(Type.String({ pattern: '[^,\\s]' })),
  JWT_SCOPE_CLAIMS: Type.String({ pattern: '^[A-Za-z0-9_:.-]+( *, *[A-Za-z0-9_:.-]+)*$', default: DEFAULT_SCOPE_CLAIMS }),
  AUTH: Type.Enum(['off', 'writes', 'all'], { default: 'off' }),
  AUTH_SCOPES: Type.Enum(['on', 'off'], { default: 'off' }),
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
  METRICS: Type.Enum(['on', 'off', 'public'], { default: 'on' }),
  METRICS_PORT: Type.Optional(Type.Integer({ minimum: 1, maximum: 65535 })),
  TRUST_PROXY: Type.String({ default: 'off' }),
  IDEMPOTENCY_KEY_TTL: Type.String({ pattern: DURATION.source, default: '24h' }),
  REQUIRE_IF_MATCH: Type.Enum(['on', 'off'], { default: 'off' }),
  USER_OWNERSHIP: Type.Enum(['on', 'off'], { default: 'off' }),
  SHUTDOWN_DRAIN_MS: Type.Optional(Type.Integer({ minimum: 0, maximum: 600_000 })),
  REDIS_URL: Type.Optional(Type.String({ pattern: '^rediss?://' })),
  EVENTS_RETENTION: Type.String({ pattern: DURATION.source, default: '7d' }),
  EVENTS_HEARTBEAT_MS: Type.Integer({ minimum: 100, maximum: 3_600_000, default: 15_000 }),
  EVENTS_MAX_READERS: Type.Optional(Type.Integer({ minimum: 1 })),
  EVENTS_MAX_READERS_PER_CLIENT: Type.Optional(Type.Integer({ minimum: 1 })),
  WEBHOOK_URLS: Type.Optional(Type.String({ minLength: 1 })),
  WEBHOOK_SECRET: Type.Optional(Type.String({ minLength: 1 })),
  WEBHOOK_RETRY_FOR: Type.String({ pattern: DURATION.source, default: '24h' }),
  WEBHOOK_RETRY_BASE_MS: Type.Integer({ minimum: 1, maximum: 3_600_000, default: 1000 }),
  // OpenTelemetry's standard variables: either endpoint turns tracing on; the exporter reads them.
  OTEL_EXPORTER_OTLP_ENDPOINT: Type.Optional(Type.String({ minLength: 1 })),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: Type.Optional(Type.String({ minLength: 1 })),
  OTEL_SERVICE_NAME: Type.String({ minLength: 1, default: 'user-records-service' })
})

type Env = Static<typeof EnvSchema>

/** Never echoed in an error message: they may hold credentials. */
const SECRET_VARIABLES = ['DATABASE_URL', 'JWT_SECRET', 'REDIS_URL', 'WEBHOOK_URLS', 'WEBHOOK_SECRET']

/**
 * Each secret may be given as the path of a file that holds it, `<NAME>_FILE`, as official images
 * take theirs: a container's secrets are mounted as files.
 */
export const FILE_SETTINGS = SECRET_VARIABLES.map((name) => `${name}_FILE`)

/** Every variable the service reads. */
export const SETTINGS = [...Object.keys(EnvSchema.properties), ...FILE_SETTINGS]

/** How long the service drains after SIGTERM in production, for load balancers to notice. */
const DEFAULT_DRAIN_MS = 5000

/** After the drain, how long requests in flight have to finish before the process exits 1. */
export const SHUTDOWN_GRACE_MS = 10_000

export type AuthMode = Env['AUTH']

export type { DatabaseConfig } from './values.js'

export interface Config {
  production: boolean
  port: number
  host: string
  database: DatabaseConfig
  /** Whether start-up migrates the database, or only checks that it is migrated. */
  migrate: boolean
  /** How tokens are verified, and the claims they must hold. */
  jwt: TokenConfig
  auth: AuthMode
  /** Whether each protected route asks for a scope: `users:read` to read, `users:write` to write. */
  authScopes: boolean
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
   * Who may read `/metrics` on the API's port: anyone (`METRICS=public`), a token's holder
   * whatever `AUTH` says (production), or whoever may read the API.
   */
  metricsAccess: 'public' | 'token' | 'auth'
  /** The port `/metrics` is served on instead of the API's, when set. */
  metricsPort: number | undefined
  /**
   * Which proxies' `X-Forwarded-For` names the client: none, the nearest N hops, or these
   * addresses.
   */
  trustProxy: false | number | string[]
  /** How long an `Idempotency-Key` of `POST /users` is kept, in milliseconds. */
  idempotencyKeyTtlMs: number
  /** Whether `PATCH` and `DELETE` of a user without `If-Match` are refused (428). */
  requireIfMatch: boolean
  /** Whether a user may be changed or erased only by the token that stored it, or one granting `users:admin`. */
  userOwnership: boolean
  /** After SIGTERM, how long the service goes on answering, `/ready` saying 503, before it closes. */
  shutdownDrainMs: number
  /** Traces over OTLP, with the service's name in them; undefined when off. */
  tracing: { serviceName: string } | undefined
  /** The change feed: how long events are kept, and the webhooks. */
  events: EventsConfig
}

const validateEnv = createCoercingAjv().compile<Env>(EnvSchema)

/**
 * The process environment over `.env` from the working folder (the environment wins), with each
 * `<NAME>_FILE` read into `<NAME>`.
 */
export function readEnvironment (): Record<string, string | undefined> {
  if (existsSync('.env')) process.loadEnvFile('.env')
  return readSecretFiles(process.env)
}

/**
 * `<NAME>` from the file `<NAME>_FILE` names, without the line breaks that end it, as a shell's
 * `$(cat file)` reads it. Both set is a mistake to be told, not a choice to be made.
 */
export function readSecretFiles (environment: Record<string, string | undefined>): Record<string, string | undefined> {
  const resolved = { ...environment }
  for (const name of SECRET_VARIABLES) {
    const path = environment[`${name}_FILE`]
    if (path === undefined || path === '') continue
    if (environment[name] !== undefined && environment[name] !== '') throw new ConfigError(`${name} and ${name}_FILE are both set: set one of them`)
    try {
      resolved[name] = readFileSync(path, 'utf8').replace(/[\r\n]+$/, '')
    } catch (error) {
      throw new ConfigError(`${name}_FILE names a file that cannot be read (${path}): ${(error as NodeJS.ErrnoException).code ?? String(error)}`)
    }
  }
  return resolved
}

/**
 * The database settings alone, for the tools that need nothing else (`npm run migrate`, `npm run
 * backup`): a migration needs no token secret, whatever `NODE_ENV` says.
 */
export function loadDatabaseConfig (environment: Record<string, string | undefined>): DatabaseConfig {
  return loadConfig({ DATABASE_URL: environment.DATABASE_URL, DATABASE_POOL_SIZE: environment.DATABASE_POOL_SIZE }).database
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
    const got = name in env && !SECRET_VARIABLES.includes(name) ? ` (got ${JSON.stringify(env[name])})` : ''
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

  if (parsed.METRICS_PORT !== undefined && parsed.METRICS_PORT === parsed.PORT) throw new ConfigError('METRICS_PORT must differ from PORT: it serves /metrics apart from the API')

  if (parsed.AUTH_SCOPES === 'on' && parsed.AUTH === 'off') throw new ConfigError('AUTH_SCOPES=on needs AUTH=writes or AUTH=all: with AUTH=off no token is asked for')
  if (parsed.USER_OWNERSHIP === 'on' && parsed.AUTH === 'off') throw new ConfigError('USER_OWNERSHIP=on needs AUTH=writes or AUTH=all: with AUTH=off no write names its caller')

  const database = parseDatabaseUrl(parsed.DATABASE_URL, parsed.DATABASE_POOL_SIZE)
  const maxConnections = connectionLimit(parsed.MAX_CONNECTIONS, database)
  return {
    production,
    port: parsed.PORT,
    host: parsed.HOST,
    database,
    migrate: parsed.MIGRATE === 'on',
    jwt: parseTokenConfig(parsed, parsed.AUTH !== 'off'),
    auth: parsed.AUTH,
    authScopes: parsed.AUTH_SCOPES === 'on',
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
    maxConnections,
    metrics: parsed.METRICS !== 'off',
    metricsAccess: parsed.METRICS === 'public' ? 'public' : production ? 'token' : 'auth',
    metricsPort: parsed.METRICS !== 'off' ? parsed.METRICS_PORT : undefined,
    trustProxy: parseTrustProxy(parsed.TRUST_PROXY),
    idempotencyKeyTtlMs: parseDuration(parsed.IDEMPOTENCY_KEY_TTL) as number,
    requireIfMatch: parsed.REQUIRE_IF_MATCH === 'on',
    userOwnership: parsed.USER_OWNERSHIP === 'on',
    // Behind a load balancer (production) it takes a few health checks to notice; at a
    // terminal or in tests there is none to wait for.
    shutdownDrainMs: parsed.SHUTDOWN_DRAIN_MS ?? (production ? DEFAULT_DRAIN_MS : 0),
    tracing: parsed.OTEL_EXPORTER_OTLP_ENDPOINT === undefined && parsed.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT === undefined
      ? undefined
      : { serviceName: parsed.OTEL_SERVICE_NAME },
    events: parseEventsConfig(parsed, maxConnections)
  }
}
