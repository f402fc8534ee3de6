/** The contract of `GET /users/{id}`. */
import { errorResponse, refTo } from '../http/schemas.js'
import { databaseUnavailable, IfNoneMatch, notFound, notModified, pathTooLong, User, USER_ETAG, UserPath } from './user.schemas.js'

export const GetUserSchema = {
  summary: 'Look up a stored user',
  description: 'The user with this id: `id` as given in the path, and `name`. Only the canonical decimal form names a user ' +
    '(`1`, not `01` or `1.0`); any other is a 404.',
  operationId: 'getUser',
  tags: ['users'],
  params: UserPath,
  headers: IfNoneMatch,
  response: {
    200: refTo(User, { description: 'The user.', headers: { ETag: USER_ETAG } }),
    304: notModified,
    400: errorResponse(['invalid_url'], 'The path cannot be decoded, e.g. `/users/%zz`.'),
    404: notFound,
    414: pathTooLong,
    503: databaseUnavailable
  }
}
