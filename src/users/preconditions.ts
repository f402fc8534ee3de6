/** What `PATCH` and `DELETE` share: the user a path names, `If-Match`, and the answers for each outcome. */
import type { FastifyRequest } from 'fastify'
import type { ExpectedVersions, WriteOutcome } from './repository.js'
import { AppError } from '../http/errors.js'
import { formatSchemaError } from '../http/request-validation.js'
import { expectedVersions, toUserId } from './user-id.js'

export const userNotFound = () => new AppError('User not found', 404)

/**
 * A write's schema errors; under `REQUIRE_IF_MATCH=on` the schema requires `If-Match`, and its
 * absence is 428 (RFC 6585 §3), found after the body and before the user, since none is written.
 */
export const writeSchemaError: typeof formatSchemaError = (errors, part) => {
  const missing = part === 'headers' && errors.some((error) => error.keyword === 'required' && error.params.missingProperty === 'if-match')
  return missing ? new AppError('If-Match is required: send the ETag of the user as last read (or *)', 428) : formatSchemaError(errors, part)
}

/** The user a write names and the versions it applies to. */
export function writeTarget (request: FastifyRequest<{ Params: { id: string } }>): { id: number, expected: ExpectedVersions } {
  const id = toUserId(request.params.id)
  if (id === undefined) throw userNotFound()
  return { id, expected: expectedVersions(request.headers['if-match'], id) }
}

/** The write's result, or the error its outcome is answered with. */
export function written<Done> (outcome: WriteOutcome<Done>): Done {
  if (outcome === 'missing') throw userNotFound()
  if (outcome === 'stale') throw new AppError('The user has changed since the ETag in If-Match: read it again, then retry', 412)
  return outcome
}
