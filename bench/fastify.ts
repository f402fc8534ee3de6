/**
 * The benchmark's second yardstick: the specification's own kind of server, plain Fastify 5 as
 * its example would be written (JSON schemas, @fastify/cors reflecting any origin,
 * @fastify/static for public/, the three empty lifecycle hooks, a global error responder and a
 * not-found responder), with logging off and fixed users instead of storage. It shows how the
 * service, which does more, compares with a plain Fastify server on the same routes.
 */
import cors from '@fastify/cors'
import fastifyStatic from '@fastify/static'
import Fastify from 'fastify'

const port = Number(process.argv[2] ?? 3004)
const app = Fastify({ logger: false })
const userShape = { type: 'object', properties: { id: { type: 'string' }, name: { type: 'string' } } } as const
const users = Array.from({ length: 10 }, (_, i) => ({ id: i + 1, name: `user${i + 1}` }))

await app.register(cors, { origin: true })
await app.register(fastifyStatic, { root: new URL('../public', import.meta.url).pathname })

app.addHook('onRequest', (_request, _reply, done) => done())
app.addHook('preHandler', (_request, _reply, done) => done())
app.addHook('onResponse', (_request, _reply, done) => done())

app.setErrorHandler((error: { statusCode?: number, message: string }, _request, reply) => {
  const status = error.statusCode ?? 500
  reply.code(status).send({ error: status >= 500 ? 'Internal Server Error' : error.message })
})
app.setNotFoundHandler((_request, reply) => { reply.code(404).send({ error: 'Route not found' }) })

const hello = { 200: { type: 'object', properties: { hello: { type: 'string' } } } }

app.get('/', { schema: { response: hello } }, async () => ({ hello: 'world' }))
app.get('/health', async () => ({ status: 'ok' }))
app.get('/users', {
  schema: { response: { 200: { type: 'array', items: { type: 'object', properties: { id: { type: 'integer' }, name: { type: 'string' } } } } } }
}, async () => users)
app.get<{ Params: { id: string } }>('/users/:id', { schema: { response: { 200: userShape } } }, async (request) => ({ id: request.params.id, name: 'user' }))
app.post('/users', {
  schema: { body: { type: 'object', required: ['name', 'email'], properties: { name: { type: 'string' }, email: { type: 'string', format: 'email' } } } }
}, async (request, reply) => reply.code(201).send(request.body))
app.get<{ Querystring: { name?: string } }>('/custom', {
  schema: { querystring: { type: 'object', properties: { name: { type: 'string' }, age: { type: 'integer' } } }, response: hello }
}, async (request) => ({ hello: request.query.name ?? 'world' }))
app.post<{ Params: { id: string }, Body: { name: string, email: string } }>('/users/:id', {
  schema: {
    params: { type: 'object', properties: { id: { type: 'string', pattern: '^[0-9a-fA-F]{24}$' } } },
    querystring: { type: 'object', properties: { limit: { type: 'integer', default: 10 }, offset: { type: 'integer', default: 0 } } },
    body: {
      type: 'object',
      required: ['name', 'email'],
      additionalProperties: false,
      properties: { name: { type: 'string' }, email: { type: 'string', format: 'email' }, age: { type: 'integer', minimum: 0 } }
    },
    response: { 200: { type: 'object', properties: { id: { type: 'string' }, name: { type: 'string' }, email: { type: 'string' } } } }
  }
}, async (request) => ({ id: request.params.id, name: request.body.name, email: request.body.email }))

await app.listen({ port, host: '127.0.0.1' })
