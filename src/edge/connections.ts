/**
 * At most MAX_CONNECTIONS connections at once; at the limit, kept-alive connections waiting for a
 * request are closed to make room. Refusals are logged as they begin and end, and counted
 * (docs/decisions/0008-connection-limit.md).
 */
import type { Socket } from 'node:net'
import type { FastifyInstance } from 'fastify'

const IDLE_CLOSED_AT_ONCE = 32

export interface ConnectionTracker {
  /** A request has arrived on this connection. */
  arrived: (socket: Socket) => void
  /** A request on this connection has been answered. */
  answered: (socket: Socket) => void
  /** Connections refused since start. */
  refused: () => number
}

export function trackConnections (app: FastifyInstance, maxConnections: number): ConnectionTracker {
  app.server.maxConnections = maxConnections
  let refused = 0
  let refusedSinceLimitReached = 0
  app.server.on('drop', () => {
    refused++
    if (refusedSinceLimitReached++ === 0) {
      app.log.warn({ maxConnections }, 'refusing new connections: MAX_CONNECTIONS are open (its default follows the open-file limit and the memory: raise them, or MAX_CONNECTIONS)')
    }
  })

  // For each connection that has sent a request, its requests not yet answered, oldest first.
  // Closed ones are forgotten once a second: a 'close' listener on each would make V8 pretenure
  // every request's listener lists.
  const unanswered = new Map<Socket, number>()
  const forgetClosed = setInterval(() => {
    for (const socket of unanswered.keys()) if (socket.destroyed) unanswered.delete(socket)
  }, 1000).unref()
  app.addHook('onClose', (_app, done) => {
    clearInterval(forgetClosed)
    done()
  })

  /** The longest-open of those waiting for a request, a batch at a time, as nginx does. */
  function closeIdleConnections (): void {
    let closed = 0
    for (const [socket, count] of unanswered) {
      if (count > 0 || socket.destroyed) continue
      socket.destroy()
      if (++closed === IDLE_CLOSED_AT_ONCE) break
    }
    if (closed > 0) app.log.info({ maxConnections, closed }, 'closed kept-alive connections waiting for a request, to make room for new ones')
  }

  app.server.on('connection', () => {
    app.server.getConnections((error, open) => {
      if (error === null && open >= maxConnections) closeIdleConnections()
    })
    if (refusedSinceLimitReached === 0) return
    app.log.info({ refusedConnections: refusedSinceLimitReached }, 'accepting new connections again')
    refusedSinceLimitReached = 0
  })

  return {
    arrived (socket) {
      if (!socket.destroyed) unanswered.set(socket, (unanswered.get(socket) ?? 0) + 1)
    },
    answered (socket) {
      const count = unanswered.get(socket)
      // Not kept for a connection already gone and forgotten.
      if (count !== undefined) unanswered.set(socket, count - 1)
    },
    refused: () => refused
  }
}
