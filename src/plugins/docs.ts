/**
 * The generated API description (seed §4.7): OpenAPI 3.1 at `/documentation/json`, built from
 * the same TypeBox schemas that validate and serialize, and Swagger UI at `/documentation`,
 * whose assets ship inside `@fastify/swagger-ui` (no CDN, no external validator).
 * Registered before the routes, so that it sees each one as it is added.
 */
import swagger from '@fastify/swagger'
import swaggerUi from '@fastify/swagger-ui'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import type { AuthMode } from '../config.js'
import { SECURITY_SCHEME } from './auth.js'

export const API_VERSION = '1.0.0'

async function docs (app: FastifyInstance, options: { auth: AuthMode }): Promise<void> {
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'User records service',
        description: 'A JSON HTTP service for user records. Every error answers `{"error": "<message>"}`.',
        version: API_VERSION,
        license: { name: 'MIT', identifier: 'MIT' }
      },
      servers: [{ url: '/', description: 'This service' }],
      // Public unless an operation says otherwise: the protected ones name the scheme below.
      security: [],
      ...(options.auth !== 'off' && {
        components: {
          securitySchemes: {
            [SECURITY_SCHEME]: {
              type: 'http',
              scheme: 'bearer',
              bearerFormat: 'JWT',
              description: 'An HS256 token with `sub` and `exp`, signed with `JWT_SECRET`; `npm run token -- --sub <subject>` prints one.'
            }
          }
        }
      }),
      tags: [
        { name: 'users', description: 'Stored user records, and the validation showcase.' },
        { name: 'greeting', description: 'Greeting and query-string demonstration.' },
        { name: 'operations', description: 'Liveness and readiness for orchestrators.' }
      ]
    }
  })
  await app.register(swaggerUi, { routePrefix: '/documentation' })
}

export default fp(docs, { name: 'docs' })
