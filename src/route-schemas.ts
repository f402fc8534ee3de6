/**
 * What a route declares beyond its own schema file. Named schemas are registered once with
 * `app.addSchema` (app.ts) and referred to with `refTo`, so that validation, serialization and
 * the document's `components.schemas` share one definition and generated clients get one type
 * for it. Plugins that answer on a route's behalf (auth's 401, the rate limiter's 429, the
 * load shedder's 503) or add a header to every answer (`X-Request-Id`) declare that on each
 * route they serve, from an `onRoute` hook, so that the document cannot disagree with them.
 */
import type { RouteOptions } from 'fastify'
import { Type, type Static, type TSchema } from 'typebox'

/** A reference to a named schema (one with an `$id`), typed as the schema itself. */
export function refTo<T extends TSchema> (schema: T, annotations: Record<string, unknown> = {}) {
  const id = (schema as { $id?: string }).$id
  if (id === undefined) throw new Error('refTo needs a schema with an $id')
  return Type.Unsafe<Static<T>>({ $ref: id, ...annotations })
}

/**
 * A response header as the document describes it: sent with every answer it is declared on,
 * unless `required` is false (some of those answers lack it).
 */
export interface HeaderSchema { type: 'string' | 'integer', description: string, required?: false }

export type Responses = Record<string, object>

/** Routes whose answers are documented: those with declared responses that are not hidden. */
function responsesOf (route: RouteOptions): Responses | undefined {
  const schema = route.schema as { hide?: boolean, response?: Responses } | undefined
  return schema?.hide === true ? undefined : schema?.response
}

/** Declares answers a plugin gives on the route's behalf, where the route declares none for that status. */
export function addResponses (route: RouteOptions, responses: Responses): void {
  const declared = responsesOf(route)
  if (declared === undefined) return
  route.schema = { ...route.schema, response: { ...responses, ...declared } }
}

/** The answers, each declaring these headers besides its own. */
export function withHeaders (responses: Responses, headers: Record<string, HeaderSchema>): Responses {
  return Object.fromEntries(Object.entries(responses).map(([status, answer]) =>
    [status, { ...answer, headers: { ...headers, ...(answer as { headers?: object }).headers } }]))
}

/** Declares headers sent with every answer of the route. */
export function addHeaders (route: RouteOptions, headers: Record<string, HeaderSchema>): void {
  const declared = responsesOf(route)
  if (declared === undefined) return
  route.schema = { ...route.schema, response: withHeaders(declared, headers) }
}
