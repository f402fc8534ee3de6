/** `PATCH /users/{id}`: changes a user's name or email, with JSON Merge Patch and `If-Match`. */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { writeSchemaError, writeTarget, written } from './preconditions.js'
import * as repository from './repository.js'
import { updateUserSchema } from './update.schemas.js'
import { userTag } from './user-id.js'

const updateUser: FastifyPluginAsyncTypebox<{ requireIfMatch: boolean, ownership: boolean }> = async (app, { requireIfMatch, ownership }) => {
  app.patch('/users/:id', app.protect('users:write', { schema: updateUserSchema(requireIfMatch, ownership), schemaErrorFormatter: writeSchemaError }), async (request, reply) => {
    const { id, expected, writer } = writeTarget(app, request, ownership)
    const { name, email } = request.body
    const user = written(await repository.updateUser(app.db, id, { name, email }, expected, writer), expected)
    reply.header('etag', userTag(user.id, user.version))
    return { id: String(user.id), name: user.name }
  })
}

export default updateUser
