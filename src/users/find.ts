/** `GET /users/{id}`: one stored user. */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { conditionalGet } from '../http/conditional-get.js'
import { GetUserSchema } from './find.schemas.js'
import { userNotFound } from './preconditions.js'
import * as repository from './repository.js'
import { toUserId, userTag } from './user-id.js'

const findUser: FastifyPluginAsyncTypebox = async (app) => {
  app.get('/users/:id', app.protect('users:read', { schema: GetUserSchema, onSend: conditionalGet }), async (request, reply) => {
    const { id } = request.params
    const userId = toUserId(id)
    const user = userId === undefined ? undefined : await repository.findUser(app.db, userId)
    if (user === undefined) throw userNotFound()
    reply.header('etag', userTag(user.id, user.version))
    return { id, name: user.name }
  })
}

export default findUser
