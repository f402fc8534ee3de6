/** `GET /users`: stored users in id order, a page at a time (seed §4.3). */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'

import { conditionalGet } from '../http/conditional-get.js'
import { ListUsersSchema } from './list.schemas.js'

/**
 * RFC 8288 links: `first`, and `next` after this page's last id when the page is full, so that
 * every page costs the same.
 */
function pageLinks (limit: number, users: Array<{ id: number }>): string {
  const links = [`</users?limit=${limit}>; rel="first"`]
  const last = users.at(-1)
  if (users.length === limit && last !== undefined) links.unshift(`</users?limit=${limit}&after=${last.id}>; rel="next"`)
  return links.join(', ')
}

const listUsers: FastifyPluginAsyncTypebox = async (app) => {
  app.get('/users', app.protect('users:read', { schema: ListUsersSchema, onSend: conditionalGet }), async (request, reply) => {
    const { limit, offset, after } = request.query

    const { users, total } = await app.users.list({ limit, offset, after })
    reply.header('x-total-count', total)
    reply.header('link', pageLinks(limit, users))
    return users
  })
}

export default listUsers
