/**
 * Cross-origin access with @fastify/cors: the origin is reflected or checked against
 * CORS_ORIGIN, `Vary: Origin` is on every answer, and every OPTIONS is answered as a preflight.
 */
import fastifyCors from '@fastify/cors'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'

/**
 * The answer's headers that a browser's script may read: every one the API document declares but
 * `Accept-Encoding`, a request header by name (a 415 says it, and its message says what to send).
 */
export const EXPOSED_HEADERS = ['Location', 'Idempotent-Replayed', 'X-Total-Count', 'Link', 'ETag', 'X-Request-Id', 'WWW-Authenticate',
  'Retry-After', 'RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset']

async function cors (app: FastifyInstance, options: { origin: true | string[] }): Promise<void> {
  await app.register(fastifyCors, {
    origin: options.origin,
    methods: ['GET', 'HEAD', 'POST', 'PATCH', 'DELETE', 'OPTIONS'],
    exposedHeaders: EXPOSED_HEADERS,
    maxAge: 600,
    // An OPTIONS request without the preflight headers is answered 204 all the same.
    strictPreflight: false
  })
}

export default fp(cors, { name: 'cors' })
