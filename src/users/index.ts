/** The user routes: list, look up, store, change and erase users, and the validation showcase. */
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import createUser from './create.js'
import deleteUser from './delete.js'
import findUser from './find.js'
import listUsers from './list.js'
import updateUser from './update.js'
import validateUser from './validate.js'

async function users (app: FastifyInstance, options: { idempotencyKeyTtlMs: number, requireIfMatch: boolean, ownership: boolean }): Promise<void> {
  await app.register(listUsers)
  await app.register(findUser)
  await app.register(createUser, options)
  await app.register(updateUser, options)
  await app.register(deleteUser, options)
  await app.register(validateUser)
}

export default fp(users, { name: 'users', dependencies: ['guards', 'storage'], encapsulate: true })
