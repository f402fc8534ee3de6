/** The contract of `GET /users`. */
import { Type } from 'typebox'
import { type HeaderSchema, refTo } from '../http/schemas.js'
import { After, databaseUnavailable, ETAG, IfNoneMatch, invalid, Limit, MAX_OFFSET, notModified, Offset, UserSummary } from './user.schemas.js'

const LINK: HeaderSchema = {
  type: 'string',
  description: 'RFC 8288 links: `rel="first"`, and `rel="next"` (the users after this page, by `after`) when the page is full.'
}
const TOTAL_COUNT: HeaderSchema = { type: 'integer', description: 'How many users are stored in all.' }

export const ListUsersSchema = {
  summary: 'List stored users',
  description: 'Users in ascending `id` order, one page at a time: by `after` (the last id of the page before; every page costs the ' +
    `same) or by \`offset\` (at most ${MAX_OFFSET}; deeper pages are reached by \`after\`). \`Link\` gives ` +
    'the next page and the first; `X-Total-Count` holds how many users there are in all.',
  operationId: 'listUsers',
  tags: ['users'],
  querystring: Type.Object({ limit: Limit(100), offset: Offset, after: Type.Optional(After) }),
  headers: IfNoneMatch,
  response: {
    200: Type.Array(refTo(UserSummary), {
      description: 'One page of users.',
      examples: [[{ id: 1, name: 'Ada' }, { id: 2, name: 'Grace' }]],
      headers: { 'X-Total-Count': TOTAL_COUNT, Link: LINK, ETag: ETAG }
    }),
    304: notModified,
    400: invalid,
    503: databaseUnavailable
  }
}
