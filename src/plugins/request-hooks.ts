/**
 * The request hooks of seed §6: `onRequest` sends the request id back, refuses HTTP/1.1 without
 * Host and, while draining, asks for the connection to close; `onResponse` writes the access-log
 * line.
 */
import { randomUUID } from 'node:crypto'
import type { IncomingMessage } from 'node:http'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { AppError } from '../errors.js'
import type { HeaderSchema } from '../route-schemas.js'

declare module 'fastify' {
  interface FastifyInstance {
    /** Whether the service is draining before it shuts down (server.ts, on SIGTERM). */
    readonly draining: boolean
    /**
     * From now on `/ready` answers 503 and every answer carries `Connection: close`, so that
     * traffic moves elsewhere while requests are still answered.
     */
    startDraining: () => void
  }
}

const SAFE_REQUEST_ID = /^[A-Za-z0-9._-]{1,128}$/

export const REQUEST_ID_HEADER: HeaderSchema = {
  type: 'string',
  description: 'The request\'s id, in the log lines about it: the caller\'s own `X-Request-Id` when it is 1 to 128 of `A-Za-z0-9._-`, else a new UUID.'
}

/** Uses the caller's `X-Request-Id`, unless it could forge or flood log lines; then a fresh one. */
export function requestIdFrom (request: IncomingMessage): string {
  const incoming = request.headers['x-request-id']
  return typeof incoming === 'string' && SAFE_REQUEST_ID.test(incoming) ? incoming : randomUUID()
}

async function requestHooks (app: FastifyInstance): Promise<void> {
  // Decided once: at LOG_LEVEL=warn and above the line is never written, so never built.
  const accessLog = ['info', 'debug', 'trace'].includes(app.log.level)
  let draining = false
  app.decorate('draining', { getter: () => draining })
  app.decorate('startDraining', () => { draining = true })
  let closing = false
  app.addHook('preClose', (done) => {
    closing = true
    done()
  })

  const accessFields = (request: FastifyRequest, reply: FastifyReply) => ({
    reqId: request.id,
    method: request.method,
    url: request.url,
    // The client's address: behind trusted proxies (TRUST_PROXY), the one they forwarded.
    client: request.ip,
    route: request.routeOptions.url ?? null,
    responseTime: Math.round(reply.elapsedTime * 100) / 100,
    user: request.user?.sub
  })

  /**
   * A client that leaves before its answer gets no onResponse: the response's close writes its
   * line.
   */
  function logIfAborted (request: FastifyRequest, reply: FastifyReply): void {
    const client = request.ip // read now: a closed socket forgets its peer
    reply.raw.once('close', () => {
      if (reply.raw.writableEnded) return
      app.log.info({ ...accessFields(request, reply), client }, 'request aborted: its connection closed before it was answered')
    })
  }

  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id)
    if (accessLog) logIfAborted(request, reply)
    if (draining) reply.header('connection', 'close')
    // RFC 9112 §3.2: an HTTP/1.1 request names its host. Node refuses one that does not with
    // a 400 of its own, without a body; app.ts turns that check off so that it is made here
    // and answered as every other error is.
    if (request.headers.host === undefined && request.raw.httpVersion === '1.1') {
      done(new AppError('Host header is required in an HTTP/1.1 request'))
      return
    }
    done()
  })

  app.addHook('onResponse', (request, reply, done) => {
    if (accessLog) {
      app.log.info({
        ...accessFields(request, reply),
        statusCode: reply.statusCode,
        // Why an error answer was given, so that a client's 400 can be understood from the log.
        error: request.answeredError ?? undefined
      }, 'request completed')
    }
    // A request in flight when closing began was answered with keep-alive; its connection is
    // idle now, and would hold the shutdown until the client hung up.
    if (closing) app.server.closeIdleConnections()
    done()
  })
}

export default fp(requestHooks, { name: 'request-hooks' })
