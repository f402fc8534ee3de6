/**
 * What plugins that answer for a route (401, 429, 503, `X-Request-Id`) declare on it from an
 * `onRoute` hook, so that the document cannot disagree with them.
 */
import type { RouteOptions } from 'fastify'
import type { HeaderSchema, Responses } from '../../routes/common.schemas.js'

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
