/**
 * Security headers on every answer, errors included: the ones that protect a JSON answer on
 * each, and helmet's full set on the pages a browser renders.
 *
 * Most of helmet's headers tell a browser how an HTML page may behave (what it may load,
 * whether it may open popups, prefetch names or run in a shared process) and mean nothing on
 * JSON. JSON answers carry the set OWASP's REST Security Cheat Sheet gives for API responses:
 * a content security policy that allows nothing and no framing (a JSON answer opened as a page
 * runs and loads nothing), no MIME sniffing, HSTS, and X-Frame-Options for older browsers;
 * and Cross-Origin-Resource-Policy, so that another site cannot load an answer as a script or
 * an image. Caching is left to each route: user records answer with ETags, not `no-store`.
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
 * For the scope that serves pages: helmet's headers instead of the JSON ones. Those are set
 * first, on every request, and would win over helmet's where the names are the same.
 * helmet's middleware is built once, here, and runs on each request's response as it would in
 * any Node server; @fastify/helmet would build it again, policy and all, for every request.
 */
export const pageSecurityHeaders = fp(async (pages: FastifyInstance) => {
  const setPageHeaders = helmet(PAGE_HELMET_OPTIONS)
  const apiHeaderNames = Object.keys(API_SECURITY_HEADERS)
  pages.addHook('onRequest', (request, reply, done) => {
    for (const name of apiHeaderNames) reply.removeHeader(name)
    setPageHeaders(request.raw, reply.raw, (error) => { done(error instanceof Error ? error : undefined) })
  })
}, { name: 'page-security-headers', dependencies: ['security-headers'] })
