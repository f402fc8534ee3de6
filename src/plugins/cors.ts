/**
 * Cross-origin access (seed §4.9), with @fastify/cors: the requesting origin is reflected
 * (or, with CORS_ORIGIN, allowed from a list), `Vary: Origin` is on every answer, errors
 * included, and browsers may read the headers a client needs. Every OPTIONS request is
 * answered as a preflight, 204, so no OPTIONS ever gets a plain-text error or a 404.
 */
import fastifyCors from '@fastify/cors'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'

/** The answer's headers that a browser's script may read: every one the API document declares. */
export const EXPOSED_HEADERS = ['Location', 'Idempotent-Replayed', 'X-Total-Count', 'Link', 'ETag', 'X-Request-Id', 'WWW-Authenticate',
  'Retry-After', 'Accept-Encoding', 'RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset']

async function cors (app: FastifyInstance, options: { origin: true | string[] }): Promise<void> {
  await app.register(fastifyCors, {
    origin: options.origin,
    methods: ['GET', 'HEAD', 'POST', 'OPTIONS'],
    exposedHeaders: EXPOSED_HEADERS,
    maxAge: 600,
    // An OPTIONS request without the preflight headers is answered 204 all the same.
    strictPreflight: false
  })
}

export default fp(cors, { name: 'cors' })
