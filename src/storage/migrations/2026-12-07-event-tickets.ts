import type { Kysely } from 'kysely'

/**
 * Tickets that open one `GET /events` stream for a browser, whose `EventSource` sends no
 * `Authorization` header (events/tickets.ts): kept by their hash, for seconds, and used once.
 */
export function eventTickets () {
  return {
    async up (db: Kysely<any>): Promise<void> {
      await db.schema
        .createTable('event_tickets')
        .addColumn('ticket_hash', 'text', (column) => column.primaryKey())
        .addColumn('issuer', 'text', (column) => column.notNull())
        .addColumn('subject', 'text', (column) => column.notNull())
        .addColumn('expires_at', 'text', (column) => column.notNull())
        .execute()
    },
    async down (db: Kysely<any>): Promise<void> {
      await db.schema.dropTable('event_tickets').execute()
    }
  }
}
