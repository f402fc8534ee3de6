/**
 * The guards of the API's routes, in the one order this module owns: load shedding, the rate
 * limit, the token, its scope. A route declares its guards with `app.protect(scope, route)`, which
 * gives it their hooks and declares their answers (503, 429, 401, 403) and security in its schema,
 * so that what the document says and what the route does cannot disagree.
 */
import type { FastifyInstance, onRequestHookHandler } from 'fastify'
import fp from 'fastify-plugin'
import type { Config } from '../../config/config.js'
import { shedOnOverload } from './overload.js'
import { limitRate } from './rate-limit.js'
import { type HeaderSchema, joinResponses, type Responses, withHeaders } from '../schemas.js'
import { type PersonalDataTest, type Scope, tokenChecks, type UrlCredential } from './tokens.js'

interface Guard {
  hook: onRequestHookHandler
  /** What the guard answers; a route that declares the same status adds its codes to the guard's. */
  responses: Responses
  /** Headers the guard sends with every answer. */
  headers?: Record<string, HeaderSchema>
}

export interface ProtectOptions {
  /** Whether load shedding and the rate limit apply; scrapes are exempt, since they matter most under load. */
  throttled?: boolean
  /** For a read: whether this request reads personal data, which needs a token under `AUTH=writes` too. */
  readsPersonalData?: PersonalDataTest
  /** Whether the route asks for a token as `AUTH` says (the default), always, or never. */
  token?: 'by-auth' | 'always' | 'never'
  /** A credential in the URL taken in place of a token (`GET /events?ticket=…`). */
  urlCredential?: UrlCredential
}

declare module 'fastify' {
  interface FastifyInstance {
    /**
     * The route with its guards before its own `onRequest` hooks, in the order overload, rate limit,
     * token, scope; each runs as the request arrives, before its body is read.
     */
    protect: <Route extends { schema: FastifySchema, onRequest?: onRequestHookHandler | onRequestHookHandler[] }>(scope: Scope, route: Route, options?: ProtectOptions) => Route & { onRequest: onRequestHookHandler[] }
  }
}

type GuardConfig = Pick<Config, 'overload' | 'rateLimit' | 'auth' | 'authScopes' | 'jwt'> & { tokensAlways: boolean }

async function guards (app: FastifyInstance, config: GuardConfig): Promise<void> {
  const shed = shedOnOverload(app, config.overload)
  const limit = config.rateLimit === undefined ? undefined : await limitRate(app, config.rateLimit)
  const tokenCheck = await tokenChecks(app, { mode: config.auth, scopes: config.authScopes, verification: config.jwt, tokensAlways: config.tokensAlways })

  app.decorate('protect', (scope, route, { throttled = true, readsPersonalData, token: asks = 'by-auth', urlCredential } = {}) => {
    const throttles: Guard[] = throttled ? [shed, ...(limit === undefined ? [] : [limit])] : []
    const token = asks === 'never' ? undefined : tokenCheck(scope, { readsPersonalData, always: asks === 'always', urlCredential })
    const declared = route.schema.response as Responses
    const responses = joinResponses(...throttles.map((guard) => guard.responses), token?.responses, declared)
    const headers = Object.assign({}, ...throttles.map((guard) => guard.headers))
    const schema = { ...route.schema, response: withHeaders(responses, headers), ...(token !== undefined && { security: token.security }) }
    const onRequest = [...throttles.map((guard) => guard.hook), ...(token?.hooks ?? []), ...[route.onRequest ?? []].flat()]
    return { ...route, schema, onRequest }
  })
}

export default fp(guards, { name: 'guards' })
