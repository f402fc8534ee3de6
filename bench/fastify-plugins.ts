/**
 * What a user would build with Fastify for the service's features, each from the plugin one would
 * reach for: @fastify/helmet, @fastify/cors exposing the same headers, a request id taken from
 * `X-Request-Id` and sent back, @fastify/under-pressure, fastify-metrics, @fastify/etag, pino at
 * `LOG_LEVEL` (warn by default, as the service runs here), and SQLite the simple way
 * (bench/sqlite-users.ts). `node bench/fastify-plugins.ts <port> <database file>`.
 */
import { randomUUID } from 'node:crypto'
import etag from '@fastify/etag'
import helmet from '@fastify/helmet'
import underPressure from '@fastify/under-pressure'
import fastifyMetrics from 'fastify-metrics'
import { plainFastify } from './plain-fastify.js'
import { addSqliteUsers } from './sqlite-users.js'

const app = await plainFastify({
  options: {
    logger: { level: process.env.LOG_LEVEL ?? 'warn' },
    requestIdHeader: 'x-request-id',
    genReqId: () => randomUUID()
  },
  register: async (app) => {
    await app.register(helmet)
    await app.register(underPressure, { maxEventLoopDelay: 1000 })
    await app.register(fastifyMetrics.default, { endpoint: '/metrics' })
    await app.register(etag)
    app.addHook('onSend', async (request, reply) => { reply.header('x-request-id', request.id) })
  }
})
addSqliteUsers(app, process.argv[3]!)
await app.listen({ port: Number(process.argv[2]), host: '127.0.0.1' })
