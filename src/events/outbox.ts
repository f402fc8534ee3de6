/**
 * Reading the change feed's outbox: events after a position, in order, as clients and webhook
 * endpoints see them; and purging those past their retention. Triggers write the events
 * (storage/migrations/2026-12-02-user-events.ts); nothing here writes one.
 */
import type { Kysely } from 'kysely'
import type { Database, EventsTable } from '../storage/schema.js'

export type EventType = EventsTable['type']
export const EVENT_TYPES: EventType[] = ['user.created', 'user.updated', 'user.deleted']

/** An event as the stream and webhooks send it: its position, what happened, when, and to whom. */
export interface UserEvent {
  id: number
  type: EventType
  timestamp: string
  data: { userId: number, changed?: Array<'name' | 'email'> }
}

/** At most this many events are read at once. */
export const EVENTS_PER_READ = 100

export async function eventsAfter (db: Kysely<Database>, position: number, limit = EVENTS_PER_READ): Promise<UserEvent[]> {
  const rows = await db.selectFrom('events').select(['position', 'type', 'user_id', 'changed', 'created_at'])
    .where('position', '>', position).orderBy('position').limit(limit).execute()
  return rows.map((row) => ({
    // PostgreSQL returns a bigint as text.
    id: Number(row.position),
    type: row.type,
    timestamp: row.created_at,
    data: row.changed === null ? { userId: row.user_id } : { userId: row.user_id, changed: JSON.parse(row.changed) as Array<'name' | 'email'> }
  }))
}

/** The newest event's position; 0 before the first event. */
export async function newestPosition (db: Kysely<Database>): Promise<number> {
  const { newest } = await db.selectFrom('events').select((eb) => eb.fn.max('position').as('newest')).executeTakeFirstOrThrow()
  return Number(newest ?? 0)
}

/** The oldest event's position; 0 before the first event. */
export async function oldestPosition (db: Kysely<Database>): Promise<number> {
  const { oldest } = await db.selectFrom('events').select((eb) => eb.fn.min('position').as('oldest')).executeTakeFirstOrThrow()
  return Number(oldest ?? 0)
}

/** Rows deleted by one statement of a purge, so that none holds its table long. */
const PURGED_AT_ONCE = 10_000

/**
 * Deletes the events stored before `before` and at or below `upTo`, a batch at a time from the
 * oldest, always keeping the newest, whose position says where the feed is; resolves with how many
 * went. It stops at the first event stored since `before`: positions follow commit order, so the
 * few events committed out of their time order wait for the next purge. Nothing to purge deletes
 * nothing: a delete makes the SQLite worker cut its WAL.
 */
export async function purgeEvents (db: Kysely<Database>, before: string, upTo: number): Promise<number> {
  let purged = 0
  for (;;) {
    const batch = await db.selectFrom('events').select(['position', 'created_at'])
      .where('position', '<=', upTo)
      .where('position', '<', (eb) => eb.selectFrom('events').select((inner) => inner.fn.max('position').as('newest')))
      .orderBy('position').limit(PURGED_AT_ONCE).execute()
    const old = batch.findIndex((event) => event.created_at >= before)
    const last = (old === -1 ? batch.at(-1) : batch[old - 1])?.position
    if (last === undefined || last === null) return purged
    const { numDeletedRows } = await db.deleteFrom('events').where('position', '<=', Number(last)).executeTakeFirst()
    purged += Number(numDeletedRows)
    if (old !== -1 || batch.length < PURGED_AT_ONCE) return purged
  }
}

/** The instant now, as `created_at` holds it. */
export const storedNow = (offsetMs = 0): string => new Date(Date.now() + offsetMs).toISOString()
