/**
 * Security headers on every response (@fastify/helmet), with a content security policy that
 * allows only this service's own scripts, styles and images (all the docs page uses).
 */
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import helmet from '@fastify/helmet'

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

async function securityHeaders (app: FastifyInstance): Promise<void> {
  await app.register(helmet, { contentSecurityPolicy: CONTENT_SECURITY_POLICY })
}

export default fp(securityHeaders, { name: 'security-headers' })
