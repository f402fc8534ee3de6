/** User records: list, look up and store (seed §4.2–4.4), and the validation showcase (§4.6). */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { AppError } from '../errors.js'
import { MAX_USER_ID } from '../db/users.js'
import { CreateUserSchema, GetUserSchema, ListUsersSchema, ValidateUserSchema } from './users.schemas.js'

/** Only the canonical decimal form names a user, so each user has exactly one URL. */
const CANONICAL_ID = /^[1-9][0-9]{0,9}$/

function toUserId (pathValue: string): number | undefined {
  const id = Number(pathValue)
  return CANONICAL_ID.test(pathValue) && id <= MAX_USER_ID ? id : undefined
}

const users: FastifyPluginAsyncTypebox = async (app) => {
  app.get('/users', { schema: ListUsersSchema }, async (request, reply) => {
    const { users, total } = await app.users.list(request.query)
    reply.header('x-total-count', total)
    return users
  })

  app.get('/users/:id', { schema: GetUserSchema }, async (request) => {
    const { id } = request.params
    const userId = toUserId(id)
    const user = userId === undefined ? undefined : await app.users.findById(userId)
    if (user === undefined) throw new AppError('User not found', 404)
    return { id, name: user.name }
  })

  app.post('/users', {
    schema: CreateUserSchema,
    // The answer is the body exactly as sent, extra properties and their order included;
    // the schema above documents it, JSON.stringify keeps it faithful.
    serializerCompiler: () => JSON.stringify
  }, async (request, reply) => {
    const { name, email } = request.body
    const id = await app.users.create({ name, email })
    return reply.code(201).header('location', `/users/${id}`).send(request.body)
  })

  app.post('/users/:id', { schema: ValidateUserSchema }, async (request) => {
    const { name, email } = request.body
    return { id: request.params.id, name, email }
  })
}

export default users
