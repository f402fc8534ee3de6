/** The greeting (seed §4.1) and the query-string demonstration (seed §4.5). */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { CustomSchema, HelloSchema } from './root.schemas.js'

const root: FastifyPluginAsyncTypebox = async (app) => {
  app.get('/', { schema: HelloSchema }, async () => ({ hello: 'world' }))

  app.get('/custom', { schema: CustomSchema }, async (request) => ({ hello: request.query.name ?? 'world' }))
}

export default root
