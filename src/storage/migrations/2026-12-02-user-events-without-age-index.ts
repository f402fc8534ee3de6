import type { Kysely } from 'kysely'

/**
 * The purge finds old events by position, from the oldest on (events/outbox.ts), so no index on
 * their age is kept up by every write (docs/decisions/0027-events-purged-by-position.md).
 */
export function eventsWithoutAgeIndex () {
  return {
    async up (db: Kysely<any>): Promise<void> {
      await db.schema.dropIndex('events_by_age').execute()
    },
    async down (db: Kysely<any>): Promise<void> {
      await db.schema.createIndex('events_by_age').on('events').column('created_at').execute()
    }
  }
}
