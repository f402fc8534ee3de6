/**
 * Plain Fastify (bench/plain-fastify.ts) with users from memory: the framework's own cost.
 * `node bench/fastify.ts <port> [headers]`, `headers` to answer with the service's headers too.
 */
import { newUser, page, plainFastify, userShape } from './plain-fastify.js'

const mode = process.argv[3]
if (mode !== undefined && mode !== 'headers') throw new Error(`unknown mode: ${mode}`)
const app = await plainFastify({ serviceHeaders: mode === 'headers' })
const users = Array.from({ length: 1000 }, (_, i) => ({ id: i + 1, name: `user${i + 1}` }))

app.get<{ Querystring: { limit: number, offset: number } }>('/users', { schema: page }, async (request, reply) => {
  const { limit, offset } = request.query
  reply.header('x-total-count', users.length)
  return users.slice(offset, offset + limit)
})
app.get<{ Params: { id: string } }>('/users/:id', { schema: { response: { 200: userShape } } }, async (request) => ({ id: request.params.id, name: 'user' }))
app.post('/users', { schema: { body: newUser } }, async (request, reply) => reply.code(201).send(request.body))

await app.listen({ port: Number(process.argv[2]), host: '127.0.0.1' })
