/** What `PATCH` and `DELETE` share: the user a path names, `If-Match`, and the answers for each outcome. */
import type { FastifyRequest } from 'fastify'
import type { ExpectedVersions, WriteOutcome } from './repository.js'
import { AppError } from '../http/errors.js'
import { expectedVersions, toUserId } from './user-id.js'

export const userNotFound = () => new AppError('User not found', 404)

/**
 * The user a write names and the versions it applies to; 428 first when `If-Match` is required and
 * missing, since no user can then be written.
 */
export function writeTarget (request: FastifyRequest<{ Params: { id: string } }>, requireIfMatch: boolean): { id: number, expected: ExpectedVersions } {
  const ifMatch = request.headers['if-match']
  if (ifMatch === undefined && requireIfMatch) {
    throw new AppError('If-Match is required: send the ETag of the user as last read (or *)', 428)
  }
  const id = toUserId(request.params.id)
  if (id === undefined) throw userNotFound()
  return { id, expected: expectedVersions(ifMatch, id) }
}

/** The write's result, or the error its outcome is answered with. */
export function written<Done> (outcome: WriteOutcome<Done>): Done {
  if (outcome === 'missing') throw userNotFound()
  if (outcome === 'stale') throw new AppError('The user has changed since the ETag in If-Match: read it again, then retry', 412)
  return outcome
}
