/**
 * Rate limiting for the API routes, per client address, when RATE_LIMIT_MAX is set. Answers
 * 429 with Retry-After and the IETF draft's RateLimit-* headers, which every answer the
 * limiter saw carries too (a request shed for overload is answered before it).
 *
 * With REDIS_URL the counters live in Redis, so that instances share one budget per client.
 * A limiter must never be why a request fails: while Redis cannot answer, requests are served
 * without limiting (one warning as it goes, one line as it is back), and commands fail fast
 * instead of queueing, so that no request waits for a Redis that is gone.
 */
import { once } from 'node:events'
import rateLimit from '@fastify/rate-limit'
import type { FastifyInstance } from 'fastify'
import type { Redis } from 'ioredis'
import fp from 'fastify-plugin'
import { AppError, errorResponse, RETRY_AFTER } from '../errors.js'
import { addHeaders, addResponses, type HeaderSchema } from '../route-schemas.js'

const RATE_LIMIT_HEADERS: Record<string, HeaderSchema> = {
  'RateLimit-Limit': { type: 'integer', description: 'Requests allowed per window.', required: false },
  'RateLimit-Remaining': { type: 'integer', description: 'Requests left in this window.', required: false },
  'RateLimit-Reset': { type: 'integer', description: 'Seconds until the window resets.', required: false }
}

const CONNECT_TIMEOUT_MS = 1000
const COMMAND_TIMEOUT_MS = 250
/** How often Redis is checked by a write, which must be answered within COMMAND_TIMEOUT_MS. */
const WATCHDOG_INTERVAL_MS = 1000
const NAMESPACE = 'user-records-rate-limit:'
const WATCHDOG_KEY = `${NAMESPACE}watchdog`

/**
 * Redis for the counters, failing fast while it is unreachable, reconnecting by itself. Start-up
 * waits for the first connection for as long as one attempt may take, not longer: a service
 * whose Redis is down starts all the same, unlimited until Redis is back.
 */
async function sharedCounters (app: FastifyInstance, url: string): Promise<Redis> {
  // Loaded only here, so that a service without REDIS_URL never loads the client's modules.
  const { Redis } = await import('ioredis')
  const redis = new Redis(url, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    connectTimeout: CONNECT_TIMEOUT_MS,
    commandTimeout: COMMAND_TIMEOUT_MS,
    // A connection being closed is destroyed if its far end has not closed it by then: one that
    // vanished never will.
    disconnectTimeout: COMMAND_TIMEOUT_MS,
    retryStrategy: (attempt) => Math.min(attempt * 200, 2000)
  })
  let available = true
  const down = (error: Error, message: string) => {
    if (!available) return
    available = false
    app.log.warn({ err: error }, message)
  }
  redis.on('error', (error: Error) => { down(error, 'Redis unavailable: requests are served without rate limiting until it is back') })
  // Each second a key is written, as the limiter writes its counts, and limiting is "back"
  // once one is. A connection whose far end vanished without a word (Redis failed over, its
  // host lost, the process hung) stays open, and every count on it would wait out its timeout,
  // each request with it, until the kernel gave up on it many minutes on; a Redis that takes no
  // writes (the old primary, a replica once a failover has moved the primary) refuses every
  // count, which the limiter skips without a word. Either way the connection is replaced, and
  // reconnecting reaches whatever server the URL names by then.
  let closing = false
  const watchdog = setInterval(() => {
    if (redis.status !== 'ready') return
    redis.set(WATCHDOG_KEY, '1', 'PX', 2 * WATCHDOG_INTERVAL_MS).then(() => {
      if (available) return
      available = true
      app.log.info('Redis available again: rate limiting is back')
    }, (error: Error) => {
      if (closing) return
      down(error, 'Redis cannot keep the counts now: reconnecting; requests are served without rate limiting until it can')
      redis.disconnect(true)
    })
  }, WATCHDOG_INTERVAL_MS).unref()
  app.addHook('onClose', async () => {
    closing = true
    clearInterval(watchdog)
    redis.disconnect()
  })
  await once(redis, 'ready', { signal: AbortSignal.timeout(CONNECT_TIMEOUT_MS) }).catch(() => {})
  return redis
}

async function rateLimitPlugin (app: FastifyInstance, options: { max: number, windowMs: number, redisUrl: string | undefined }): Promise<void> {
  await app.register(rateLimit, {
    max: options.max,
    timeWindow: options.windowMs,
    enableDraftSpec: true,
    ...(options.redisUrl !== undefined && { redis: await sharedCounters(app, options.redisUrl), nameSpace: NAMESPACE, skipOnError: true }),
    errorResponseBuilder: (_request, context) => new AppError(`Rate limit exceeded: retry in ${context.after}`, 429)
  })
  const limited = errorResponse('Too many requests from this client; retry after `Retry-After` seconds.', { 'Retry-After': RETRY_AFTER })
  app.addHook('onRoute', (route) => {
    addResponses(route, { 429: limited })
    addHeaders(route, RATE_LIMIT_HEADERS)
  })
}

export default fp(rateLimitPlugin, { name: 'rate-limit' })
