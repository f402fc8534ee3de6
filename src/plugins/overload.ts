/**
 * Load shedding for the API routes: when the event loop lags or the heap grows past its
 * limit, a request is answered 503 with Retry-After at once, instead of queueing behind
 * work the process cannot finish. Health, readiness, docs and static files stay outside,
 * so an orchestrator does not restart a process that is merely busy.
 *
 * Written here rather than taken from @fastify/under-pressure, whose sampler reads the
 * resident memory from /proc every second, a limit set on it or not, and throws from its
 * timer when no file can be opened: a full file table ended the process (README, "Overload").
 * Both figures here come from V8 and Node's delay monitor, which open nothing.
 */
import { monitorEventLoopDelay } from 'node:perf_hooks'
import { getHeapStatistics } from 'node:v8'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import type { Config } from '../config.js'
import { AppError, errorResponse, RETRY_AFTER } from '../errors.js'
import { addResponses } from '../route-schemas.js'

const SAMPLE_MS = 1000
/** How often the delay monitor looks; a loop on time is late by this much. */
const RESOLUTION_MS = 10

class OverloadedError extends AppError {
  constructor () {
    super('Service overloaded: try again shortly', 503, { 'retry-after': '1' })
  }
}

async function overload (app: FastifyInstance, { maxEventLoopDelayMs, maxHeapBytes }: Config['overload']): Promise<void> {
  const delays = monitorEventLoopDelay({ resolution: RESOLUTION_MS })
  delays.enable()
  let overloaded = false

  const sample = () => {
    // No delay recorded in a whole second means the loop never got to look: as late as can be.
    const meanDelayMs = delays.count === 0 ? Infinity : delays.mean / 1e6 - RESOLUTION_MS
    delays.reset()
    overloaded = (maxEventLoopDelayMs > 0 && meanDelayMs > maxEventLoopDelayMs) ||
      (maxHeapBytes > 0 && getHeapStatistics().used_heap_size > maxHeapBytes)
  }
  const sampler = setInterval(sample, SAMPLE_MS).unref()
  app.addHook('onClose', async () => {
    clearInterval(sampler)
    delays.disable()
  })

  app.addHook('onRequest', (_request, _reply, done) => {
    done(overloaded ? new OverloadedError() : undefined)
  })

  const overloadedResponse = errorResponse('The service is overloaded; retry after `Retry-After` seconds.', { 'Retry-After': RETRY_AFTER })
  app.addHook('onRoute', (route) => { addResponses(route, { 503: overloadedResponse }) })
}

export default fp(overload, { name: 'overload' })
