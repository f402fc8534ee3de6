/**
 * Cross-origin access (seed §4.9): any requesting origin is reflected, with `Vary: Origin`,
 * unless `CORS_ORIGIN` lists the allowed ones; a preflight is allowed the headers it asks for. Every OPTIONS request is answered as a
 * preflight (204); the plugin's strict mode would answer a bare OPTIONS in plain text, and
 * every answer of this service is JSON or empty.
 */
import cors from '@fastify/cors'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'

async function corsPlugin (app: FastifyInstance, options: { origin: true | string[] }): Promise<void> {
  await app.register(cors, {
    origin: options.origin,
    methods: ['GET', 'HEAD', 'POST', 'OPTIONS'],
    exposedHeaders: ['Location', 'X-Total-Count', 'X-Request-Id', 'WWW-Authenticate'],
    strictPreflight: false,
    maxAge: 600
  })
}

export default fp(corsPlugin, { name: 'cors' })
