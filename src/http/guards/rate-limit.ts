/**
 * Rate limiting per client address when RATE_LIMIT_MAX is set, shared through Redis with REDIS_URL.
 * A limiter must never be why a request fails: while Redis cannot answer, requests go unlimited.
 */
import { once } from 'node:events'
import rateLimit from '@fastify/rate-limit'
import type { FastifyInstance } from 'fastify'
import type { Redis } from 'ioredis'
import { AppError } from '../errors.js'
import { errorResponse, type HeaderSchema, RETRY_AFTER } from '../schemas.js'

const RATE_LIMIT_HEADERS: Record<string, HeaderSchema> = {
  'RateLimit-Limit': { type: 'integer', description: 'Requests allowed per window.', required: false },
  'RateLimit-Remaining': { type: 'integer', description: 'Requests left in this window.', required: false },
  'RateLimit-Reset': { type: 'integer', description: 'Seconds until the window resets.', required: false }
}

const CONNECT_TIMEOUT_MS = 1000
const COMMAND_TIMEOUT_MS = 250
const NAMESPACE = 'user-records-rate-limit:'
/** Written once on each new connection, to learn that it takes writes before limiting is said to be back. */
const PROBE_KEY = `${NAMESPACE}probe`
const UNAVAILABLE = 'Redis unavailable: requests are served without rate limiting until it is back'
const RECONNECTING = 'Redis cannot keep the counts now: reconnecting; requests are served without rate limiting until it can'

/**
 * Redis for the counters, failing fast while unreachable, and replacing a connection that stops
 * answering or lands on a replica (docs/decisions/0019-redis-watchdog.md). Start-up waits for one
 * connection attempt at most, so a service whose Redis is down starts, unlimited.
 */
async function sharedCounters (app: FastifyInstance, url: string): Promise<Redis> {
  // Loaded only here, so that a service without REDIS_URL never loads the client's modules. Taken
  // from the CommonJS module's exports object, the only name its bundled chunk keeps.
  const { Redis: RedisClient } = (await import('ioredis')).default
  let available = true
  const down = (error: Error, message: string) => {
    if (!available) return
    available = false
    app.log.warn({ err: error }, message)
  }
  const redis = new RedisClient(url, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    connectTimeout: CONNECT_TIMEOUT_MS,
    commandTimeout: COMMAND_TIMEOUT_MS,
    // A connection whose server vanished or hung is destroyed at the first command it leaves unanswered.
    socketTimeout: COMMAND_TIMEOUT_MS,
    // A Redis made a replica by a failover refuses writes: a new connection finds the primary.
    reconnectOnError: (error) => {
      const readOnly = error.message.startsWith('READONLY')
      if (readOnly) down(error, RECONNECTING)
      return readOnly
    },
    // A connection being closed is destroyed if its far end has not closed it by then: one that
    // vanished never will.
    disconnectTimeout: COMMAND_TIMEOUT_MS,
    retryStrategy: (attempt) => Math.min(attempt * 200, 2000)
  })
  redis.on('error', (error: Error) => {
    // A connection that was working and stopped answering, or one that cannot be made.
    down(error, redis.status === 'ready' ? RECONNECTING : UNAVAILABLE)
  })
  redis.on('ready', () => {
    redis.set(PROBE_KEY, '1', 'PX', 1000).then(() => {
      if (available) return
      available = true
      app.log.info('Redis available again: rate limiting is back')
    }, () => {})
  })
  app.addHook('onClose', async () => { redis.disconnect() })
  await once(redis, 'ready', { signal: AbortSignal.timeout(CONNECT_TIMEOUT_MS) }).catch(() => {})
  return redis
}

/**
 * The guard that counts each client's requests, on every route that declares it, in one count per
 * client whatever the route.
 */
export async function limitRate (app: FastifyInstance, options: { max: number, windowMs: number, redisUrl: string | undefined }) {
  await app.register(rateLimit, {
    global: false,
    max: options.max,
    timeWindow: options.windowMs,
    enableDraftSpec: true,
    ...(options.redisUrl !== undefined && { redis: await sharedCounters(app, options.redisUrl), nameSpace: NAMESPACE, skipOnError: true }),
    errorResponseBuilder: (_request, context) => new AppError('rate_limited', { after: context.after })
  })
  return {
    hook: app.rateLimit(),
    responses: { 429: errorResponse(['rate_limited'], 'Too many requests from this client; retry after `Retry-After` seconds.', { 'Retry-After': RETRY_AFTER }) },
    headers: RATE_LIMIT_HEADERS
  }
}
