/**
 * What every route's schemas share: references to named schemas (`refTo`), response headers as the
 * document describes them, and the error answer every failure gives.
 */
import { Type, type Static, type TSchema } from 'typebox'
import { ERROR_CODES, type ErrorCode } from './error-catalogue.js'

/** A reference to a named schema (one with an `$id`), typed as the schema itself. */
export function refTo<T extends TSchema> (schema: T, annotations: Record<string, unknown> = {}) {
  const id = (schema as { $id?: string }).$id
  if (id === undefined) throw new Error('refTo needs a schema with an $id')
  return Type.Unsafe<Static<T>>({ $ref: id, ...annotations })
}

/**
 * A response header as the document describes it: sent with every answer it is declared on, unless
 * `required` is false.
 */
export interface HeaderSchema { type: 'string' | 'integer', description: string, required?: false }

export type Responses = Record<string, object>

/** One failed rule of a request's schema. */
const ValidationDetailSchema = Type.Object({
  in: Type.Union([Type.Literal('params'), Type.Literal('body'), Type.Literal('query'), Type.Literal('header')], { description: 'The part of the request.' }),
  path: Type.String({ description: 'A JSON Pointer into that part, e.g. `/email`; empty for the part itself.' }),
  message: Type.String({ description: 'What is wrong there.' }),
  keyword: Type.String({ description: 'The rule that failed, as JSON Schema names it (`format`, `required`, `maxLength`…), for a program to act on.' }),
  params: Type.Record(Type.String(), Type.Unknown(), { description: 'The rule\'s parameters, as Ajv reports them, e.g. `{"format": "email"}` or `{"missingProperty": "name"}`.' })
}, { additionalProperties: false })
export type ValidationDetail = Static<typeof ValidationDetailSchema>

/** At most this many `details` in one answer: what a client can act on, not a flood. */
export const MAX_DETAILS = 20

/** A code of the catalogue, as the document states the codes an answer can carry. */
const codeSchema = (codes: readonly ErrorCode[], description: string) => Type.Unsafe<ErrorCode>({ type: 'string', enum: codes, description })

/** Every error answer: `{"error": "<message>", "code": "<code>"}`, and on a 400 for a schema, its `details`. */
export const ErrorSchema = Type.Object({
  error: Type.String({ description: 'What went wrong, in one sentence.' }),
  code: codeSchema(ERROR_CODES, 'What went wrong, as a stable code for a program to act on (docs/errors.md lists them).'),
  details: Type.Optional(Type.Array(ValidationDetailSchema, {
    maxItems: MAX_DETAILS,
    description: 'On a 400 for a request that fails its schema: every rule it fails (up to 20), in the first part of the request that ' +
      'fails (path, then body, then query, then headers, the order they are checked in). `error` is the first of them.'
  }))
}, {
  $id: 'Error',
  additionalProperties: false,
  description: 'Every failure answers this shape.',
  examples: [{ error: 'User not found', code: 'user_not_found' }, {
    error: 'body/email must match format "email"',
    code: 'validation_failed',
    details: [
      { in: 'body', path: '/email', message: 'must match format "email"', keyword: 'format', params: { format: 'email' } },
      { in: 'body', path: '/age', message: 'must be >= 0', keyword: 'minimum', params: { comparison: '>=', limit: 0 } }
    ]
  }]
})

export const RETRY_AFTER: HeaderSchema = { type: 'integer', description: 'Seconds to wait before trying again.' }

/** The same answer as RFC 9457 problem details, for a client whose `Accept` prefers them. */
export const ProblemSchema = Type.Object({
  type: Type.String({ description: 'The problem type: `/problems/<code>`, a URI reference to where the service describes the code.' }),
  title: Type.String({ description: 'What went wrong, the same for every answer with this code.' }),
  status: Type.Integer({ description: 'The answer\'s status.' }),
  detail: Type.String({ description: 'What went wrong this time: the same text as `error`.' }),
  instance: Type.String({ description: 'The path of the request, without its query.' }),
  request_id: Type.String({ description: 'The request\'s id, as `X-Request-Id` says it, under which the server log has it.' }),
  error: ErrorSchema.properties.error,
  code: ErrorSchema.properties.code,
  details: ErrorSchema.properties.details
}, {
  $id: 'Problem',
  additionalProperties: false,
  description: 'Every failure, as problem details (RFC 9457), with the members of `Error` beside them.',
  examples: [{
    type: '/problems/user_not_found',
    title: 'User not found',
    status: 404,
    detail: 'User not found',
    instance: '/users/42',
    request_id: 'b7d3c4a0-0f43-4f0c-9b8e-1c1d2e3f4a5b',
    error: 'User not found',
    code: 'user_not_found'
  }]
})

/** The codes each error answer can carry, as errorResponse declared them, so that two declarations of a status join. */
const declaredCodes = new WeakMap<object, readonly ErrorCode[]>()

/** A shape whose `code` is one of these. */
const carrying = (schema: TSchema, codes: readonly ErrorCode[]) => ({ allOf: [refTo(schema), { type: 'object', properties: { code: { enum: codes } } }] })

/** An error answer as one route and status declare it: the codes it can carry, as JSON or as problem details. */
export function errorResponse (codes: readonly ErrorCode[], description: string, headers: Record<string, HeaderSchema> = {}) {
  const response = {
    description,
    ...(Object.keys(headers).length > 0 && { headers }),
    content: {
      'application/json': { schema: carrying(ErrorSchema, codes) },
      'application/problem+json': { schema: carrying(ProblemSchema, codes) }
    }
  }
  declaredCodes.set(response, codes)
  return response
}

/**
 * Answers declared in several places, the last winning a status; where two error answers declare
 * one status, its answer carries the codes of both, with the last one's description.
 */
export function joinResponses (...declarations: Array<Responses | undefined>): Responses {
  const joined: Responses = {}
  for (const [status, answer] of declarations.flatMap((responses) => Object.entries(responses ?? {}))) {
    const earlier = joined[status]
    const earlierCodes = earlier === undefined ? undefined : declaredCodes.get(earlier)
    const codes = declaredCodes.get(answer)
    joined[status] = earlierCodes !== undefined && codes !== undefined
      ? errorResponse([...new Set([...earlierCodes, ...codes])], (answer as { description: string }).description,
        { ...(earlier as { headers?: object }).headers, ...(answer as { headers?: object }).headers })
      : answer
  }
  return joined
}

/** The answers, each declaring these headers besides its own. */
export function withHeaders (responses: Responses, headers: Record<string, HeaderSchema>): Responses {
  if (Object.keys(headers).length === 0) return responses
  return Object.fromEntries(Object.entries(responses).map(([status, answer]) =>
    [status, { ...answer, headers: { ...headers, ...(answer as { headers?: object }).headers } }]))
}
