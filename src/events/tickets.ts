/**
 * Tickets for the change feed: a browser's `EventSource` sends no `Authorization` header, so a
 * page that holds a token asks for a ticket, then opens `GET /events?ticket=…`. A ticket is
 * random, kept only as its hash, good for TICKET_TTL_S seconds and one stream, on any instance.
 */
import { createHash, randomBytes } from 'node:crypto'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyRequest } from 'fastify'
import type { Kysely } from 'kysely'
import { AppError } from '../http/errors.js'
import type { Database, UserOwner } from '../storage/schema.js'
import { TicketSchema } from './events.schemas.js'
import { storedNow } from './outbox.js'

/** How long a ticket may wait to be used: long enough to open a stream, too short to be worth stealing from a log. */
export const TICKET_TTL_S = 30

const hashOf = (ticket: string) => createHash('sha256').update(ticket).digest('base64url')

/** A new ticket for the token's holder; expired tickets are cleared on the way. */
export async function issueTicket (db: Kysely<Database>, holder: UserOwner): Promise<string> {
  const ticket = randomBytes(32).toString('base64url')
  await db.deleteFrom('event_tickets').where('expires_at', '<', storedNow()).execute()
  await db.insertInto('event_tickets')
    .values({ ticket_hash: hashOf(ticket), issuer: holder.issuer, subject: holder.subject, expires_at: storedNow(TICKET_TTL_S * 1000) })
    .execute()
  return ticket
}

/** The holder a ticket was issued to, once: it is spent by the statement that reads it. Undefined when unknown, spent or expired. */
export async function redeemTicket (db: Kysely<Database>, ticket: string): Promise<UserOwner | undefined> {
  const row = await db.deleteFrom('event_tickets').where('ticket_hash', '=', hashOf(ticket))
    .returning(['issuer', 'subject', 'expires_at']).executeTakeFirst()
  return row === undefined || row.expires_at < storedNow() ? undefined : { issuer: row.issuer, subject: row.subject }
}

/** The ticket of a `GET /events?ticket=…`, as the stream's guard takes it in place of a token: its holder, or the 401 of a ticket not good. */
export function ticketHolder (db: Kysely<Database>) {
  return async (request: FastifyRequest): Promise<UserOwner | undefined> => {
    const { ticket } = request.query as { ticket?: unknown }
    if (typeof ticket !== 'string') return undefined
    const holder = await redeemTicket(db, ticket)
    if (holder === undefined) throw new AppError('ticket_invalid')
    return holder
  }
}

/** `POST /events/tickets`: a ticket for the caller, who holds a token that may follow the feed. */
const tickets: FastifyPluginAsyncTypebox = async (app) => {
  app.post('/events/tickets', app.protect('events:read', { schema: TicketSchema }), async (request, reply) => {
    const { iss, sub } = request.user ?? {}
    const ticket = await issueTicket(app.db, { issuer: typeof iss === 'string' ? iss : '', subject: typeof sub === 'string' ? sub : '' })
    return await reply.code(201).send({ ticket, expires_in: TICKET_TTL_S })
  })
}

export default tickets
