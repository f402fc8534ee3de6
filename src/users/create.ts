/** `POST /users`: stores a user, safely retried with an `Idempotency-Key`. */
import { createHash } from 'node:crypto'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyReply } from 'fastify'
import { type CreateOnceOutcome, createUserOnce, forgetIdempotencyKeys } from './idempotency-keys.js'
import { AppError, JSON_TYPE } from '../http/errors.js'
import { CreateUserSchema, createUserLinks } from './create.schemas.js'
import { ownerOf } from './preconditions.js'
import { createUser as storeUser } from './repository.js'
import { userTag } from './user-id.js'

/** A new user's version; a retry answers with it too, as the first answer did, whatever changed since. */
const FIRST_VERSION = 1

/** How often keys past their time are cleared from the database (they are ignored at once). */
const FORGET_EVERY_MS = 3_600_000

const createUser: FastifyPluginAsyncTypebox<{ idempotencyKeyTtlMs: number, ownership: boolean }> = async (app, { idempotencyKeyTtlMs, ownership }) => {
  const keptSince = () => new Date(Date.now() - idempotencyKeyTtlMs).toISOString()
  const forget = setInterval(() => { forgetIdempotencyKeys(app.db, keptSince()).catch(() => {}) }, FORGET_EVERY_MS).unref()
  app.addHook('onClose', async () => { clearInterval(forget) })
  /** Keys whose first request this process is still answering. */
  const inFlight = new Set<string>()

  app.post('/users', app.protect('users:write', { schema: CreateUserSchema, links: createUserLinks }), async (request, reply) => {
    const { name, email } = request.body
    // Only these two are stored and the answer is the body's bytes, so the parsed body, which can
    // be many times their size, is let go before the wait for the database.
    request.body = { name, email }
    const sent = request.headers['idempotency-key']
    // With tokens on, each caller's keys are its own: another caller's key replays nothing of theirs.
    const caller = request.user?.sub
    const key = sent === undefined || caller === undefined ? sent : JSON.stringify([caller, sent])
    const owner = ownership ? ownerOf(request) : undefined
    let id: number
    if (key === undefined) {
      id = await storeUser(app.db, { name, email }, owner)
    } else {
      // A retry that arrives while this process still answers the first is told so; one that
      // arrives at another instance waits, in the database, for the first to commit.
      if (inFlight.has(key)) throw new AppError('idempotency_key_in_use')
      inFlight.add(key)
      let outcome: CreateOnceOutcome
      try {
        const fingerprint = createHash('sha256').update(request.bodyBytes ?? '').digest('base64url')
        outcome = await createUserOnce(app.db, { name, email }, { key, fingerprint, keptSince: keptSince() }, owner)
      } finally {
        inFlight.delete(key)
      }
      if ('differentRequest' in outcome) throw new AppError('idempotency_key_reused')
      id = outcome.id
      if (outcome.replayed) reply.header('idempotent-replayed', 'true')
    }
    // The schema types the body as parsed; what goes out is the same JSON, as bytes (on a
    // replay, the retry's bytes, which are the first request's: their fingerprints match).
    const raw: FastifyReply = reply
    return raw.code(201).header('location', `/users/${id}`).header('etag', userTag(id, FIRST_VERSION)).type(JSON_TYPE).send(request.bodyBytes)
  })
}

export default createUser
