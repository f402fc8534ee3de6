/**
 * Conditional reads (RFC 9110, section 13): a 200 carries a strong `ETag`, and a GET whose
 * `If-None-Match` names it is answered `304 Not Modified` with no body. Used as the `onSend`
 * hook of the routes that read users.
 *
 * The tag is a hash of what the answer says: its body and its `X-Total-Count`, since a new
 * user changes the count of every page, not only the body of the last. (@fastify/etag hashes
 * the body alone, and compares `If-None-Match` as one tag, where a client may send several,
 * or `*`.)
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
  const tag = tagOf(payload, reply.getHeader('x-total-count'))
  reply.header('etag', tag)
  const ifNoneMatch = request.headers['if-none-match']
  if (ifNoneMatch !== undefined && namesTag(ifNoneMatch, tag)) {
    // No body, so no Content-Type, and no Content-Length that Fastify would count as 0 (a 304
    // may only give the length the 200 would have had). A HEAD keeps the payload: Fastify's
    // HEAD route then gives its length, as its 200 does, and drops it (and a null payload
    // would make it throw: fastify/fastify#6978).
    reply.code(304).removeHeader('content-type')
    done(null, request.method === 'HEAD' ? payload : null)
    return
  }
  done(null, payload)
}
