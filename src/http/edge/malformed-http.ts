/**
 * Answers to requests Node refuses before Fastify sees them (not HTTP, headers too large or too slow,
 * an unknown method, `Expect`, `CONNECT`), in the service's JSON shape, on the bare socket
 * (docs/decisions/0013-answers-to-malformed-http.md).
 */
import { createRequire } from 'node:module'
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import type { FastifyInstance } from 'fastify'
import { ERRORS, type ErrorCode, messageOf } from '../error-catalogue.js'
import { errorBody, JSON_TYPE } from '../errors.js'

// Required, not imported: node:http's module view reads every export, and three of them load Node's
// own copy of undici, which the service never uses.
const { STATUS_CODES }: typeof import('node:http') = createRequire(import.meta.url)('node:http')

/** What Node's HTTP parser refused, as the code answered for it. */
const CLIENT_ERRORS: Record<string, ErrorCode> = {
  ERR_HTTP_REQUEST_TIMEOUT: 'request_timeout',
  HPE_HEADER_OVERFLOW: 'headers_too_large'
}

/** A request line whose method is a token Node does not know (`FOO /users HTTP/1.1`). */
const UNKNOWN_METHOD = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+ \S+ HTTP\/1\.[01]\r?\n/

function clientErrorAnswer (error: NodeJS.ErrnoException & { rawPacket?: Buffer }): ErrorCode {
  // No route answers a method Node does not know, as none answers any other method it has
  // no route for; bytes that are not a request line at all are malformed.
  if (error.code === 'HPE_INVALID_METHOD' && UNKNOWN_METHOD.test(error.rawPacket?.toString('latin1') ?? '')) {
    return 'route_not_found'
  }
  return CLIENT_ERRORS[error.code ?? ''] ?? 'malformed_http'
}

/** Answers on a bare socket with the JSON shape, then closes the connection for good. */
function endWithJson (socket: Socket, code: ErrorCode): void {
  const statusCode = ERRORS[code].status
  const body = JSON.stringify(errorBody(code, messageOf(code)))
  socket.end(`HTTP/1.1 ${statusCode} ${STATUS_CODES[statusCode]}\r\nContent-Type: ${JSON_TYPE}\r\nCache-Control: no-store\r\n` +
    `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`)
  // Closed for good once the answer is out: ending alone leaves the connection half open,
  // holding a descriptor for as long as a client that never reads keeps its side.
  socket.destroySoon()
}

declare module 'fastify' {
  interface FastifyInstance {
    /**
     * Requests answered before their body had all arrived, by connection: Node reads and drops the
     * rest, and reports the request as timed out should the body outlast REQUEST_TIMEOUT_MS.
     */
    earlyAnswers: WeakMap<Socket, IncomingMessage>
  }
}

/**
 * For Fastify's `clientErrorHandler`: requests Node refuses before Fastify sees them get the same
 * JSON shape, then the connection is closed fully
 * (docs/decisions/0013-answers-to-malformed-http.md).
 */
export function answerClientError (this: FastifyInstance, error: NodeJS.ErrnoException, socket: Socket): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return
  // The client has its answer: a second one would be read as the answer to its next request.
  if (error.code === 'ERR_HTTP_REQUEST_TIMEOUT' && this.earlyAnswers.get(socket)?.complete === false) {
    socket.destroy()
    return
  }
  const code = clientErrorAnswer(error)
  logRefusal(this, socket, code, error.code)
  endWithJson(socket, code)
}

/** At info, as the access log: no route saw the request, so no access line tells of it. */
function logRefusal (app: FastifyInstance, socket: Socket, answered: ErrorCode, parserCode?: string): void {
  const refusal = { statusCode: ERRORS[answered].status, error: messageOf(answered), code: answered, ...(parserCode !== undefined && { parserCode }) }
  app.log.info({ client: socket.remoteAddress, ...refusal }, 'request refused before it reached a route')
}

/**
 * Two requests Node answers by itself get the JSON shape too: an `Expect` other than
 * `100-continue`, and `CONNECT`.
 */
export function answerExpectAndConnect (app: FastifyInstance): void {
  app.server.on('checkExpectation', (request: IncomingMessage, response: ServerResponse) => {
    logRefusal(app, request.socket, 'expectation_failed')
    const body = JSON.stringify(errorBody('expectation_failed', messageOf('expectation_failed')))
    response.writeHead(417, { 'content-type': JSON_TYPE, 'cache-control': 'no-store', 'content-length': Buffer.byteLength(body) }).end(body)
  })
  app.server.on('connect', (_request: IncomingMessage, socket: Socket) => {
    socket.on('error', () => {})
    logRefusal(app, socket, 'route_not_found')
    endWithJson(socket, 'route_not_found')
  })
}
