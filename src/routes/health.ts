/** Liveness and readiness, for load balancers and orchestrators. */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import fp from 'fastify-plugin'
import { AppError } from '../http/errors.js'
import { HealthSchema, ReadySchema } from './health.schemas.js'

const health: FastifyPluginAsyncTypebox = async (app) => {
  app.get('/health', { schema: HealthSchema }, async () => ({ status: 'ok' as const }))

  app.get('/ready', { schema: ReadySchema }, async () => {
    if (app.draining) throw new AppError('shutting_down')
    const keysProblem = app.tokenKeysProblem()
    if (keysProblem !== undefined) throw new AppError('no_token_verifiable', { problem: keysProblem })
    try {
      await app.checkDatabase()
    } catch {
      // The storage layer logs the outage, once as it starts and once as it ends.
      throw new AppError('database_unavailable')
    }
    return { status: 'ok' as const }
  })
}

export default fp(health, { name: 'health', dependencies: ['storage', 'guards', 'request-context'], encapsulate: true })
