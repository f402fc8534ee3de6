/** The contract of `DELETE /users/{id}`. */
import { Type } from 'typebox'
import { errorResponse } from '../http/schemas.js'
import { databaseUnavailable, ifMatchHeaders, notFound, notOwner, pathTooLong, preconditionFailed, preconditionRequired, UserPath } from './user.schemas.js'

/** With `REQUIRE_IF_MATCH=on`, `If-Match` is required and its absence declared as 428. */
export const deleteUserSchema = (requireIfMatch: boolean, ownership = false) => ({
  summary: 'Erase a stored user',
  description: 'Erases the user: it is then 404 here, gone from every page and from `X-Total-Count`, and its name and email are ' +
    'overwritten in the database (docs/api.md, erasure). Its id is never given again. Deleting again is 404. `If-Match` works as on `PATCH`.',
  operationId: 'deleteUser',
  tags: ['users'],
  params: UserPath,
  headers: ifMatchHeaders(requireIfMatch),
  response: {
    204: Type.Null({ description: 'Erased. No body.' }),
    400: errorResponse(['invalid_url'], 'The path cannot be decoded, e.g. `/users/%zz`.'),
    ...(ownership && { 403: notOwner }),
    404: notFound,
    414: pathTooLong,
    412: preconditionFailed,
    ...(requireIfMatch && { 428: preconditionRequired }),
    503: databaseUnavailable
  }
})
