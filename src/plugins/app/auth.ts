/**
 * Which routes need a bearer token (seed §5): decided from `AUTH` as each route is declared, which
 * gives it both the check and its OpenAPI security, so that the two cannot disagree.
 */
import type { FastifyInstance, FastifyRequest, RouteOptions } from 'fastify'
import fp from 'fastify-plugin'
import type { AuthMode } from '../../config/config.js'
import { AppError } from './errors.js'
import { errorResponse, type HeaderSchema } from '../../routes/common.schemas.js'
import { addResponses } from './declare-responses.js'

export const SECURITY_SCHEME = 'bearerAuth'

const WRITES = new Set(['POST', 'PUT', 'PATCH', 'DELETE'])

function needsToken (mode: AuthMode, method: RouteOptions['method']): boolean {
  if (mode === 'all') return true
  if (mode === 'writes') return [method].flat().some((one) => WRITES.has(one))
  return false
}

const WWW_AUTHENTICATE: HeaderSchema = { type: 'string', description: 'The bearer challenge: `Bearer realm="api"`, with `error="invalid_token"` for a token that was refused.' }

function unauthorized (message: string, withoutCredentials = false): AppError {
  const challenge = withoutCredentials ? 'Bearer realm="api"' : 'Bearer realm="api", error="invalid_token"'
  return new AppError(message, 401, { 'www-authenticate': challenge })
}

/** What a refused token is told, by fast-jwt's code, where more than "invalid" can be said. */
const REFUSALS: Record<string, string> = {
  FAST_JWT_EXPIRED: 'Token has expired',
  FAST_JWT_INACTIVE: 'Token is not valid yet (its nbf is in the future)'
}

const BEARER = /^Bearer +([A-Za-z0-9._~+/-]+=*) *$/i

async function requireTokens (app: FastifyInstance, options: { mode: AuthMode }): Promise<void> {
  async function verifyBearerToken (request: FastifyRequest): Promise<void> {
    const header = request.headers.authorization
    if (header === undefined) throw unauthorized('Missing bearer token: send Authorization: Bearer <token>', true)
    const token = BEARER.exec(header)?.[1]
    if (token === undefined) throw unauthorized('Authorization header must be "Bearer <token>"')

    let claims: Record<string, unknown>
    try {
      claims = app.jwt.verify(token)
    } catch (error) {
      throw unauthorized(REFUSALS[(error as { code?: string }).code ?? ''] ?? 'Token is invalid')
    }
    if (typeof claims.sub !== 'string' || claims.sub === '' || typeof claims.exp !== 'number') {
      throw unauthorized('Token must name its subject (sub) and expiry (exp)')
    }
    request.user = claims as FastifyRequest['user']
  }

  app.addHook('onRoute', (route) => {
    if (!needsToken(options.mode, route.method)) return
    // Checked as the request arrives, before its body is read: a client without a token can make
    // the service read no body, and learns none of the routes' rules.
    route.onRequest = [...[route.onRequest ?? []].flat(), verifyBearerToken]
    route.schema = { ...route.schema, security: [{ [SECURITY_SCHEME]: [] }] }
    addResponses(route, {
      401: errorResponse('Missing, malformed, expired or wrongly signed bearer token. Checked before the body is read: ' +
        'such a request is answered 401 whatever its body, never 400, 413 or 415.', { 'WWW-Authenticate': WWW_AUTHENTICATE })
    })
  })
}

export default fp(requireTokens, { name: 'require-tokens' })
