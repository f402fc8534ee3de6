/**
 * The API document, built from the route schemas. It is registered before the routes,
 * so that it sees each one as it is added.
 */
import swagger, { type SwaggerTransform, type SwaggerTransformObject } from '@fastify/swagger'
import type { FastifyInstance, FastifySchema } from 'fastify'
import fp from 'fastify-plugin'
import type { OpenAPIV3_1 as OpenApi31 } from 'openapi-types'
import type { TokenKeys } from '../../config/tokens.js'
import { errorResponse, type Responses, withHeaders } from '../schemas.js'
import { REQUEST_ID_HEADER } from '../request/request-context.js'
import { SECURITY_SCHEME } from '../guards/tokens.js'

/**
 * A query parameter with a default is required in the schema, since Ajv fills it in first, but
 * optional in the published document: a client may leave it out.
 */
function optionalWhenDefaulted (schema: FastifySchema): FastifySchema {
  const querystring = schema.querystring as { properties?: Record<string, { default?: unknown }>, required?: string[] } | undefined
  if (querystring?.required === undefined || querystring.properties === undefined) return schema
  const properties = querystring.properties
  const required = querystring.required.filter((name) => properties[name]?.default === undefined)
  return { ...schema, querystring: { ...querystring, required } }
}

const internalError = errorResponse(['internal_error'], 'Unexpected failure; details are in the server log, under the request id.')

/** What every operation answers besides its own: a 500, and the request id on every answer. */
function everyAnswer (schema: FastifySchema): FastifySchema {
  return { ...schema, response: withHeaders({ 500: internalError, ...(schema.response as Responses) }, { 'X-Request-Id': REQUEST_ID_HEADER }) }
}

const transform: SwaggerTransform = ({ schema, url }) =>
  ({ schema: schema.response === undefined ? schema : everyAnswer(optionalWhenDefaulted(schema)), url })

/**
 * @fastify/swagger copies a header's declaration into its `schema`; whether it is always sent
 * belongs to the header object.
 */
const headersRequired: SwaggerTransformObject = (document) => {
  if (!('openapiObject' in document)) return document.swaggerObject
  for (const operations of Object.values(document.openapiObject.paths ?? {})) {
    for (const operation of Object.values(operations ?? {})) {
      if (typeof operation !== 'object' || operation === null || !('responses' in operation)) continue
      for (const response of Object.values(operation.responses ?? {})) {
        if (!('headers' in response)) continue
        for (const header of Object.values(response.headers ?? {})) {
          if (!('schema' in header) || header.schema === undefined || !('type' in header.schema)) continue
          const { required, ...schema } = header.schema as { required?: unknown }
          header.required = required !== false
          header.schema = schema
        }
      }
    }
  }
  return document.openapiObject
}

/** OpenAPI 3.1's `webhooks`: requests the service makes, described as the document holds them. */
export type Webhooks = NonNullable<OpenApi31.Document['webhooks']>

async function docs (app: FastifyInstance, options: { bearer: boolean, signedBy: TokenKeys['kind'], webhooks: Webhooks }): Promise<void> {
  await app.register(swagger, {
    transform,
    transformObject: headersRequired,
    // Named schemas (app.addSchema) appear under their own names in components.schemas.
    refResolver: { buildLocalReference: (json, _baseUri, _fragment, index) => typeof json.$id === 'string' ? json.$id : `def-${index}` },
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'User records service',
        description: 'A JSON HTTP service for user records. Every error answers `{"error": "<message>", "code": "<code>"}`, or RFC 9457 problem details ' +
          'to a client whose `Accept` prefers `application/problem+json`; `/problems/{code}` describes each code.',
        version: '1.0.0',
        license: { name: 'MIT', identifier: 'MIT' },
        contact: { name: 'The team that runs this service' }
      },
      servers: [{ url: '/', description: 'This service' }],
      // What the service posts to others (OpenAPI 3.1): not routes of its own, so described as given.
      webhooks: options.webhooks,
      // Public unless an operation says otherwise: the protected ones name the scheme below.
      security: [],
      ...(options.bearer && {
        components: {
          securitySchemes: {
            [SECURITY_SCHEME]: {
              type: 'http',
              scheme: 'bearer',
              bearerFormat: 'JWT',
              description: options.signedBy === 'secret'
                ? 'An HS256 token with `sub` and `exp`, signed with `JWT_SECRET`; `npm run token -- --sub <subject>` prints one.'
                : 'A token with `sub` and `exp` from the identity provider whose keys the service is configured with.'
            }
          }
        }
      }),
      tags: [
        { name: 'users', description: 'Stored user records, and the validation showcase.' },
        { name: 'events', description: 'The change feed: every user created, changed or deleted, as Server-Sent Events and as webhooks.' },
        { name: 'greeting', description: 'Greeting and query-string demonstration.' },
        { name: 'operations', description: 'Liveness and readiness for orchestrators.' },
        { name: 'errors', description: 'The codes error answers carry, where problem details\' `type` leads.' }
      ]
    }
  })
}

export default fp(docs, { name: 'docs' })
