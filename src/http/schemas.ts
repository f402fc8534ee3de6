/**
 * What every route's schemas share: references to named schemas (`refTo`), response headers as the
 * document describes them, and the error answer every failure gives.
 */
import { Type, type Static, type TSchema } from 'typebox'

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

/** The answers, each declaring these headers besides its own. */
export function withHeaders (responses: Responses, headers: Record<string, HeaderSchema>): Responses {
  if (Object.keys(headers).length === 0) return responses
  return Object.fromEntries(Object.entries(responses).map(([status, answer]) =>
    [status, { ...answer, headers: { ...headers, ...(answer as { headers?: object }).headers } }]))
}
