/** What `PATCH` and `DELETE` share: the user a path names, `If-Match`, and the answers for each outcome. */
import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { UserOwner } from '../storage/schema.js'
import type { AllowedWriter, ExpectedVersions, WriteOutcome } from './repository.js'
import { AppError } from '../http/errors.js'
import { formatSchemaError } from '../http/request-validation.js'
import { expectedVersions, toUserId } from './user-id.js'

export const userNotFound = () => new AppError('user_not_found')

/**
 * A write's schema errors; under `REQUIRE_IF_MATCH=on` the schema requires `If-Match`, and its
 * absence is 428 (RFC 6585 §3), found after the body and before the user, since none is written.
 */
export const writeSchemaError: typeof formatSchemaError = (errors, part) => {
  const missing = part === 'headers' && errors.some((error) => error.keyword === 'required' && error.params.missingProperty === 'if-match')
  return missing ? new AppError('precondition_required') : formatSchemaError(errors, part)
}

/** The token that stores a user, as its owner: its issuer (empty when it names none) and subject. */
export function ownerOf (request: FastifyRequest): UserOwner | undefined {
  const { iss, sub } = request.user ?? {}
  return typeof sub === 'string' ? { issuer: typeof iss === 'string' ? iss : '', subject: sub } : undefined
}

/**
 * Who may write a user: anyone, or under `USER_OWNERSHIP=on` only its owner, unless the token
 * grants `users:admin`. A user without an owner is then written by an admin alone.
 */
export function allowedWriter (app: FastifyInstance, request: FastifyRequest, ownership: boolean): AllowedWriter {
  if (!ownership || app.tokenGrants(request, 'users:admin')) return 'anyone'
  return ownerOf(request) ?? { issuer: '', subject: '' }
}

/** The user a write names, the versions it applies to, and whom it is allowed. */
export function writeTarget (app: FastifyInstance, request: FastifyRequest<{ Params: { id: string } }>, ownership: boolean): { id: number, expected: ExpectedVersions, writer: AllowedWriter } {
  const id = toUserId(request.params.id)
  if (id === undefined) throw userNotFound()
  return { id, expected: expectedVersions(request.headers['if-match'], id), writer: allowedWriter(app, request, ownership) }
}

/** The write's result, or the error its outcome is answered with: `expected` empty, If-Match named no version of this user at all. */
export function written<Done> (outcome: WriteOutcome<Done>, expected: ExpectedVersions): Done {
  if (outcome === 'missing') throw userNotFound()
  if (outcome === 'not-owner') {
    throw new AppError('not_owner')
  }
  if (outcome === 'stale') throw new AppError(expected === 'any' || expected.length > 0 ? 'precondition_failed' : 'etag_not_of_user')
  return outcome
}
