/**
 * Load shedding for the API routes: when the event loop lags or the heap grows past its
 * limit, a request is answered 503 with Retry-After at once, instead of queueing behind
 * work the process cannot finish. Health, readiness, docs and static files stay outside,
 * so an orchestrator does not restart a process that is merely busy.
 */
import underPressure from '@fastify/under-pressure'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import type { Config } from '../config.js'
import { AppError, errorResponse, RETRY_AFTER } from '../errors.js'
import { addResponses } from '../route-schemas.js'

class OverloadedError extends AppError {
  constructor () {
    super('Service overloaded: try again shortly', 503)
  }
}

async function overload (app: FastifyInstance, options: Config['overload']): Promise<void> {
  await app.register(underPressure, {
    maxEventLoopDelay: options.maxEventLoopDelayMs,
    maxHeapUsedBytes: options.maxHeapBytes,
    retryAfter: 1,
    customError: OverloadedError
  })
  const overloaded = errorResponse('The service is overloaded; retry after `Retry-After` seconds.', { 'Retry-After': RETRY_AFTER })
  app.addHook('onRoute', (route) => { addResponses(route, { 503: overloaded }) })
}

export default fp(overload, { name: 'overload' })
