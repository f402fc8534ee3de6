/** User records: list, look up and store (seed §4.2–4.4), and the validation showcase (§4.6). */
import { createHash } from 'node:crypto'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyReply } from 'fastify'
import { AppError } from '../errors.js'
import { conditionalGet } from '../plugins/conditional-get.js'
import { MAX_USER_ID, type CreateOnceOutcome } from '../db/users.js'
import { CreateUserSchema, createUserLinks, GetUserSchema, ListUsersSchema, ValidateUserSchema } from './users.schemas.js'

/** Only the canonical decimal form names a user, so each user has exactly one URL. */
const CANONICAL_ID = /^[1-9][0-9]{0,9}$/

function toUserId (pathValue: string): number | undefined {
  const id = Number(pathValue)
  return CANONICAL_ID.test(pathValue) && id <= MAX_USER_ID ? id : undefined
}

/**
 * RFC 8288 links: `first`, and `next` after this page's last id when the page is full, so that
 * every page costs the same.
 */
function pageLinks (limit: number, users: Array<{ id: number }>): string {
  const links = [`</users?limit=${limit}>; rel="first"`]
  const last = users.at(-1)
  if (users.length === limit && last !== undefined) links.unshift(`</users?limit=${limit}&after=${last.id}>; rel="next"`)
  return links.join(', ')
}

/** How often keys past their time are cleared from the database (they are ignored at once). */
const FORGET_EVERY_MS = 3_600_000

const users: FastifyPluginAsyncTypebox<{ idempotencyKeyTtlMs: number }> = async (app, { idempotencyKeyTtlMs }) => {
  const keptSince = () => new Date(Date.now() - idempotencyKeyTtlMs).toISOString()
  const forget = setInterval(() => { app.users.forgetIdempotencyKeys(keptSince()).catch(() => {}) }, FORGET_EVERY_MS).unref()
  app.addHook('onClose', async () => { clearInterval(forget) })
  /** Keys whose first request this process is still answering. */
  const inFlight = new Set<string>()

  app.get('/users', { schema: ListUsersSchema, onSend: conditionalGet }, async (request, reply) => {
    const { limit, offset, after } = request.query
    if (after !== undefined && offset !== 0) throw new AppError('querystring must not have both after and offset', 400)
    const { users, total } = await app.users.list({ limit, offset, after })
    reply.header('x-total-count', total)
    reply.header('link', pageLinks(limit, users))
    return users
  })

  app.get('/users/:id', { schema: GetUserSchema, onSend: conditionalGet }, async (request) => {
    const { id } = request.params
    const userId = toUserId(id)
    const user = userId === undefined ? undefined : await app.users.findById(userId)
    if (user === undefined) throw new AppError('User not found', 404)
    return { id, name: user.name }
  })

  app.post('/users', { schema: CreateUserSchema, links: createUserLinks }, async (request, reply) => {
    const { name, email } = request.body
    // Only these two are stored and the answer is the body's bytes, so the parsed body, which can
    // be many times their size, is let go before the wait for the database.
    request.body = { name, email }
    const key = request.headers['idempotency-key']
    let id: number
    if (key === undefined) {
      id = await app.users.create({ name, email })
    } else {
      // A retry that arrives while this process still answers the first is told so; one that
      // arrives at another instance waits, in the database, for the first to commit.
      if (inFlight.has(key)) throw new AppError('A request with this Idempotency-Key is still being answered: retry shortly', 409)
      inFlight.add(key)
      let outcome: CreateOnceOutcome
      try {
        const fingerprint = createHash('sha256').update(request.bodyBytes ?? '').digest('base64url')
        outcome = await app.users.createOnce({ name, email }, { key, fingerprint, keptSince: keptSince() })
      } finally {
        inFlight.delete(key)
      }
      if ('differentRequest' in outcome) throw new AppError('This Idempotency-Key was used with a different request body', 422)
      id = outcome.id
      if (outcome.replayed) reply.header('idempotent-replayed', 'true')
    }
    // The schema types the body as parsed; what goes out is the same JSON, as bytes (on a
    // replay, the retry's bytes, which are the first request's: their fingerprints match).
    const raw: FastifyReply = reply
    return raw.code(201).header('location', `/users/${id}`).type('application/json; charset=utf-8').send(request.bodyBytes)
  })

  app.post('/users/:id', { schema: ValidateUserSchema }, async (request) => {
    const { name, email } = request.body
    return { id: request.params.id, name, email }
  })
}

export default users
