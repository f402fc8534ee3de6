/**
 * Token signing and verification with the single shared secret of seed §5. Without a
 * configured secret outside production, a per-process one is generated, so tokens do not
 * survive a restart; the warning says so.
 */
import jwt from '@fastify/jwt'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import type { Config } from '../config.js'

async function auth (app: FastifyInstance, options: { jwt: Config['jwt'] }): Promise<void> {
  if (options.jwt.generated) {
    app.log.warn('JWT_SECRET is not set: using a random secret for this process; tokens will not survive a restart')
  }
  await app.register(jwt, {
    secret: options.jwt.secret,
    sign: { algorithm: 'HS256' },
    verify: { algorithms: ['HS256'] }
  })
}

export default fp(auth, { name: 'auth' })
