/**
 * At most MAX_CONNECTIONS connections at once; at the limit, connections waiting for a request
 * (kept alive after an answer, or silent since they opened) are closed to make room, oldest first.
 * Refusals are logged as they begin and end, and counted (docs/decisions/0008-connection-limit.md).
 */
import type { Socket } from 'node:net'
import type { FastifyInstance } from 'fastify'

const WAITING_CLOSED_AT_ONCE = 32
/** A connection that has sent nothing for this long since it opened is silent, not one whose request is on its way. */
const SILENT_AFTER_MS = 1000
/** How often room is made at the limit, so that it is there before the next client comes. */
const ROOM_CHECK_EVERY_MS = 250

/** A connection's requests not yet answered, the bytes it had sent when it last had none, and when it opened. */
interface ConnectionState { unanswered: number, bytesAtRest: number, openedAt: number }

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

  // Every open connection, oldest first. Closed ones are forgotten once a second: a 'close'
  // listener on each would make V8 pretenure every request's listener lists.
  const open = new Map<Socket, ConnectionState>()
  const forgetClosed = setInterval(() => {
    for (const socket of open.keys()) if (socket.destroyed) open.delete(socket)
  }, 1000).unref()
  // At the limit, a connection becomes silent, and so closable, only with time.
  const makeRoomAhead = setInterval(makeRoom, ROOM_CHECK_EVERY_MS).unref()
  app.addHook('onClose', (_app, done) => {
    clearInterval(forgetClosed)
    clearInterval(makeRoomAhead)
    done()
  })

  /** At the limit, closes connections waiting for a request, so that the next client finds a place. */
  function makeRoom (): void {
    app.server.getConnections((error, count) => {
      if (error === null && count >= maxConnections) closeWaitingConnections()
    })
  }

  /**
   * The longest-open of those waiting for a request, a batch at a time, as nginx does: none of its
   * requests unanswered, and no byte sent since, so that one sending a request is never closed.
   */
  function closeWaitingConnections (): void {
    let closed = 0
    let silent = 0
    const silentSince = performance.now() - SILENT_AFTER_MS
    for (const [socket, { unanswered, bytesAtRest, openedAt }] of open) {
      if (unanswered > 0 || socket.destroyed || socket.bytesRead !== bytesAtRest) continue
      if (bytesAtRest === 0 && openedAt > silentSince) continue
      if (bytesAtRest === 0) silent++
      socket.destroy()
      if (++closed === WAITING_CLOSED_AT_ONCE) break
    }
    if (closed > 0) app.log.info({ maxConnections, closed, silent }, 'closed connections waiting for a request, to make room for new ones')
  }

  app.server.on('connection', (socket: Socket) => {
    open.set(socket, { unanswered: 0, bytesAtRest: 0, openedAt: performance.now() })
    makeRoom()
    if (refusedSinceLimitReached === 0) return
    app.log.info({ refusedConnections: refusedSinceLimitReached }, 'accepting new connections again')
    refusedSinceLimitReached = 0
  })

  return {
    arrived (socket) {
      const state = open.get(socket)
      if (state !== undefined) state.unanswered++
    },
    answered (socket) {
      // Nothing is kept for a connection already gone and forgotten.
      const state = open.get(socket)
      if (state === undefined) return
      if (--state.unanswered === 0) state.bytesAtRest = socket.bytesRead
    },
    refused: () => refused
  }
}
