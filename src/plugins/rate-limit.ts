/**
 * Rate limiting for the API routes, per client address, when RATE_LIMIT_MAX is set. Answers
 * 429 with Retry-After and the IETF draft's RateLimit-* headers.
 */
import rateLimit from '@fastify/rate-limit'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { AppError } from '../errors.js'

async function rateLimitPlugin (app: FastifyInstance, options: { max: number, windowMs: number }): Promise<void> {
  await app.register(rateLimit, {
    max: options.max,
    timeWindow: options.windowMs,
    enableDraftSpec: true,
    errorResponseBuilder: (_request, context) => new AppError(`Rate limit exceeded: retry in ${context.after}`, 429)
  })
}

export default fp(rateLimitPlugin, { name: 'rate-limit' })
