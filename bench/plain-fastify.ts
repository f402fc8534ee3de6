/**
 * The benchmark's plain Fastify yardstick, written as the seed's example would be: Fastify 5,
 * JSON schemas, @fastify/cors reflecting any origin, a JSON error and not-found responder,
 * logging off, and no hooks, static files or other plugins. bench/fastify.ts serves users from
 * memory; bench/fastify-sqlite.ts stores them in SQLite; bench/fastify-plugins.ts adds the
 * plugins a user would reach for.
 */
import { randomUUID } from 'node:crypto'
import cors from '@fastify/cors'
import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify'
import { EXPOSED_HEADERS } from '../src/http/request/cors.js'
import { API_SECURITY_HEADERS } from '../src/http/request/security-headers.js'

export const userShape = { type: 'object', properties: { id: { type: 'string' }, name: { type: 'string' } } } as const
export const newUser = {
  type: 'object',
  required: ['name', 'email'],
  properties: { name: { type: 'string', minLength: 1 }, email: { type: 'string', format: 'email' } }
} as const
export const page = {
  querystring: { type: 'object', properties: { limit: { type: 'integer', minimum: 1, maximum: 1000, default: 100 }, offset: { type: 'integer', minimum: 0, default: 0 } } },
  response: { 200: { type: 'array', items: { type: 'object', properties: { id: { type: 'integer' }, name: { type: 'string' } } } } }
} as const

const hello = { 200: { type: 'object', properties: { hello: { type: 'string' } } } }

interface PlainOptions {
  /** Every answer also carries the headers the service adds to each JSON answer, worked out once. */
  serviceHeaders?: boolean
  /** Fastify's options over the plain ones. */
  options?: FastifyServerOptions
  /** Plugins registered before the routes (CORS then exposes the service's headers). */
  register?: (app: FastifyInstance) => Promise<void>
}

/**
 * The routes that need no storage; the caller adds the user routes and listens. With
 * `serviceHeaders`, every answer also carries the headers the service adds to each JSON
 * answer (its security headers, CORS's exposed headers, a request id), to show what they
 * cost by themselves.
 */
export async function plainFastify ({ serviceHeaders = false, options = {}, register }: PlainOptions = {}): Promise<FastifyInstance> {
  const app = Fastify({ logger: false, ...(serviceHeaders && { genReqId: () => randomUUID() }), ...options })
  await app.register(cors, { origin: true, ...((serviceHeaders || register !== undefined) && { exposedHeaders: EXPOSED_HEADERS }) })
  await register?.(app)
  if (serviceHeaders) {
    app.addHook('onRequest', (request, reply, done) => {
      reply.headers(API_SECURITY_HEADERS).header('x-request-id', request.id)
      done()
    })
  }
  app.setErrorHandler((error: { statusCode?: number, message: string }, _request, reply) => {
    const status = error.statusCode ?? 500
    reply.code(status).send({ error: status >= 500 ? 'Internal Server Error' : error.message })
  })
  app.setNotFoundHandler((_request, reply) => { reply.code(404).send({ error: 'Route not found' }) })

  app.get('/', { schema: { response: hello } }, async () => ({ hello: 'world' }))
  app.get('/health', async () => ({ status: 'ok' }))
  app.get<{ Querystring: { name?: string } }>('/custom', {
    schema: { querystring: { type: 'object', properties: { name: { type: 'string' }, age: { type: 'integer' } } }, response: hello }
  }, async (request) => ({ hello: request.query.name ?? 'world' }))
  app.post<{ Params: { id: string }, Body: { name: string, email: string } }>('/users/:id', {
    schema: {
      params: { type: 'object', properties: { id: { type: 'string', pattern: '^[0-9a-fA-F]{24}$' } } },
      querystring: { type: 'object', properties: { limit: { type: 'integer', default: 10 }, offset: { type: 'integer', default: 0 } } },
      body: { ...newUser, additionalProperties: false, properties: { ...newUser.properties, age: { type: 'integer', minimum: 0 } } },
      response: { 200: { type: 'object', properties: { id: { type: 'string' }, name: { type: 'string' }, email: { type: 'string' } } } }
    }
  }, async (request) => ({ id: request.params.id, name: request.body.name, email: request.body.email }))
  return app
}
