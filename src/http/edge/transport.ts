/**
 * The HTTP edge: every guard of the transport, registered first as one plugin with one hook pair.
 * At most MAX_CONNECTIONS connections are open, and room is kept near the limit
 * (docs/decisions/0008-connection-limit.md); pipelined requests go one at a time, in order
 * (docs/decisions/0009-pipelining-in-order.md); bodies are read within their bounds; and what Node
 * refuses is answered in JSON. The bound on files sent at once is kept here for the routes that send
 * files (file-limit.ts).
 */
import type { IncomingMessage } from 'node:http'
import type { Socket } from 'node:net'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { readJsonBodies } from './bodies.js'
import { boundFilesSent } from '../pages/file-limit.js'
import { answerExpectAndConnect } from './malformed-http.js'

declare module 'fastify' {
  interface FastifyInstance {
    /** Connections refused since start, for being over MAX_CONNECTIONS. */
    refusedConnections: () => number
    /**
     * Marks a request answered by a stream that stays open: it holds its connection's place, and
     * at the limit the longest open such one may be closed to make room.
     */
    holdsPlace: (request: FastifyRequest) => void
  }
}

/** The most places kept free below the limit (an eighth of a small limit), and so the most closed in one go. */
const ROOM_KEPT = 32
/** A connection that has sent nothing for this long since it opened is silent, not one whose request is on its way. */
const SILENT_AFTER_MS = 1000
/**
 * Near the limit, a connection silent this long may be closed at once: a client sends its request
 * as it connects, so one that has not by now is no client still on its way.
 */
const UNSENT_AFTER_MS = 100
/** A connection that sent part of a request and nothing since for this long has stalled. */
const STALLED_AFTER_MS = 1000
/** How often the connections' progress is read, and room made, so that it is there before the next client comes. */
const ROOM_CHECK_EVERY_MS = 250

interface ConnectionState {
  /** Its requests not yet answered. */
  unanswered: number
  /** The bytes it had sent when it last had no request unanswered. */
  bytesAtRest: number
  /** Its latest request, whose body may still be arriving. */
  latest: IncomingMessage | undefined
  /** The bytes it had sent when last looked at, and since when it has sent no more. */
  bytesSeen: number
  progressAt: number
  /** Since when its request has been answered by a stream that stays open; undefined when it is not. */
  streamingSince: number | undefined
}

interface ConnectionTracker {
  /** A request has arrived. */
  arrived: (request: IncomingMessage) => void
  /** A request on this connection has been answered. */
  answered: (socket: Socket) => void
  /** The request on this connection is answered by a stream that stays open. */
  streaming: (socket: Socket) => void
  /** Connections refused since start. */
  refused: () => number
}

/**
 * Bounds the connections and keeps room near the limit by closing those that hold a place without
 * using it: waiting ones, then stalled ones; and, once the limit is close, any that only holds a
 * place, so that a newcomer is never the one refused. Refusals are logged as they begin and end,
 * and counted.
 */
