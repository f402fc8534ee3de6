/** The user routes: list, look up and store users, and the validation showcase. */
import type { FastifyInstance } from 'fastify'
import createUser from './create.js'
import findUser from './find.js'
import listUsers from './list.js'
import validateUser from './validate.js'

export default async function users (app: FastifyInstance, options: { idempotencyKeyTtlMs: number }): Promise<void> {
  await app.register(listUsers)
  await app.register(findUser)
  await app.register(createUser, options)
  await app.register(validateUser)
}
