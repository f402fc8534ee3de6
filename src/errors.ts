/**
 * Every failure becomes `{"error": "<message>"}`, and only this module decides statuses and bodies:
 * a client's mistake keeps its 4xx and a message that says what to fix; anything unexpected is
 * logged in full and answered a bare 500.
 */
import { createRequire } from 'node:module'
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { Type, type Static } from 'typebox'
import { DatabaseUnavailableError, UserIdsExhaustedError } from './db/errors.js'
import { refTo, type HeaderSchema } from './route-schemas.js'

const JSON_TYPE = 'application/json; charset=utf-8'

declare module 'fastify' {
  interface FastifyRequest {
    /** The `error` the client was answered with, if any: its access-log line says it too. */
    answeredError: string | null
  }
}

// Required, not imported: node:http's module view reads every export, and three of them load Node's
// own copy of undici, which the service never uses.
const { STATUS_CODES }: typeof import('node:http') = createRequire(import.meta.url)('node:http')

/** One failed rule of a request's schema. */
const ValidationDetailSchema = Type.Object({
  in: Type.Union([Type.Literal('params'), Type.Literal('body'), Type.Literal('query'), Type.Literal('header')], { description: 'The part of the request.' }),
  path: Type.String({ description: 'A JSON Pointer into that part, e.g. `/email`; empty for the part itself.' }),
  message: Type.String({ description: 'What is wrong there.' })
}, { additionalProperties: false })
export type ValidationDetail = Static<typeof ValidationDetailSchema>

/** At most this many `details` in one answer: what a client can act on, not a flood. */
export const MAX_DETAILS = 20

/** Every error answer: `{"error": "<message>"}`, and on a 400 for a schema, its `details`. */
export const ErrorSchema = Type.Object({
  error: Type.String({ description: 'What went wrong, in one sentence.' }),
  details: Type.Optional(Type.Array(ValidationDetailSchema, {
    maxItems: MAX_DETAILS,
    description: 'On a 400 for a request that fails its schema: every rule it fails (up to 20), in the first part of the request that ' +
      'fails (path, then body, then query, then headers, the order they are checked in). `error` is the first of them.'
  }))
}, {
  $id: 'Error',
  additionalProperties: false,
  description: 'Every failure answers this shape.',
  examples: [{ error: 'User not found' }, {
    error: 'body/email must match format "email"',
    details: [
      { in: 'body', path: '/email', message: 'must match format "email"' },
      { in: 'body', path: '/age', message: 'must be >= 0' }
    ]
  }]
})

export const RETRY_AFTER: HeaderSchema = { type: 'integer', description: 'Seconds to wait before trying again.' }

/** An error answer as one route and status declare it. */
export function errorResponse (description: string, headers: Record<string, HeaderSchema> = {}) {
  return refTo(ErrorSchema, { description, ...(Object.keys(headers).length > 0 && { headers }) })
}

/**
 * An error a handler raises on purpose; its message is sent to the client (seed §7). It is an
 * answer, never logged as a fault, so it has no stack trace
 * (docs/decisions/0017-client-errors-without-stack.md).
 */
export class AppError extends Error {
  override name = 'AppError'
  readonly statusCode: number
  /** Response headers that belong to this error, e.g. `WWW-Authenticate` on a 401. */
  readonly headers: Record<string, string>
  /** Every rule a request failed, when it failed its schema. */
  readonly details: ValidationDetail[] | undefined

  constructor (message: string, statusCode = 400, headers: Record<string, string> = {}, details?: ValidationDetail[]) {
    const { stackTraceLimit } = Error
    Error.stackTraceLimit = 0
    super(message)
    Error.stackTraceLimit = stackTraceLimit
    this.statusCode = statusCode
    this.headers = headers
    this.details = details
  }
}

/** Fastify's own client errors whose default wording the contract words differently. */
const FASTIFY_MESSAGES: Record<string, string> = {
  FST_ERR_CTP_EMPTY_JSON_BODY: 'Body is not valid JSON: it is empty',
  FST_ERR_CTP_INVALID_JSON_BODY: 'Body is not valid JSON',
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'Unsupported Media Type: send the body as application/json',
  FST_ERR_CTP_BODY_TOO_LARGE: 'Request body is too large'
}

interface ErrorAnswer {
  statusCode: number
  message: string
  headers?: Record<string, string>
  details?: ValidationDetail[]
  /** For an error that is ours to look into: the message it is logged with, with its stack. */
  logAs?: string
}

function answerFor (error: FastifyError): ErrorAnswer {
  if (error instanceof AppError) {
    return { statusCode: error.statusCode, message: error.message, headers: error.headers, details: error.details }
  }
  // The storage layer logs each outage once, as it starts and as it ends.
  if (error instanceof DatabaseUnavailableError) {
    return { statusCode: 503, message: 'Database unavailable', headers: { 'retry-after': '1' } }
  }
  // No file could be opened (a static file, a docs asset): the process or the machine has
  // none left for now, and the client may retry.
  if (error.code === 'EMFILE' || error.code === 'ENFILE') {
    return { statusCode: 503, message: 'No file can be opened now: try again shortly', headers: { 'retry-after': '1' }, logAs: 'no file could be opened' }
  }
  if (error instanceof UserIdsExhaustedError) {
    return { statusCode: 507, message: 'Every user id is taken', logAs: 'no user ids left: no more users can be stored' }
  }
  const statusCode = error.statusCode ?? 500
  if (statusCode >= 400 && statusCode < 500) {
    return { statusCode, message: FASTIFY_MESSAGES[error.code] ?? error.message }
  }
  return { statusCode: 500, message: 'Internal Server Error', logAs: 'unhandled error' }
}

