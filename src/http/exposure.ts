/** A production start that leaves the API open says so once: what is open, and the variable that closes it. */
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import type { Config } from '../config/config.js'

async function exposure (app: FastifyInstance, config: Pick<Config, 'production' | 'auth' | 'rateLimit'>): Promise<void> {
  if (!config.production) return
  const open = [
    ...(config.auth === 'off' ? ['every route answers without a token (set AUTH=writes or AUTH=all, with JWT_SECRET)'] : []),
    ...(config.rateLimit === undefined ? ['any client may send any number of requests (set RATE_LIMIT_MAX)'] : [])
  ]
  if (open.length > 0) app.log.warn({ open }, `NODE_ENV=production with the API open: ${open.join('; ')}`)
}

export default fp(exposure, { name: 'exposure' })
