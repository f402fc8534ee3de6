/**
 * Draining before a shutdown: once `startDraining` is called (server.ts, on SIGTERM),
 * `/ready` answers 503 so that load balancers stop sending new requests, while every other
 * route goes on answering; and each answer carries `Connection: close`, so that clients on
 * kept-alive connections open their next connection elsewhere.
 */
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'

declare module 'fastify' {
  interface FastifyInstance {
    /** Whether the service is draining before it shuts down. */
    readonly draining: boolean
    startDraining: () => void
  }
}

async function drain (app: FastifyInstance): Promise<void> {
  let draining = false
  app.decorate('draining', { getter: () => draining })
  app.decorate('startDraining', () => { draining = true })
  app.addHook('onSend', (_request, reply, payload, done) => {
    if (draining) reply.header('connection', 'close')
    done(null, payload)
  })
}

export default fp(drain, { name: 'drain' })
