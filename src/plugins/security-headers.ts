/**
 * Security headers on every response, as helmet sets them, with a content security policy that
 * allows only this service's own scripts, styles and images (all the docs page uses).
 *
 * The policy has no per-request value (no nonce), so helmet sets the same headers on every
 * response: they are worked out once at start-up, by running helmet on a response that is
 * never sent, and then set on each reply. @fastify/helmet instead runs helmet afresh on every
 * request, parsing the policy each time (the cost is measured in docs/benchmarks.md, under
 * "Departures"); test/protection.test.ts checks that the headers are @fastify/helmet's own.
 */
import { IncomingMessage, ServerResponse } from 'node:http'
import { Socket } from 'node:net'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import helmet from 'helmet'

export const HELMET_OPTIONS = {
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

/** The headers helmet sets with these options, which depend on nothing in the request. */
export function helmetHeaders (): Record<string, string> {
  const request = new IncomingMessage(new Socket())
  const response = new ServerResponse(request)
  helmet(HELMET_OPTIONS)(request, response, (error?: unknown) => {
    if (error !== undefined) throw error
  })
  return Object.fromEntries(Object.entries(response.getHeaders()).map(([name, value]) => [name, String(value)]))
}

async function securityHeaders (app: FastifyInstance): Promise<void> {
  const headers = helmetHeaders()
  app.addHook('onRequest', (_request, reply, done) => {
    reply.headers(headers)
    done()
  })
}

export default fp(securityHeaders, { name: 'security-headers' })
