/** `DELETE /users/{id}`: erases a user (GDPR article 17), with `If-Match`. */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { deleteUserSchema } from './delete.schemas.js'
import { writeSchemaError, writeTarget, written } from './preconditions.js'
import * as repository from './repository.js'

const deleteUser: FastifyPluginAsyncTypebox<{ requireIfMatch: boolean, ownership: boolean }> = async (app, { requireIfMatch, ownership }) => {
  app.delete('/users/:id', app.protect('users:write', { schema: deleteUserSchema(requireIfMatch, ownership), schemaErrorFormatter: writeSchemaError }), async (request, reply) => {
    const { id, expected, writer } = writeTarget(app, request, ownership)
    written(await repository.deleteUser(app.db, id, expected, writer), expected)
    return await reply.code(204).send(null)
  })
}

export default deleteUser
