/**
 * The generated API description (seed §4.7): OpenAPI 3.1 at `/documentation/json`, built from
 * the same TypeBox schemas that validate and serialize, and Swagger UI at `/documentation`,
 * whose assets ship inside `@fastify/swagger-ui` (no CDN, no external validator).
 * Registered before the routes, so that it sees each one as it is added.
 */
import swagger, { type SwaggerTransform } from '@fastify/swagger'
import swaggerUi from '@fastify/swagger-ui'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import type { AuthMode } from '../config.js'
import { SECURITY_SCHEME } from './auth.js'

/**
 * A query parameter with a default may be left out by the client. The schema lists it as
 * required, since after validation it is always there (Ajv fills the default in first), which
 * keeps the handler's type exact; the published document says what a client must send.
 */
const optionalWhenDefaulted: SwaggerTransform = ({ schema, url }) => {
  const querystring = schema.querystring as { properties?: Record<string, { default?: unknown }>, required?: string[] } | undefined
  if (querystring?.required === undefined || querystring.properties === undefined) return { schema, url }
  const properties = querystring.properties
  const required = querystring.required.filter((name) => properties[name]?.default === undefined)
  return { schema: { ...schema, querystring: { ...querystring, required } }, url }
}

async function docs (app: FastifyInstance, options: { auth: AuthMode }): Promise<void> {
  await app.register(swagger, {
    transform: optionalWhenDefaulted,
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'User records service',
        description: 'A JSON HTTP service for user records. Every error answers `{"error": "<message>"}`.',
        version: '1.0.0',
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
