/** The contract of `PATCH /users/{id}`. */
import { refTo } from '../http/schemas.js'
import {
  badPath, databaseUnavailable, ifMatchHeaders, notFound, notOwner, pathTooLong, preconditionFailed, preconditionRequired, tooLarge, unsupported, User, USER_ETAG, UserPatch, UserPath
} from './user.schemas.js'

/** With `REQUIRE_IF_MATCH=on`, `If-Match` is required and its absence declared as 428. */
export const updateUserSchema = (requireIfMatch: boolean, ownership = false) => ({
  summary: 'Change a stored user',
  description: 'Sets the fields the JSON Merge Patch holds and answers the user as `GET /users/{id}` shows it, with its new ETag. ' +
    'Send `If-Match` with the ETag last seen, so that a change made meanwhile by another client is not overwritten: of two clients ' +
    'that send the same ETag, one succeeds and the other gets 412. Checked in this order: token, body, `If-Match` required, user, owner (`USER_OWNERSHIP=on`), `If-Match`.',
  operationId: 'updateUser',
  tags: ['users'],
  consumes: ['application/merge-patch+json', 'application/json'],
  params: UserPath,
  headers: ifMatchHeaders(requireIfMatch),
  body: refTo(UserPatch),
  response: {
    200: refTo(User, { description: 'Changed (or, for `{}`, as it was).', headers: { ETag: USER_ETAG } }),
    400: badPath,
    ...(ownership && { 403: notOwner }),
    404: notFound,
    414: pathTooLong,
    412: preconditionFailed,
    413: tooLarge,
    415: unsupported,
    ...(requireIfMatch && { 428: preconditionRequired }),
    503: databaseUnavailable
  }
})
