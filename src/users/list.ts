/** `GET /users`: stored users a page at a time, in id order, or found and sorted. */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'

import { conditionalGet } from '../http/conditional-get.js'
import { type ListParameters, ListUsersSchema, REPEATED } from './list.schemas.js'
import { type ListedField, nextAfter, readsEmail, sortKey, userQuery, type UserQuery } from './list-query.js'
import * as repository from './repository.js'

/**
 * RFC 8288 links: `first`, and `next` after this page's last user when the page is full, so that
 * every page costs the same; each repeats the request's parameters, with `after` last.
 */
function pageLinks (parameters: ListParameters, query: UserQuery, users: repository.ListedUser[]): string {
  const given = REPEATED.flatMap((name) => {
    const value = parameters[name]
    // The default order goes unsaid, so that a plain page's links stay as docs/api.md shows them.
    return value === undefined || (name === 'sort' && value === 'id') ? [] : [`${name}=${encodeURIComponent(value)}`]
  })
  const first = `/users?${given.join('&')}`
  const links = [`<${first}>; rel="first"`]
  const last = users.at(-1)
  if (users.length === query.limit && last !== undefined) links.unshift(`<${first}&after=${nextAfter(query, last)}>; rel="next"`)
  return links.join(', ')
}

/** Each user with only the members asked for: a page also reads its users' ids and sort keys, for `Link`. */
function withFields (users: repository.ListedUser[], { fields, sort }: UserQuery): repository.ListedUser[] {
  const unasked = [...new Set(['id', sortKey(sort)])].filter((field) => !fields.includes(field as ListedField)) as ListedField[]
  if (unasked.length === 0) return users
  return users.map((user) => {
    const shown = { ...user }
    for (const field of unasked) delete shown[field]
    return shown
  })
}

const listUsers: FastifyPluginAsyncTypebox = async (app) => {
  app.get('/users', app.protect('users:read', { schema: ListUsersSchema, onSend: conditionalGet }, { readsPersonalData: (request) => readsEmail(request.query as object) }), async (request, reply) => {
    const query = userQuery(request.query)
    const { users, total } = await repository.listUsers(app.db, query)
    if (total !== undefined) reply.header('x-total-count', total)
    reply.header('link', pageLinks(request.query, query, users))
    return withFields(users, query)
  })
}

export default listUsers
