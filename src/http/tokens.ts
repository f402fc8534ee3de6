/**
 * Bearer tokens (seed §5): @fastify/jwt over the configured keys (the shared secret, a public key,
 * or an identity provider's JWKS, provider-keys.ts), and the guard that checks a route's token and,
 * with `AUTH_SCOPES`, its scope. guards.ts decides which routes ask for one.
 */
import jwt from '@fastify/jwt'
import type { FastifyInstance, FastifyRequest, onRequestHookHandler } from 'fastify'
import type { AuthMode } from '../config/config.js'
import type { TokenConfig } from '../config/tokens.js'
import { AppError, unauthorized } from './errors.js'
import { providerKeys } from './provider-keys.js'
import { errorResponse, type HeaderSchema, type Responses } from './schemas.js'

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

/** @fastify/jwt over the configured keys; it checks the signature, the algorithm, `sub`, `exp`, and `iss` and `aud` when configured. */
async function verifyTokensWith (app: FastifyInstance, config: TokenConfig): Promise<void> {
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

export const SECURITY_SCHEME = 'bearerAuth'

/** What a route asks of its caller's token: `users:write` for a write, `users:read` for a read. */
export type Scope = 'users:read' | 'users:write'

const WWW_AUTHENTICATE: HeaderSchema = {
  type: 'string',
  description: 'The bearer challenge (RFC 6750 §3): `Bearer realm="api"`, with `error="invalid_token"` for a token that was refused, ' +
    'or `error="insufficient_scope", scope="…"` for one without the scope the route asks for.'
}

/** What a refused token is told, by @fastify/jwt's or fast-jwt's code, where more than "invalid" can be said. */
const REFUSALS: Record<string, string> = {
  FST_JWT_AUTHORIZATION_TOKEN_EXPIRED: 'Token has expired',
  FAST_JWT_INACTIVE: 'Token is not valid yet (its nbf is in the future)'
}

/** The scopes a token grants: `scope`, space-separated (RFC 8693), and `scp`, a list or a string. */
function grantedScopes (claims: { scope?: unknown, scp?: unknown }): Set<string> {
  const granted = new Set<string>()
  for (const claim of [claims.scope, claims.scp]) {
    const values = Array.isArray(claim) ? claim : typeof claim === 'string' ? claim.split(' ') : []
    for (const value of values) if (typeof value === 'string' && value !== '') granted.add(value)
  }
  return granted
}

export interface TokenRules { mode: AuthMode, scopes: boolean, maxLifetimeMs: number, verification: TokenConfig }

/** The checks of a route that asks for a token, and the answers and security they declare. */
export interface TokenCheck {
  hooks: onRequestHookHandler[]
  responses: Responses
  security: Array<Record<string, string[]>>
}

/**
 * Registers @fastify/jwt and gives, for a route's scope, the checks of its token under `AUTH`
 * (undefined where it needs none): the token, then with `AUTH_SCOPES=on` the scope.
 */
export async function tokenChecks (app: FastifyInstance, { mode, scopes, maxLifetimeMs, verification }: TokenRules): Promise<(scope: Scope) => TokenCheck | undefined> {
  await verifyTokensWith(app, verification)

  async function verifyBearerToken (request: FastifyRequest): Promise<void> {
    const header = request.headers.authorization
    if (header === undefined) throw unauthorized('Missing bearer token: send Authorization: Bearer <token>', true)
    if (bearerToken(header) === undefined) throw unauthorized('Authorization header must be "Bearer <token>"')

    let claims: FastifyRequest['user']
    try {
      claims = await request.jwtVerify()
    } catch (error) {
      // The identity provider's answers (provider-keys.ts): a key it does not have, or no answer at all.
      if (error instanceof AppError) throw error
      throw unauthorized(REFUSALS[(error as { code?: string }).code ?? ''] ?? 'Token is invalid')
    }
    if (typeof claims.sub !== 'string' || claims.sub === '' || !Number.isFinite(claims.exp)) {
      throw unauthorized('Token must name its subject (sub) and a finite expiry (exp)')
    }
    // Counted from the earlier of `iat` and now, so that no `iat` makes a longer token pass.
    const issuedAt = Math.min(typeof claims.iat === 'number' ? claims.iat * 1000 : Infinity, Date.now())
    if (claims.exp * 1000 - issuedAt > maxLifetimeMs) {
      throw unauthorized('Token lives longer than this service accepts (JWT_MAX_LIFETIME): ask for one that expires sooner')
    }
    request.user = claims
  }

  const requireScope = (scope: Scope) => async (request: FastifyRequest): Promise<void> => {
    if (grantedScopes(request.user).has(scope)) return
    throw new AppError(`Token lacks the scope this route asks for: ${scope}`, 403,
      { 'www-authenticate': `Bearer realm="api", error="insufficient_scope", scope="${scope}"` })
  }

  const refused = errorResponse('Missing, malformed, expired or wrongly signed bearer token, or one that lives longer than `JWT_MAX_LIFETIME`. ' +
    'Checked before the body is read: such a request is answered 401 whatever its body, never 400, 413 or 415.', { 'WWW-Authenticate': WWW_AUTHENTICATE })
  const lacksScope = (scope: Scope) => errorResponse(`The token is valid but does not grant \`${scope}\` (in \`scope\` or \`scp\`).`, { 'WWW-Authenticate': WWW_AUTHENTICATE })
  return (scope) => {
    if (mode === 'off' || (mode === 'writes' && scope === 'users:read')) return undefined
    return {
      hooks: scopes ? [verifyBearerToken, requireScope(scope)] : [verifyBearerToken],
      responses: { 401: refused, ...(scopes && { 403: lacksScope(scope) }) },
      security: [{ [SECURITY_SCHEME]: scopes ? [scope] : [] }]
    }
  }
}
