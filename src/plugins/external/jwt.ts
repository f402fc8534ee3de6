/** @fastify/jwt with the shared secret: HS256 tokens that carry `sub` and `exp` (seed §5). */
import jwt from '@fastify/jwt'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import type { Config } from '../../config/config.js'

declare module '@fastify/jwt' {
  interface FastifyJWT {
    payload: { sub: string }
    /** The verified token's claims; `request.user.sub` names the caller. */
    user: { sub: string, exp: number }
  }
}

/**
 * How far the minting machine's clock may be from ours (RFC 7519 §4.1.4, "some small leeway"), so
 * that a token minted a second ahead is not refused for its `nbf`.
 */
const CLOCK_SKEW_MS = 60_000

async function signer (app: FastifyInstance, options: { jwt: Config['jwt'] }): Promise<void> {
  if (options.jwt.generated) {
    // Only with AUTH=off, where nothing checks a token: info, not a warning.
    app.log.info('JWT_SECRET is not set: this process uses a random secret of its own (AUTH is off, so no route asks for a token; set JWT_SECRET before turning it on)')
  }
  await app.register(jwt, {
    secret: options.jwt.secret,
    verify: { algorithms: ['HS256'], requiredClaims: ['sub', 'exp'], clockTolerance: CLOCK_SKEW_MS }
  })
}

export default fp(signer, { name: 'jwt' })
