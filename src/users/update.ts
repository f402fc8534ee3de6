/** `PATCH /users/{id}`: changes a user's name or email, with JSON Merge Patch and `If-Match`. */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { writeSchemaError, writeTarget, written } from './preconditions.js'
import { updateUserSchema } from './update.schemas.js'
import { userTag } from './user-id.js'

const updateUser: FastifyPluginAsyncTypebox<{ requireIfMatch: boolean }> = async (app, { requireIfMatch }) => {
  app.patch('/users/:id', app.protect('users:write', { schema: updateUserSchema(requireIfMatch), schemaErrorFormatter: writeSchemaError }), async (request, reply) => {
    const { id, expected } = writeTarget(request)
    const { name, email } = request.body
    const user = written(await app.users.update(id, { name, email }, expected))
    reply.header('etag', userTag(user.id, user.version))
    return { id: String(user.id), name: user.name }
  })
}

export default updateUser
