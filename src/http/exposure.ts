/**
 * A production start says once what it leaves open, and the variable that closes each: the API
 * without tokens or a rate limit, and the operations pages anyone can read.
 */
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import type { Config } from '../config/config.js'

async function exposure (app: FastifyInstance, config: Pick<Config, 'production' | 'auth' | 'rateLimit' | 'metricsAccess'> & { metricsOnApiPort: boolean }): Promise<void> {
  if (!config.production) return
  const open = [
    ...(config.auth === 'off' ? ['every route answers without a token (set AUTH=writes or AUTH=all, with JWT_SECRET)'] : []),
    ...(config.rateLimit === undefined ? ['any client may send any number of requests (set RATE_LIMIT_MAX)'] : []),
    // It names the process's limits (open descriptors, heap): what an attacker would exhaust.
    ...(config.metricsOnApiPort && config.metricsAccess === 'public' ? ['/metrics is public (METRICS=public: set METRICS=on to ask its scraper for a token, or METRICS_PORT to serve it apart)'] : []),
    '/documentation and its document are public (they describe the API; keep them from the proxy if its clients must not read them)'
  ]
  app.log.warn({ open }, `NODE_ENV=production with what anyone can reach: ${open.join('; ')}`)
}

export default fp(exposure, { name: 'exposure' })