function replyWithError (error: FastifyError, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  const { statusCode, message, headers, details, logAs } = answerFor(error)
  if (logAs !== undefined) request.log.error({ err: error }, logAs)
  if (headers !== undefined) reply.headers(headers)
  request.answeredError = message
  return reply.code(statusCode).type(JSON_TYPE).send(details === undefined ? { error: message } : { error: message, details })
}

/**
 * For Fastify's `frameworkErrors`: failures of the router arrive before any hook has run, so the
 * request id header is set here.
 */
export function replyWithFrameworkError (error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  reply.header('x-request-id', request.id)
  replyWithError(error, request, reply)
}

/** What Node's HTTP parser refused, as the status and message answered for it. */
const CLIENT_ERRORS: Record<string, [number, string]> = {
  ERR_HTTP_REQUEST_TIMEOUT: [408, 'Request timed out: headers and body must arrive in time'],
  HPE_HEADER_OVERFLOW: [431, 'Request header fields are too large']
}

/** A request line whose method is a token Node does not know (`FOO /users HTTP/1.1`). */
const UNKNOWN_METHOD = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+ \S+ HTTP\/1\.[01]\r?\n/

function clientErrorAnswer (error: NodeJS.ErrnoException & { rawPacket?: Buffer }): [number, string] {
  // No route answers a method Node does not know, as none answers any other method it has
  // no route for; bytes that are not a request line at all are malformed.
  if (error.code === 'HPE_INVALID_METHOD' && UNKNOWN_METHOD.test(error.rawPacket?.toString('latin1') ?? '')) {
    return [404, 'Route not found']
  }
  return CLIENT_ERRORS[error.code ?? ''] ?? [400, 'Malformed HTTP request']
}

/** Answers on a bare socket with the JSON shape, then closes the connection for good. */
function endWithJson (socket: Socket, statusCode: number, message: string): void {
  const body = JSON.stringify({ error: message })
  socket.end(`HTTP/1.1 ${statusCode} ${STATUS_CODES[statusCode]}\r\nContent-Type: ${JSON_TYPE}\r\n` +
    `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`)
  // Closed for good once the answer is out: ending alone leaves the connection half open,
  // holding a descriptor for as long as a client that never reads keeps its side.
  socket.destroySoon()
}

/**
 * Connections whose request was answered before its body had all arrived: Node reads and drops the
 * rest, and reports the request as timed out should the body outlast REQUEST_TIMEOUT_MS.
 */
const answeredBeforeBodyEnded = new WeakMap<Socket, IncomingMessage>()

/** For `onResponse`: remembers a request answered while its body was still arriving. */
export function noteIfAnsweredBeforeBodyEnded (request: IncomingMessage): void {
  if (!request.complete) answeredBeforeBodyEnded.set(request.socket, request)
}

/**
 * For Fastify's `clientErrorHandler`: requests Node refuses before Fastify sees them get the same
 * JSON shape, then the connection is closed fully
 * (docs/decisions/0013-answers-to-malformed-http.md).
 */
export function answerClientError (this: FastifyInstance, error: NodeJS.ErrnoException, socket: Socket): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return
  // The client has its answer: a second one would be read as the answer to its next request.
  if (error.code === 'ERR_HTTP_REQUEST_TIMEOUT' && answeredBeforeBodyEnded.get(socket)?.complete === false) {
    socket.destroy()
    return
  }
  const [statusCode, message] = clientErrorAnswer(error)
  logRefusal(this, socket, statusCode, message, error.code)
  endWithJson(socket, statusCode, message)
}

/** At info, as the access log: no route saw the request, so no access line tells of it. */
function logRefusal (app: FastifyInstance, socket: Socket, statusCode: number, message: string, code?: string): void {
  app.log.info({ client: socket.remoteAddress, statusCode, code, error: message }, 'request refused before it reached a route')
}

/**
 * Two requests Node answers by itself get the JSON shape too: an `Expect` other than
 * `100-continue`, and `CONNECT`.
 */
export function answerExpectAndConnect (app: FastifyInstance): void {
  app.server.on('checkExpectation', (request: IncomingMessage, response: ServerResponse) => {
    const message = 'Expectation Failed: the only expectation met is Expect: 100-continue'
    logRefusal(app, request.socket, 417, message)
    const body = JSON.stringify({ error: message })
    response.writeHead(417, { 'content-type': JSON_TYPE, 'content-length': Buffer.byteLength(body) }).end(body)
  })
  app.server.on('connect', (_request: IncomingMessage, socket: Socket) => {
    socket.on('error', () => {})
    logRefusal(app, socket, 404, 'Route not found')
    endWithJson(socket, 404, 'Route not found')
  })
}

function routeNotFound (reply: FastifyReply): FastifyReply {
  reply.request.answeredError = 'Route not found'
  return reply.code(404).type(JSON_TYPE).send({ error: 'Route not found' })
}

export function registerErrorHandlers (app: FastifyInstance): void {
  app.decorateRequest('answeredError', null)
  // A request no route answers hears that, whatever else is wrong with it (a QUERY without
  // a Content-Type fails before the not-found handler is reached, say).
  app.setErrorHandler((error: FastifyError, request, reply) => request.is404 ? routeNotFound(reply) : replyWithError(error, request, reply))
  app.setNotFoundHandler((_request: FastifyRequest, reply: FastifyReply) => routeNotFound(reply))
}
