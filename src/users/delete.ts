/** `DELETE /users/{id}`: erases a user (GDPR article 17), with `If-Match`. */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { deleteUserSchema } from './delete.schemas.js'
import { writeSchemaError, writeTarget, written } from './preconditions.js'

const deleteUser: FastifyPluginAsyncTypebox<{ requireIfMatch: boolean }> = async (app, { requireIfMatch }) => {
  app.delete('/users/:id', app.protect('users:write', { schema: deleteUserSchema(requireIfMatch), schemaErrorFormatter: writeSchemaError }), async (request, reply) => {
    const { id, expected } = writeTarget(request)
    written(await app.users.delete(id, expected))
    return await reply.code(204).send(null)
  })
}

export default deleteUser
