/**
 * Every failure becomes `{"error": "<message>"}`, and only this module decides statuses and bodies:
 * a client's mistake keeps its 4xx and a message that says what to fix; anything unexpected is
 * logged in full and answered a bare 500.
 */
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { DatabaseUnavailableError, UserIdsExhaustedError } from '../storage/observed-queries.js'
import type { ValidationDetail } from './schemas.js'

/** The type of every JSON answer. */
export const JSON_TYPE = 'application/json; charset=utf-8'

/** The body of every error answer (ErrorSchema), also where no reply exists, on a bare socket. */
export const errorBody = (message: string, details?: ValidationDetail[]) => details === undefined ? { error: message } : { error: message, details }

declare module 'fastify' {
  interface FastifyRequest {
    /** The `error` the client was answered with, if any: its access-log line says it too. */
    answeredError: string | null
  }
}

/**
 * An error a handler raises on purpose; its message is sent to the client. It is an
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

/** The bearer challenge (RFC 6750 §3) of a 401 or 403, with the error and scope it names. */
export function bearerChallenge (error?: 'invalid_token' | 'insufficient_scope', scope?: string): { 'www-authenticate': string } {
  const parameters = [error === undefined ? '' : `, error="${error}"`, scope === undefined ? '' : `, scope="${scope}"`]
  return { 'www-authenticate': `Bearer realm="api"${parameters.join('')}` }
}

/** A 401 with its challenge: `invalid_token` unless no credentials came at all. */
export function unauthorized (message: string, withoutCredentials = false): AppError {
  return new AppError(message, 401, bearerChallenge(withoutCredentials ? undefined : 'invalid_token'))
}

/** What a token was refused for, as operators read it in the log. */
export type RefusalReason = 'malformed' | 'algorithm' | 'type' | 'kid' | 'signature' | 'issuer' | 'audience' | 'subject' | 'expiry' | 'not-before' | 'lifetime'

/**
 * A refused token: the client is told what it can act on, and the log says why, in `detail`, since
 * a wrong issuer, audience or key is the operator's to fix and the token's holder cannot see it.
 */
export class TokenRefusal extends AppError {
  constructor (readonly reason: RefusalReason, readonly detail: string, message = 'Token is invalid') {
    super(message, 401, bearerChallenge('invalid_token'))
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
  return reply.code(statusCode).type(JSON_TYPE).send(errorBody(message, details))
}

/**
 * For Fastify's `frameworkErrors`: failures of the router arrive before any hook has run, so the
 * request id header is set here.
 */
export function replyWithFrameworkError (error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  reply.header('x-request-id', request.id)
  replyWithError(error, request, reply)
}

function routeNotFound (reply: FastifyReply): FastifyReply {
  reply.request.answeredError = 'Route not found'
  return reply.code(404).type(JSON_TYPE).send(errorBody('Route not found'))
}

async function errors (app: FastifyInstance): Promise<void> {
  app.decorateRequest('answeredError', null)
  // A request no route answers hears that, whatever else is wrong with it (a QUERY without
  // a Content-Type fails before the not-found handler is reached, say).
  app.setErrorHandler((error: FastifyError, request, reply) => request.is404 ? routeNotFound(reply) : replyWithError(error, request, reply))
  app.setNotFoundHandler((_request: FastifyRequest, reply: FastifyReply) => routeNotFound(reply))
}

export default fp(errors, { name: 'errors' })

/**
 * A path no route answers is told so as it arrives, once what every request gets (its id, its
 * headers, CORS) is set: its body is never read, and no guard counts it.
 */
export const unknownPathsAtOnce = fp(async (app: FastifyInstance) => {
  app.addHook('onRequest', (request, reply, done) => {
    if (request.is404) routeNotFound(reply)
    else done()
  })
}, { name: 'unknown-paths-at-once', dependencies: ['errors'] })
