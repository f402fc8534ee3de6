/**
 * Conditional reads (RFC 9110 §13): a strong `ETag` on each 200, the route's own or else hashed from
 * the body and `X-Total-Count`, and 304 for a matching `If-None-Match`
 * (docs/decisions/0006-conditional-get.md).
 */
import { hash } from 'node:crypto'
import type { onSendHookHandler } from 'fastify'

function tagOf (payload: string, totalCount: unknown): string {
  const tagged = totalCount === undefined ? payload : `${payload}\n${String(totalCount)}`
  return `"${hash('sha256', tagged, 'base64url').slice(0, 27)}"`
}

/** Whether `If-None-Match` names the tag: `*`, or one of a list, compared weakly as the RFC says. */
function namesTag (ifNoneMatch: string, tag: string): boolean {
  if (ifNoneMatch.trim() === '*') return true
  return ifNoneMatch.split(',').some((candidate) => candidate.trim().replace(/^W\//, '') === tag)
}

export const conditionalGet: onSendHookHandler<unknown> = (request, reply, payload, done) => {
  if (reply.statusCode !== 200 || typeof payload !== 'string') {
    done(null, payload)
    return
  }
  const tag = String(reply.getHeader('etag') ?? tagOf(payload, reply.getHeader('x-total-count')))
  // May be stored, but is revalidated with its tag before each use: a user changes.
  reply.header('etag', tag).header('cache-control', 'no-cache')
  const ifNoneMatch = request.headers['if-none-match']
  if (ifNoneMatch !== undefined && namesTag(ifNoneMatch, tag)) {
    // No body and no Content-Type; a HEAD keeps the payload, so that Fastify's HEAD route gives the
    // 200's length and does not throw on a null one (fastify/fastify#6978).
    reply.code(304).removeHeader('content-type')
    done(null, request.method === 'HEAD' ? payload : null)
    return
  }
  done(null, payload)
}
