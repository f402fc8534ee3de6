/**
 * What every request gets, in one `onRequest` hook: its id sent back, the JSON security
 * headers, `Connection: close` while draining, and a refusal without Host; and in one `onResponse`
 * hook, its access-log line and its metrics. Draining starts before a shutdown: from then on
 * `/ready` answers 503 and every answer asks for its connection to close, so that traffic moves
 * elsewhere while requests are still answered.
 */
import { randomUUID } from 'node:crypto'
import type { IncomingMessage } from 'node:http'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import type { HeaderSchema } from '../schemas.js'
import { AppError, ValidationError } from '../errors.js'
import { loggedUrl } from './logging.js'
import { API_SECURITY_HEADERS } from './security-headers.js'

declare module 'fastify' {
  interface FastifyInstance {
    /** Whether the service is draining before it shuts down (service.ts, on SIGTERM). */
    readonly draining: boolean
    startDraining: () => void
    /** Whether the app is closing: connections are released as soon as they are idle. */
    readonly closing: boolean
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

/** `observe` counts each answered request, when the service keeps metrics (metrics.ts). */
const decodes = (text: string): boolean => {
  try {
    decodeURIComponent(text)
    return true
  } catch {
    return false
  }
}

/**
 * A query whose escapes do not decode to UTF-8 (`?name=%FF`) is refused, naming the parameter, where
 * the query parser would keep the escape as text and match it literally.
 */
function undecodableQuery (url: string): ValidationError | undefined {
  const start = url.indexOf('?')
  if (start === -1 || !url.includes('%', start)) return undefined
  for (const pair of url.slice(start + 1).split('&')) {
    const [name = '', value = ''] = pair.replaceAll('+', ' ').split('=', 2)
    if (decodes(name) && decodes(value)) continue
    const parameter = decodes(name) ? decodeURIComponent(name) : name
    const message = 'must be percent-encoded UTF-8'
    const path = `/${parameter.replaceAll('~', '~0').replaceAll('/', '~1')}`
    return new ValidationError(`querystring${path}`, message, [{ in: 'query', path, message, keyword: 'encoding', params: { encoding: 'UTF-8' } }])
  }
  return undefined
}

async function requestContext (app: FastifyInstance, { observe }: { observe?: ((request: FastifyRequest, reply: FastifyReply) => void) | undefined }): Promise<void> {
  let draining = false
  let closing = false
  app.decorate('draining', { getter: () => draining })
  app.decorate('startDraining', () => { draining = true })
  app.decorate('closing', { getter: () => closing })
  app.addHook('preClose', (done) => {
    closing = true
    done()
  })

  // Decided once: at LOG_LEVEL=warn and above the line is never written, so never built.
  const accessLog = ['info', 'debug', 'trace'].includes(app.log.level)

  /** The application a token was issued to (`azp`, or `client_id`), when the identity provider names it. */
  const clientIdOf = (user: FastifyRequest['user'] | undefined): string | undefined => {
    const id = user?.azp ?? user?.client_id
    return typeof id === 'string' ? id : undefined
  }

  const accessFields = (request: FastifyRequest, reply: FastifyReply) => ({
    reqId: request.id,
    method: request.method,
    url: loggedUrl(request.url),
    // The client's address: behind trusted proxies (TRUST_PROXY), the one they forwarded.
    client: request.ip,
    route: request.routeOptions.url ?? null,
    responseTime: Math.round(reply.elapsedTime * 100) / 100,
    user: request.user?.sub,
    clientId: clientIdOf(request.user)
  })

  /**
   * A client that leaves before its answer ends gets no onResponse: the response's close writes its
   * line, which tells an answer never begun from one cut off while it was sent (a download, a stream).
   */
  function logIfAborted (request: FastifyRequest, reply: FastifyReply): void {
    const client = request.ip // read now: a closed socket forgets its peer
    reply.raw.once('close', () => {
      if (reply.raw.writableEnded) return
      const begun = reply.raw.headersSent
      app.log.info({ ...accessFields(request, reply), client, statusCode: begun ? reply.statusCode : undefined },
        begun ? 'connection closed while its answer was being sent' : 'request aborted: its connection closed before it was answered')
    })
  }

  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id)
    reply.headers(API_SECURITY_HEADERS)
    // Not stored by any cache unless the route says otherwise (conditional-get.ts).
    reply.header('cache-control', 'no-store')
    if (accessLog) logIfAborted(request, reply)
    if (draining) reply.header('connection', 'close')
    // RFC 9112 §3.2: an HTTP/1.1 request names its host. Node's own check is off (server-options.ts)
    // so that the refusal is answered as every other error is.
    if (request.headers.host === undefined && request.raw.httpVersion === '1.1') {
      done(new AppError('host_required'))
      return
    }
    done(undecodableQuery(request.url))
  })

  app.addHook('onResponse', (request, reply, done) => {
    if (accessLog) {
      app.log.info({
        ...accessFields(request, reply),
        statusCode: reply.statusCode,
        // Why an error answer was given, so that a client's 400 can be understood from the log.
        error: request.answeredError?.message,
        code: request.answeredError?.code
      }, 'request completed')
    }
    observe?.(request, reply)
    // A request in flight when closing began was answered with keep-alive; its connection is
    // idle now, and would hold the shutdown until the client hung up.
    if (closing) app.server.closeIdleConnections()
    done()
  })
}

export default fp(requestContext, { name: 'request-context' })
