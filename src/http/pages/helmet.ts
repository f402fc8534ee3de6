/**
 * Pages (the docs page, static files) carry helmet's headers, from one middleware built at start,
 * in place of the JSON set (docs/decisions/0004-security-headers.md).
 */
import helmet from 'helmet'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { API_SECURITY_HEADERS } from '../request/security-headers.js'

/** For pages: a content security policy that allows only this service's own scripts, styles and images (all the docs page uses). */
export const PAGE_HELMET_OPTIONS = {
  // Both are deprecated headers that browsers ignore (REDbot warns of each).
  xXssProtection: false,
  xDownloadOptions: false,
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
 * JSON ones so that they win where the names are the same. A file may be stored but is revalidated
 * before each use, with its ETag or Last-Modified, since it changes with each deployment; what has
 * neither (the docs page, its document) and errors keep the JSON answers' no-store.
 */
export const pageSecurityHeaders = fp(async (pages: FastifyInstance) => {
  const setPageHeaders = helmet(PAGE_HELMET_OPTIONS)
  const apiHeaderNames = Object.keys(API_SECURITY_HEADERS)
  pages.addHook('onRequest', (request, reply, done) => {
    for (const name of apiHeaderNames) reply.removeHeader(name)
    setPageHeaders(request.raw, reply.raw, (error) => { done(error instanceof Error ? error : undefined) })
  })
  pages.addHook('onSend', (_request, reply, payload, done) => {
    const validated = reply.hasHeader('etag') || reply.hasHeader('last-modified')
    if (validated && (reply.statusCode === 200 || reply.statusCode === 304)) reply.header('cache-control', 'no-cache')
    done(null, payload)
  })
}, { name: 'page-security-headers', dependencies: ['request-context'] })
