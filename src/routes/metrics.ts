/** `GET /metrics`, in the Prometheus text format. */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import fp from 'fastify-plugin'
import { Type } from 'typebox'

const MetricsSchema = {
  summary: 'Metrics in the Prometheus text format',
  description: 'Request latency by method, route pattern and status; process, event-loop and (on PostgreSQL) connection-pool metrics.',
  operationId: 'metrics',
  tags: ['operations'],
  response: {
    200: {
      description: 'Prometheus exposition format 0.0.4.',
      content: { 'text/plain': { schema: Type.String({ examples: ['# TYPE http_request_duration_seconds histogram\n'] }) } }
    }
  }
}

/** Who may read them: anyone, a token's holder whatever `AUTH` says (production's default), or whoever may read the API. */
const TOKEN_BY_ACCESS = { public: 'never', token: 'always', auth: 'by-auth' } as const

const metrics: FastifyPluginAsyncTypebox<{ access: keyof typeof TOKEN_BY_ACCESS }> = async (app, { access }) => {
  app.get('/metrics', app.protect('users:read', { schema: MetricsSchema }, { throttled: false, token: TOKEN_BY_ACCESS[access] }), async (_request, reply) => {
    const registry = app.metricsRegistry
    return reply.type(registry.contentType).send(await registry.metrics())
  })
}

export default fp(metrics, { name: 'metrics-route', dependencies: ['guards', 'metrics'], encapsulate: true })
