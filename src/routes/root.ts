/** The greeting and the query-string demonstration. */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import fp from 'fastify-plugin'
import { CustomSchema, HelloSchema } from './root.schemas.js'

const root: FastifyPluginAsyncTypebox = async (app) => {
  app.get('/', app.protect('users:read', { schema: HelloSchema }), async () => ({ hello: 'world' }))

  app.get('/custom', app.protect('users:read', { schema: CustomSchema }), async (request) => ({ hello: request.query.name ?? 'world' }))
}

export default fp(root, { name: 'greetings', dependencies: ['guards'], encapsulate: true })
