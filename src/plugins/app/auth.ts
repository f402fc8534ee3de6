/**
 * Which routes need a bearer token (seed §5), and with `AUTH_SCOPES` which scope: decided from
 * `AUTH` as each route is declared, which gives it both the check and its OpenAPI security, so
 * that the two cannot disagree.
 */
import type { FastifyInstance, FastifyRequest, RouteOptions } from 'fastify'
import fp from 'fastify-plugin'
import type { AuthMode } from '../../config/config.js'
import { bearerToken } from '../external/jwt.js'
import { AppError } from './errors.js'
import { errorResponse, type HeaderSchema } from '../../routes/common.schemas.js'
import { addResponses } from './declare-responses.js'

export const SECURITY_SCHEME = 'bearerAuth'

const WRITES = new Set(['POST', 'PUT', 'PATCH', 'DELETE'])
const writes = (method: RouteOptions['method']) => [method].flat().some((one) => WRITES.has(one))

function needsToken (mode: AuthMode, method: RouteOptions['method']): boolean {
  if (mode === 'all') return true
  if (mode === 'writes') return writes(method)
  return false
}

/** The scope a route asks for, with `AUTH_SCOPES=on`. */
const scopeFor = (method: RouteOptions['method']): string => writes(method) ? 'users:write' : 'users:read'

const WWW_AUTHENTICATE: HeaderSchema = {
  type: 'string',
  description: 'The bearer challenge (RFC 6750 §3): `Bearer realm="api"`, with `error="invalid_token"` for a token that was refused, ' +
    'or `error="insufficient_scope", scope="…"` for one without the scope the route asks for.'
}

function unauthorized (message: string, withoutCredentials = false): AppError {
  const challenge = withoutCredentials ? 'Bearer realm="api"' : 'Bearer realm="api", error="invalid_token"'
  return new AppError(message, 401, { 'www-authenticate': challenge })
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

interface TokenRules { mode: AuthMode, scopes: boolean, maxLifetimeMs: number }

async function requireTokens (app: FastifyInstance, { mode, scopes, maxLifetimeMs }: TokenRules): Promise<void> {
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

  function requireScope (scope: string) {
    return async (request: FastifyRequest): Promise<void> => {
      if (grantedScopes(request.user).has(scope)) return
      throw new AppError(`Token lacks the scope this route asks for: ${scope}`, 403,
        { 'www-authenticate': `Bearer realm="api", error="insufficient_scope", scope="${scope}"` })
    }
  }

  app.addHook('onRoute', (route) => {
    if (!needsToken(mode, route.method)) return
    const scope = scopes ? scopeFor(route.method) : undefined
    // Checked as the request arrives, before its body is read: a client without a token can make
    // the service read no body, and learns none of the routes' rules.
    route.onRequest = [...[route.onRequest ?? []].flat(), verifyBearerToken, ...(scope === undefined ? [] : [requireScope(scope)])]
    route.schema = { ...route.schema, security: [{ [SECURITY_SCHEME]: scope === undefined ? [] : [scope] }] }
    addResponses(route, {
      401: errorResponse('Missing, malformed, expired or wrongly signed bearer token, or one that lives longer than `JWT_MAX_LIFETIME`. ' +
        'Checked before the body is read: such a request is answered 401 whatever its body, never 400, 413 or 415.', { 'WWW-Authenticate': WWW_AUTHENTICATE }),
      ...(scope !== undefined && {
        403: errorResponse(`The token is valid but does not grant \`${scope}\` (in \`scope\` or \`scp\`).`, { 'WWW-Authenticate': WWW_AUTHENTICATE })
      })
    })
  })
}

export default fp(requireTokens, { name: 'require-tokens' })
