/**
 * Draining before a shutdown: once started, `/ready` answers 503 and every answer carries
 * `Connection: close`, so that traffic moves elsewhere while requests are still answered.
 */
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'

declare module 'fastify' {
  interface FastifyInstance {
    /** Whether the service is draining before it shuts down (server.ts, on SIGTERM). */
    readonly draining: boolean
    startDraining: () => void
    /** Whether the app is closing: connections are released as soon as they are idle. */
    readonly closing: boolean
  }
}

async function drain (app: FastifyInstance): Promise<void> {
  let draining = false
  let closing = false
  app.decorate('draining', { getter: () => draining })
  app.decorate('startDraining', () => { draining = true })
  app.decorate('closing', { getter: () => closing })
  app.addHook('preClose', (done) => {
    closing = true
    done()
  })
}

export default fp(drain, { name: 'drain' })
