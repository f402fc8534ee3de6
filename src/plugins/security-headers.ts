/**
 * Security headers on every answer: OWASP's REST set on JSON, helmet's full set on pages
 * (docs/decisions/0004-security-headers.md). Caching is left to each route.
 */
import helmet from 'helmet'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'

export const API_SECURITY_HEADERS = {
  'content-security-policy': "default-src 'none'; frame-ancestors 'none'",
  'cross-origin-resource-policy': 'same-origin',
  'strict-transport-security': 'max-age=31536000; includeSubDomains',
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY'
} as const

/** For pages: a content security policy that allows only this service's own scripts, styles and images (all the docs page uses). */
export const PAGE_HELMET_OPTIONS = {
  contentSecurityPolicy: {
    directives: {
      defaultSrc: ["'self'"],
      scriptSrc: ["'self'"],
      styleSrc: ["'self'", "'unsafe-inline'"],
      imgSrc: ["'self'", 'data:'],
      connectSrc: ["'self'"],
      objectSrc: ["'none'"],
      frameAncestors: ["'none'"],
      baseUri: ["'self'"],
      formAction: ["'self'"],
      // helmet adds this by default; over plain HTTP on a LAN it would send the docs page's
      // scripts to https:// and break it. TLS, where used, is the proxy's to enforce.
      upgradeInsecureRequests: null
    }
  }
}

async function apiSecurityHeaders (app: FastifyInstance): Promise<void> {
  app.addHook('onRequest', (_request, reply, done) => {
    reply.headers(API_SECURITY_HEADERS)
    done()
  })
}

/** On every answer; a scope that serves pages replaces them with `pageSecurityHeaders`. */
export default fp(apiSecurityHeaders, { name: 'security-headers' })

/**
 * For the scope that serves pages: helmet's headers, from a middleware built once, set after the
 * JSON ones so that they win where the names are the same.
 */
export const pageSecurityHeaders = fp(async (pages: FastifyInstance) => {
  const setPageHeaders = helmet(PAGE_HELMET_OPTIONS)
  const apiHeaderNames = Object.keys(API_SECURITY_HEADERS)
  pages.addHook('onRequest', (request, reply, done) => {
    for (const name of apiHeaderNames) reply.removeHeader(name)
    setPageHeaders(request.raw, reply.raw, (error) => { done(error instanceof Error ? error : undefined) })
  })
}, { name: 'page-security-headers', dependencies: ['security-headers'] })
