/**
 * Load shedding for the API routes: past the event-loop delay or heap limit, 503 at once. Both
 * figures come from V8 and Node's delay monitor, which open no file
 * (docs/decisions/0005-overload-sampler.md).
 */
import { monitorEventLoopDelay } from 'node:perf_hooks'
import { getHeapStatistics } from 'node:v8'
import type { FastifyInstance, onRequestHookHandler } from 'fastify'
import type { Config } from '../../config/config.js'
import { AppError } from '../errors.js'
import { errorResponse, RETRY_AFTER } from '../schemas.js'

const SAMPLE_MS = 1000
/** How often the delay monitor looks; a loop on time is late by this much. */
const RESOLUTION_MS = 10

/** The guard that answers 503 while the last sample was over a limit; a limit of 0 is off. */
export function shedOnOverload (app: FastifyInstance, { maxEventLoopDelayMs, maxHeapBytes }: Config['overload']) {
  const delays = monitorEventLoopDelay({ resolution: RESOLUTION_MS })
  let overloaded = false

  const sample = () => {
    // No delay recorded in a whole second means the loop never got to look: as late as can be.
    const meanDelayMs = delays.count === 0 ? Infinity : delays.mean / 1e6 - RESOLUTION_MS
    delays.reset()
    overloaded = (maxEventLoopDelayMs > 0 && meanDelayMs > maxEventLoopDelayMs) ||
      (maxHeapBytes > 0 && getHeapStatistics().used_heap_size > maxHeapBytes)
  }
  // Sampled from ready on: the work of starting, which holds the loop, is not load to shed.
  let sampler: NodeJS.Timeout | undefined
  app.addHook('onReady', async () => {
    delays.enable()
    sampler = setInterval(sample, SAMPLE_MS).unref()
  })
  app.addHook('onClose', async () => {
    clearInterval(sampler)
    delays.disable()
  })

  const hook: onRequestHookHandler = (_request, _reply, done) => { done(overloaded ? new AppError('service_overloaded') : undefined) }
  return {
    hook,
    responses: { 503: errorResponse(['service_overloaded'], 'The service is overloaded; retry after `Retry-After` seconds.', { 'Retry-After': RETRY_AFTER }) }
  }
}
