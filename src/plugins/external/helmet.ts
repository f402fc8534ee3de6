/**
 * Pages (the docs page, static files) carry helmet's headers, from one middleware built at start,
 * in place of the JSON set (docs/decisions/0004-security-headers.md).
 */
import helmet from 'helmet'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { API_SECURITY_HEADERS } from '../app/security-headers.js'

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

/**
 * For the scope that serves pages: helmet's headers, from a middleware built once, set after the
 * JSON ones so that they win where the names are the same.
 */
export const pageSecurityHeaders = fp(async (pages: FastifyInstance) => {
  const setPageHeaders = helmet(PAGE_HELMET_OPTIONS)
  const apiHeaderNames = Object.keys(API_SECURITY_HEADERS)
  pages.addHook('onRequest', (request, reply, done) => {
    // Files carry their own caching headers (@fastify/static), as a JSON answer carries no-store.
    for (const name of [...apiHeaderNames, 'cache-control']) reply.removeHeader(name)
    setPageHeaders(request.raw, reply.raw, (error) => { done(error instanceof Error ? error : undefined) })
  })
}, { name: 'page-security-headers', dependencies: ['request-context'] })
