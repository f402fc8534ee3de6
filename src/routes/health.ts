/** Liveness and readiness, for load balancers and orchestrators. */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { AppError } from '../errors.js'
import { HealthSchema, ReadySchema } from './health.schemas.js'

const health: FastifyPluginAsyncTypebox = async (app) => {
  app.get('/health', { schema: HealthSchema }, async () => ({ status: 'ok' as const }))

  app.get('/ready', { schema: ReadySchema }, async (request) => {
    try {
      await app.checkDatabase()
    } catch (error) {
      request.log.warn({ err: error }, 'readiness check failed')
      throw new AppError('Database unavailable', 503)
    }
    return { status: 'ok' as const }
  })
}

export default health
