/**
 * At most MAX_CONNECTIONS connections at once (README, "Descriptors"); past it, Node closes
 * each new connection as it arrives. That is said once as it begins (at `warn`, with the limit)
 * and once as it ends (at `info`, with how many were refused meanwhile), like a database
 * outage, and counted for `/metrics`: otherwise clients would be refused without a word.
 */
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'

declare module 'fastify' {
  interface FastifyInstance {
    /** Connections refused since start, for being over MAX_CONNECTIONS. */
    refusedConnections: () => number
  }
}

async function connectionLimit (app: FastifyInstance, { maxConnections }: { maxConnections: number }): Promise<void> {
  app.server.maxConnections = maxConnections
  let refused = 0
  let refusedSinceLimitReached = 0
  app.server.on('drop', () => {
    refused++
    if (refusedSinceLimitReached++ === 0) {
      app.log.warn({ maxConnections }, 'refusing new connections: MAX_CONNECTIONS are open (its default follows the open-file limit and the memory: raise them, or MAX_CONNECTIONS)')
    }
  })
  app.server.on('connection', () => {
    if (refusedSinceLimitReached === 0) return
    app.log.info({ refusedConnections: refusedSinceLimitReached }, 'accepting new connections again')
    refusedSinceLimitReached = 0
  })
  app.decorate('refusedConnections', () => refused)
}

export default fp(connectionLimit, { name: 'connection-limit' })
