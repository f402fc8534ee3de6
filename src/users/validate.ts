/** `POST /users/{id}`: the validation showcase; it stores nothing. */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { ValidateUserSchema } from './validate.schemas.js'

const validateUser: FastifyPluginAsyncTypebox = async (app) => {
  app.post('/users/:id', app.protect('users:write', { schema: ValidateUserSchema }), async (request) => {
    const { name, email } = request.body
    return { id: request.params.id, name, email }
  })
}

export default validateUser