function trackConnections (app: FastifyInstance, maxConnections: number): ConnectionTracker {
  app.server.maxConnections = maxConnections
  // Room is made once this many are open: from those holding a place unused for a while, and past
  // `urgentAt`, from any that only holds one, silent or streaming, so that the last places stay free.
  const roomAt = maxConnections - Math.min(ROOM_KEPT, Math.floor(maxConnections / 8))
  const urgentAt = maxConnections - Math.max(1, Math.floor((maxConnections - roomAt) / 2))
  /** Connections destroyed to make room whose close the server has not counted yet. */
  let closingNow = 0
  let refused = 0
  let refusedSinceLimitReached = 0
  app.server.on('drop', () => {
    refused++
    if (refusedSinceLimitReached++ === 0) {
      app.log.warn({ maxConnections }, 'refusing new connections: MAX_CONNECTIONS are open (its default follows the open-file limit and the memory: raise them, or MAX_CONNECTIONS)')
    }
  })

  // Every open connection. Closed ones are forgotten as their progress is read: a 'close'
  // listener on each would make V8 pretenure every request's listener lists.
  const open = new Map<Socket, ConnectionState>()
  const readProgress = setInterval(() => {
    const now = performance.now()
    for (const [socket, state] of open) {
      if (socket.destroyed) {
        open.delete(socket)
      } else if (socket.bytesRead !== state.bytesSeen) {
        state.bytesSeen = socket.bytesRead
        state.progressAt = now
      }
    }
    makeRoom()
  }, ROOM_CHECK_EVERY_MS).unref()
  app.addHook('onClose', (_app, done) => {
    clearInterval(readProgress)
    done()
  })

  /** Near the limit, closes connections that hold a place without using it, so that the next client finds one. */
  function makeRoom (newcomer?: Socket): void {
    app.server.getConnections((error, counted) => {
      const count = counted - closingNow
      if (error === null && count >= roomAt) closeUnused(count - roomAt + 1, Math.max(0, count - urgentAt + 1), newcomer)
    })
  }

  /**
   * Closes up to `wanted` connections that hold a place unused: waiting ones first, as nginx closes
   * kept-alive ones (none of their requests unanswered and no byte sent since), then stalled ones,
   * as a header or body timeout would close them. Neither kind has a request being answered, so
   * none is cut off. If that makes fewer than `needed`, it closes the rest from those that only
   * hold a place: connections that have sent nothing since they opened, the oldest first, then the longest open
   * streams, whose readers resume where they were; never the newcomer that asked for the room.
   */
  function closeUnused (wanted: number, needed: number, newcomer: Socket | undefined): void {
    const now = performance.now()
    const waiting: Array<[Socket, ConnectionState]> = []
    const stalled: Array<[Socket, ConnectionState]> = []
    const unsent: Array<[Socket, ConnectionState]> = []
    const streams: Array<[Socket, ConnectionState]> = []
    for (const entry of open) {
      const [socket, state] = entry
      if (socket.destroyed) continue
      const quiet = socket.bytesRead === state.bytesSeen ? now - state.progressAt : 0
      if (state.unanswered === 0 && socket.bytesRead === state.bytesAtRest) {
        if (state.bytesAtRest > 0 || quiet >= SILENT_AFTER_MS) waiting.push(entry)
        else if (socket !== newcomer && quiet >= UNSENT_AFTER_MS) unsent.push(entry)
      } else if (quiet >= STALLED_AFTER_MS && (state.unanswered === 0 || state.latest?.complete === false)) {
        stalled.push(entry)
      } else if (state.streamingSince !== undefined) {
        streams.push(entry)
      }
    }
    const byProgress = (a: [Socket, ConnectionState], b: [Socket, ConnectionState]) => a[1].progressAt - b[1].progressAt
    const closingWaiting = waiting.sort(byProgress).slice(0, wanted)
    const closingStalled = stalled.sort(byProgress).slice(0, wanted - closingWaiting.length)
    const short = Math.max(0, needed - closingWaiting.length - closingStalled.length)
    const closingUnsent = unsent.sort(byProgress).slice(0, short)
    const closingStreams = streams.sort((a, b) => a[1].streamingSince! - b[1].streamingSince!).slice(0, short - closingUnsent.length)
    for (const [socket] of [...closingWaiting, ...closingStalled, ...closingUnsent, ...closingStreams]) {
      closingNow++
      socket.once('close', () => { closingNow-- })
      socket.destroy()
    }
    const closed = closingWaiting.length + closingStalled.length + closingUnsent.length + closingStreams.length
    if (closed === 0) return
    const silent = closingWaiting.filter(([, state]) => state.bytesAtRest === 0).length + closingUnsent.length
    app.log.info({ maxConnections, closed, silent, stalled: closingStalled.length, streams: closingStreams.length }, 'closed connections holding a place unused, to make room for new ones')
  }

  app.server.on('connection', (socket: Socket) => {
    open.set(socket, { unanswered: 0, bytesAtRest: 0, latest: undefined, bytesSeen: 0, progressAt: performance.now(), streamingSince: undefined })
    makeRoom(socket)
    if (refusedSinceLimitReached === 0) return
    app.log.info({ refusedConnections: refusedSinceLimitReached }, 'accepting new connections again')
    refusedSinceLimitReached = 0
  })

  return {
    arrived (request) {
      const state = open.get(request.socket)
      if (state === undefined) return
      state.unanswered++
      state.latest = request
    },
    answered (socket) {
      // Nothing is kept for a connection already gone and forgotten.
      const state = open.get(socket)
      if (state === undefined) return
      if (--state.unanswered === 0) {
        state.bytesAtRest = socket.bytesRead
        state.latest = undefined
        state.streamingSince = undefined
      }
    },
    streaming (socket) {
      const state = open.get(socket)
      if (state !== undefined) state.streamingSince = performance.now()
    },
    refused: () => refused
  }
}

/** Requests a connection may have waiting behind the one being handled; past them it is closed. */
const MAX_WAITING = 64

/** Lets each request go on in its connection's turn: `admit` calls `proceed` when it may. */
function pipelineInOrder (): (request: FastifyRequest, reply: FastifyReply, proceed: () => void) => void {
  /** For each connection with a request being handled, the requests waiting behind it. */
  const waiting = new WeakMap<Socket, Array<() => void>>()

  /** Lets the request go on; once its answer is done, the next waiting one goes on, if any. */
  function handle (socket: Socket, reply: FastifyReply, proceed: () => void): void {
    reply.raw.once('close', () => {
      const next = socket.destroyed ? undefined : waiting.get(socket)?.shift()
      if (next === undefined) waiting.delete(socket)
      else next()
    })
    proceed()
  }

  return (request, reply, proceed) => {
    const socket = request.raw.socket
    // A connection closed for pipelining too much: the requests Node parsed after it are dropped.
    if (socket.destroyed) return
    const queue = waiting.get(socket)
    if (queue === undefined) {
      waiting.set(socket, [])
      handle(socket, reply, proceed)
    } else if (queue.length < MAX_WAITING) {
      queue.push(() => { handle(socket, reply, proceed) })
    } else {
      request.log.info({ client: request.ip, maxWaiting: MAX_WAITING }, 'closing a connection that pipelined more requests than are handled in turn')
      waiting.delete(socket)
      socket.destroy()
    }
  }
}

async function edge (app: FastifyInstance, options: { maxConnections: number, bodyLimit: number }): Promise<void> {
  const connections = trackConnections(app, options.maxConnections)
  const inTurn = pipelineInOrder()
  app.decorate('refusedConnections', connections.refused)
  app.decorate('holdsPlace', (request: FastifyRequest) => { connections.streaming(request.raw.socket) })
  app.decorate('filesSent', boundFilesSent())
  app.decorate('earlyAnswers', new WeakMap())
  answerExpectAndConnect(app)
  readJsonBodies(app, options.bodyLimit)

  app.addHook('onRequest', (request, reply, done) => {
    // Counted as it arrives: a connection with none unanswered may be closed to make room.
    connections.arrived(request.raw)
    inTurn(request, reply, done)
  })
  app.addHook('onResponse', (request, _reply, done) => {
    connections.answered(request.raw.socket)
    if (!request.raw.complete) app.earlyAnswers.set(request.raw.socket, request.raw)
    done()
  })
}

export default fp(edge, { name: 'edge' })
