/** `GET /metrics`, in the Prometheus text format. */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
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

const metrics: FastifyPluginAsyncTypebox = async (app) => {
  app.get('/metrics', app.protect('users:read', { schema: MetricsSchema }, { throttled: false }), async (_request, reply) => {
    const registry = app.metricsRegistry
    return reply.type(registry.contentType).send(await registry.metrics())
  })
}

export default metrics
