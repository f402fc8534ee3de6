/**
 * Every failure becomes `{"error": "<message>", "code": "<code>"}` (error-catalogue.ts), or RFC 9457
 * problem details for a client that prefers them, and only this module decides statuses and bodies:
 * a client's mistake keeps its 4xx and a message that says what to fix; anything unexpected is
 * logged in full and answered a bare 500.
 */
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { DatabaseUnavailableError, UserIdsExhaustedError } from '../storage/observed-queries.js'
import { ERRORS, type ErrorCode, type Refusal, type MessageValues, messageOf, problemType, titleOf } from './error-catalogue.js'
import type { ValidationDetail } from './schemas.js'

/** The type of every JSON answer. */
export const JSON_TYPE = 'application/json; charset=utf-8'
/** The type of an answer in problem details (RFC 9457 §3). */
export const PROBLEM_TYPE = 'application/problem+json; charset=utf-8'

/** The body of every error answer (ErrorSchema), also where no reply exists, on a bare socket. */
export const errorBody = (code: ErrorCode, message: string, details?: ValidationDetail[]) =>
  details === undefined ? { error: message, code } : { error: message, code, details }

declare module 'fastify' {
  interface FastifyRequest {
    /** The error the client was answered with, if any: its access-log line says it too. */
    answeredError: { code: ErrorCode, message: string } | null
  }
}

/** The bearer challenge (RFC 6750 §3) of a 401 or 403, with the error and scope it names. */
export function bearerChallenge (error?: 'invalid_token' | 'insufficient_scope', scope?: string): { 'www-authenticate': string } {
  const parameters = [error === undefined ? '' : `, error="${error}"`, scope === undefined ? '' : `, scope="${scope}"`]
  return { 'www-authenticate': `Bearer realm="api"${parameters.join('')}` }
}

/** The headers the catalogue gives a code: how long to wait, and the bearer challenge. */
function headersOf (code: ErrorCode, values: Record<string, string | number>): Record<string, string> {
  const refusal: Refusal = ERRORS[code]
  const scope = values.scope ?? refusal.scope
  return {
    ...refusal.headers,
    ...(refusal.retryAfter !== undefined && { 'retry-after': String(refusal.retryAfter) }),
    ...(refusal.challenge !== undefined && bearerChallenge(refusal.challenge === 'none' ? undefined : refusal.challenge, scope === undefined ? undefined : String(scope)))
  }
}

/**
 * A refusal a handler raises on purpose, by its code in the catalogue; its message is sent to the
 * client. It is an answer, never logged as a fault, so it has no stack trace
 * (docs/decisions/0017-client-errors-without-stack.md).
 */
export class AppError<Code extends ErrorCode = ErrorCode> extends Error {
  override name = 'AppError'
  readonly code: Code
  readonly statusCode: number
  /** Response headers that belong to this error, e.g. `WWW-Authenticate` on a 401. */
  readonly headers: Record<string, string>
  /** Every rule a request failed, when it failed its schema. */
  readonly details: ValidationDetail[] | undefined = undefined

  constructor (code: Code, ...filling: MessageValues<Code>) {
    const values: Record<string, string | number> = (filling as Array<Record<string, string | number>>)[0] ?? {}
    const { stackTraceLimit } = Error
    Error.stackTraceLimit = 0
    super(messageOf(code, values))
    Error.stackTraceLimit = stackTraceLimit
    this.code = code
    this.statusCode = ERRORS[code].status
    this.headers = headersOf(code, values)
  }
}

/** A request that fails its schema, or a rule of its query no schema can say: where, what, and every rule failed. */
export class ValidationError extends AppError<'validation_failed'> {
  override readonly details: ValidationDetail[]

  constructor (where: string, rule: string, details: ValidationDetail[]) {
    super('validation_failed', { where, rule })
    this.details = details
  }
}

/** What a token was refused for, as operators read it in the log. */
export type RefusalReason = 'malformed' | 'algorithm' | 'type' | 'kid' | 'signature' | 'claim' | 'subject' | 'expiry' | 'not-before' | 'lifetime'

/** The codes of a refused token's answers. */
type TokenRefusalCode = 'token_invalid' | 'token_not_access_token' | 'token_is_id_token' | 'token_expired' | 'token_not_yet_valid' |
  'token_claims_invalid' | 'token_lifetime_too_long'

/**
 * A refused token: the client is told what it can act on, and the log says why, in `detail`, since
 * a wrong issuer, audience or key is the operator's to fix and the token's holder cannot see it.
 */
export class TokenRefusal extends AppError<TokenRefusalCode> {
  constructor (readonly reason: RefusalReason, readonly detail: string, code: TokenRefusalCode = 'token_invalid') {
    super(code)
  }
}

