/**
 * Rate limiting for the API routes, per client address, when RATE_LIMIT_MAX is set. Answers
 * 429 with Retry-After and the IETF draft's RateLimit-* headers, which every answer the
 * limiter saw carries too (a request shed for overload is answered before it).
 */
import rateLimit from '@fastify/rate-limit'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { AppError, errorResponse, RETRY_AFTER } from '../errors.js'
import { addHeaders, addResponses, type HeaderSchema } from '../route-schemas.js'

const RATE_LIMIT_HEADERS: Record<string, HeaderSchema> = {
  'RateLimit-Limit': { type: 'integer', description: 'Requests allowed per window.', required: false },
  'RateLimit-Remaining': { type: 'integer', description: 'Requests left in this window.', required: false },
  'RateLimit-Reset': { type: 'integer', description: 'Seconds until the window resets.', required: false }
}

async function rateLimitPlugin (app: FastifyInstance, options: { max: number, windowMs: number }): Promise<void> {
  await app.register(rateLimit, {
    max: options.max,
    timeWindow: options.windowMs,
    enableDraftSpec: true,
    errorResponseBuilder: (_request, context) => new AppError(`Rate limit exceeded: retry in ${context.after}`, 429)
  })
  const limited = errorResponse('Too many requests from this client; retry after `Retry-After` seconds.', { 'Retry-After': RETRY_AFTER })
  app.addHook('onRoute', (route) => {
    addResponses(route, { 429: limited })
    addHeaders(route, RATE_LIMIT_HEADERS)
  })
}

export default fp(rateLimitPlugin, { name: 'rate-limit' })
