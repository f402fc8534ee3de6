/**
 * Security headers on every response, as helmet defines them, with a content security policy
 * that allows only this service's own scripts, styles and images (all the docs page uses).
 *
 * The headers never change, so they are computed once, by running helmet's middleware
 * against a recording stub, and set from one synchronous hook. @fastify/helmet instead
 * rebuilds the policy on every request, which cost about 8 % of the CPU of `GET /`.
 */
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import helmet from 'helmet'

const CONTENT_SECURITY_POLICY = {
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

function computeHeaders (): Record<string, string> {
  const headers: Record<string, string> = {}
  const recorder = {
    setHeader (name: string, value: string) { headers[name.toLowerCase()] = value },
    removeHeader (name: string) { delete headers[name.toLowerCase()] }
  }
  helmet({ contentSecurityPolicy: CONTENT_SECURITY_POLICY })(
    {} as Parameters<ReturnType<typeof helmet>>[0],
    recorder as unknown as Parameters<ReturnType<typeof helmet>>[1],
    (error?: unknown) => { if (error !== undefined) throw error }
  )
  return headers
}

async function securityHeaders (app: FastifyInstance): Promise<void> {
  const headers = computeHeaders()
  app.addHook('onRequest', (_request, reply, done) => {
    reply.headers(headers)
    done()
  })
}

export default fp(securityHeaders, { name: 'security-headers' })