/** Fastify's own client errors, by their codes in the catalogue. */
const FASTIFY_CODES: Record<string, ErrorCode> = {
  FST_ERR_CTP_EMPTY_JSON_BODY: 'empty_json',
  FST_ERR_CTP_INVALID_JSON_BODY: 'invalid_json',
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'unsupported_media_type',
  FST_ERR_CTP_BODY_TOO_LARGE: 'body_too_large',
  FST_ERR_BAD_URL: 'invalid_url',
  FST_ERR_MAX_PARAM_LENGTH: 'uri_too_long'
}

interface ErrorAnswer {
  code: ErrorCode
  statusCode: number
  message: string
  headers?: Record<string, string>
  details?: ValidationDetail[] | undefined
  /** For an error that is ours to look into: the message it is logged with, with its stack. */
  logAs?: string
}

const answer = (error: AppError, logAs?: string): ErrorAnswer =>
  ({ code: error.code, statusCode: error.statusCode, message: error.message, headers: error.headers, details: error.details, ...(logAs !== undefined && { logAs }) })

function answerFor (error: FastifyError): ErrorAnswer {
  if (error instanceof AppError) return answer(error)
  // The storage layer logs each outage once, as it starts and as it ends.
  if (error instanceof DatabaseUnavailableError) return answer(new AppError('database_unavailable'))
  // No file could be opened (a static file, a docs asset): the process or the machine has
  // none left for now, and the client may retry.
  if (error.code === 'EMFILE' || error.code === 'ENFILE') return answer(new AppError('no_file_descriptors'), 'no file could be opened')
  if (error instanceof UserIdsExhaustedError) return answer(new AppError('user_ids_exhausted'), 'no user ids left: no more users can be stored')
  const statusCode = error.statusCode ?? 500
  if (statusCode >= 400 && statusCode < 500) {
    const code = FASTIFY_CODES[error.code] ?? 'bad_request'
    const message = code === 'invalid_url' || code === 'bad_request' ? error.message : messageOf(code)
    return { code, statusCode, message }
  }
  return { code: 'internal_error', statusCode: 500, message: messageOf('internal_error'), logAs: 'unhandled error' }
}

/** How much a request's `Accept` takes a media type (RFC 9110 §12.5.1): the weight of the most specific range that matches it. */
function weightOf (accept: string, type: string): number {
  let weight = 0
  let specificity = -1
  for (const range of accept.split(',')) {
    const [name = '', ...parameters] = range.split(';').map((part) => part.trim().toLowerCase())
    const matches = name === type ? 2 : name === `${type.split('/')[0]}/*` ? 1 : name === '*/*' ? 0 : -1
    if (matches <= specificity) continue
    const q = parameters.find((parameter) => parameter.startsWith('q='))
    weight = q === undefined ? 1 : Number(q.slice(2)) || 0
    specificity = matches
  }
  return weight
}

/** Whether the client prefers problem details to plain JSON: a tie, or no `Accept`, keeps JSON. */
const prefersProblem = (accept: string | undefined): boolean =>
  accept !== undefined && accept.includes('problem+json') && weightOf(accept, 'application/problem+json') > weightOf(accept, 'application/json')

/** An error answer as RFC 9457 problem details, with the plain answer's members beside them. */
function problemBody ({ code, statusCode, message, details }: ErrorAnswer, request: FastifyRequest) {
  return {
    type: problemType(code),
    title: titleOf(code),
    status: statusCode,
    detail: message,
    instance: request.url.split('?', 1)[0],
    request_id: request.id,
    ...errorBody(code, message, details)
  }
}

function replyWithError (error: FastifyError, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  const answered = answerFor(error)
  if (answered.logAs !== undefined) request.log.error({ err: error }, answered.logAs)
  if (answered.headers !== undefined) reply.headers(answered.headers)
  return send(answered, request, reply)
}

function send (answered: ErrorAnswer, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  request.answeredError = { code: answered.code, message: answered.message }
  reply.code(answered.statusCode)
  if (prefersProblem(request.headers.accept)) return reply.type(PROBLEM_TYPE).send(JSON.stringify(problemBody(answered, request)))
  return reply.type(JSON_TYPE).send(errorBody(answered.code, answered.message, answered.details))
}

/**
 * For Fastify's `frameworkErrors`: failures of the router arrive before any hook has run, so the
 * request id header is set here.
 */
export function replyWithFrameworkError (error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  reply.header('x-request-id', request.id)
  replyWithError(error, request, reply)
}

const routeNotFound = (reply: FastifyReply): FastifyReply => send(answer(new AppError('route_not_found')), reply.request, reply)

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
