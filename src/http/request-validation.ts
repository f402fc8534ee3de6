/**
 * Request validation: path and query values, which arrive as text, go through a coercing Ajv; JSON
 * bodies through a strict one, so `"name": 123` is an error. Neither removes additional properties.
 */
import type { ErrorObject } from 'ajv'
import type { FastifyInstance, FastifySchemaCompiler, FastifyServerOptions } from 'fastify'
import { createAjv, createCoercingAjv } from '../validation/ajv.js'
import { ValidationError } from './errors.js'
import { MAX_DETAILS, type ValidationDetail } from './schemas.js'

/** `namedSchemas` are those the routes refer to by `$id`. */
function createValidatorCompiler (namedSchemas: object[]): FastifySchemaCompiler<unknown> {
  // Every rule a request fails is reported (`details`), not only the first.
  const coercing = createCoercingAjv({ allErrors: true })
  const strict = createAjv({ coerceTypes: false, allErrors: true })
  for (const ajv of [coercing, strict]) ajv.addSchema(namedSchemas)
  return ({ schema, httpPart }) => (httpPart === 'body' ? strict : coercing).compile(schema as object)
}

/**
 * Text both databases store exactly as sent: no NUL, which PostgreSQL cannot store, and no unpaired
 * surrogate, which UTF-8 cannot hold. With Ajv's `u` flag a surrogate pair is one character.
 */
export const STORABLE_TEXT = '^[^\\u0000\\ud800-\\udfff]*$'

/** One of Ajv's errors in the contract's words: what is wrong. */
function messageFor (error: ErrorObject): string {
  if (error.keyword === 'additionalProperties') return `must NOT have additional property ${JSON.stringify(error.params.additionalProperty)}`
  if (error.keyword === 'pattern' && error.params.pattern === STORABLE_TEXT) {
    return 'must not contain the NUL character (U+0000) or an unpaired surrogate (U+D800–U+DFFF)'
  }
  if (error.keyword === 'enum') return `must be one of ${(error.params.allowedValues as unknown[]).join(', ')}`
  return error.message ?? 'is invalid'
}

type SchemaErrorFormatter = NonNullable<FastifyServerOptions['schemaErrorFormatter']>

/** Fastify's name for each part of a request, and the name `details` gives it. */
const PART: Record<Parameters<SchemaErrorFormatter>[1], ValidationDetail['in']> = { params: 'params', body: 'body', querystring: 'query', headers: 'header' }

/**
 * Turns Ajv's errors into one sentence for the first (`body/email must match format "email"`) and
 * the list of all as `details`.
 */
export const formatSchemaError: SchemaErrorFormatter = (errors, dataVar) => {
  const part = PART[dataVar]
  const details: ValidationDetail[] = (errors as ErrorObject[]).slice(0, MAX_DETAILS)
    .map((error) => ({ in: part, path: error.instancePath, message: messageFor(error), keyword: error.keyword, params: error.params }))
  const [first = { path: '', message: 'is invalid' }] = details
  return new ValidationError(`${dataVar}${first.path}`, first.message, details)
}

/** Registers the schemas routes refer to by `$id`, and validates and words failures as above. */
export function registerSchemas (app: FastifyInstance, namedSchemas: object[]): void {
  for (const schema of namedSchemas) app.addSchema(schema)
  app.setValidatorCompiler(createValidatorCompiler(namedSchemas))
  app.setSchemaErrorFormatter(formatSchemaError)
}
