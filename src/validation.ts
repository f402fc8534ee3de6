/**
 * Request validation. Fastify's default Ajv coerces every part of a request and silently
 * drops unknown properties; the contract wants neither for bodies. So path and query values,
 * which always arrive as text, go through a coercing instance (`age=3` becomes 3), while JSON
 * bodies, already typed, go through a strict one (`"name": 123` is an error, not "123").
 * Neither removes additional properties: a schema that forbids them rejects the request.
 */
import type { ErrorObject } from 'ajv'
import type { FastifySchemaCompiler, FastifyServerOptions } from 'fastify'
import { createAjv, createCoercingAjv } from './ajv.js'
import { AppError } from './errors.js'

/** `namedSchemas` are those the routes refer to by `$id`. */
export function createValidatorCompiler (namedSchemas: object[]): FastifySchemaCompiler<unknown> {
  const coercing = createCoercingAjv()
  const strict = createAjv({ coerceTypes: false })
  for (const ajv of [coercing, strict]) ajv.addSchema(namedSchemas)
  return ({ schema, httpPart }) => (httpPart === 'body' ? strict : coercing).compile(schema as object)
}

/**
 * The pattern of a text that holds no NUL character, which PostgreSQL cannot store in a text
 * column; applied on both databases, so that they accept the same users.
 */
export const NO_NUL = '^[^\\u0000]*$'

/**
 * Turns Ajv's first error into one sentence naming where and what, e.g.
 * `body/email must match format "email"` or `body must NOT have additional property "role"`.
 */
export const formatSchemaError: NonNullable<FastifyServerOptions['schemaErrorFormatter']> = (errors, dataVar) => {
  const [first] = errors as ErrorObject[]
  const where = `${dataVar}${first?.instancePath ?? ''}`
  const what = first?.keyword === 'additionalProperties'
    ? `must NOT have additional property ${JSON.stringify(first.params.additionalProperty)}`
    : first?.keyword === 'pattern' && first.params.pattern === NO_NUL
      ? 'must not contain the NUL character (U+0000)'
      : first?.message ?? 'is invalid'
  return new AppError(`${where} ${what}`, 400)
}
