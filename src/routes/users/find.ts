/** `GET /users/{id}`: one stored user (seed §4.4). */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { MAX_USER_ID } from '../../db/users.js'
import { AppError } from '../../plugins/app/errors.js'
import { conditionalGet } from '../../plugins/app/conditional-get.js'
import { GetUserSchema } from './find.schemas.js'

/** Only the canonical decimal form names a user, so each user has exactly one URL. */
const CANONICAL_ID = /^[1-9][0-9]{0,9}$/

function toUserId (pathValue: string): number | undefined {
  const id = Number(pathValue)
  return CANONICAL_ID.test(pathValue) && id <= MAX_USER_ID ? id : undefined
}

const findUser: FastifyPluginAsyncTypebox = async (app) => {
  app.get('/users/:id', { schema: GetUserSchema, onSend: conditionalGet }, async (request) => {
    const { id } = request.params
    const userId = toUserId(id)
    const user = userId === undefined ? undefined : await app.users.findById(userId)
    if (user === undefined) throw new AppError('User not found', 404)
    return { id, name: user.name }
  })
}

export default findUser
