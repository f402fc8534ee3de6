/**
 * @fastify/jwt over the configured keys: the shared secret (HS256, seed §5), a public key, or an
 * identity provider's JWKS (plugins/app/provider-keys.ts). It checks the signature, the algorithm, `sub`, `exp`, and
 * `iss` and `aud` when they are configured.
 */
import jwt from '@fastify/jwt'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import type { TokenConfig } from '../../config/tokens.js'
import { providerKeys } from '../app/provider-keys.js'

declare module '@fastify/jwt' {
  interface FastifyJWT {
    payload: { sub: string }
    /** The verified token's claims; `request.user.sub` names the caller. */
    user: { sub: string, exp: number, iat?: number, scope?: unknown, scp?: unknown, azp?: unknown, client_id?: unknown }
  }
}

/**
 * How far the minting machine's clock may be from ours (RFC 7519 §4.1.4, "some small leeway"), so
 * that a token minted a second ahead is not refused for its `nbf`.
 */
const CLOCK_SKEW_MS = 60_000

const BEARER = /^Bearer +([A-Za-z0-9._~+/-]+=*) *$/i

/** The token of an `Authorization: Bearer` header; undefined when the header is not one. */
export const bearerToken = (header: string | undefined): string | undefined => header === undefined ? undefined : BEARER.exec(header)?.[1]

async function tokens (app: FastifyInstance, { jwt: config }: { jwt: TokenConfig }): Promise<void> {
  const { keys } = config
  if (keys.kind === 'secret' && keys.generated) {
    // Only with AUTH=off, where nothing checks a token: info, not a warning.
    app.log.info('JWT_SECRET is not set: this process uses a random secret of its own (AUTH is off, so no route asks for a token; set JWT_SECRET before turning it on)')
  }
  const secret = keys.kind === 'secret'
    ? keys.secret
    : keys.kind === 'public-key' ? { public: keys.publicKey } : providerKeys(keys.url, keys.algorithms, app.log)
  await app.register(jwt, {
    secret,
    // The key function reads the token's header: its `kid` and `alg`.
    decode: { complete: true },
    verify: {
      algorithms: keys.kind === 'secret' ? ['HS256'] : keys.algorithms,
      requiredClaims: ['sub', 'exp'],
      clockTolerance: CLOCK_SKEW_MS,
      ...(config.issuer !== undefined && { allowedIss: config.issuer }),
      ...(config.audience !== undefined && { allowedAud: config.audience }),
      extractToken: (request: FastifyRequest) => bearerToken(request.headers.authorization)
    }
  })
}

export default fp(tokens, { name: 'jwt' })
