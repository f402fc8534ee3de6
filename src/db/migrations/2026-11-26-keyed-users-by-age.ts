import { sql, type Kysely } from 'kysely'

/**
 * The users that still hold an `Idempotency-Key`, by when they were created: clearing the keys
 * past their time (every hour, and when a request brings an expired one) finds them here. The
 * unique index of the keys did not serve it: SQLite's planner scans the whole table for
 * `idempotency_key is not null`, with the write lock held, on every instance every hour. Only
 * rows with a key are in this index, the creations of the last `IDEMPOTENCY_KEY_TTL` or so,
 * so clearing costs what there is to clear.
 */
export function keyedUsersByAge () {
  return {
    async up (db: Kysely<any>): Promise<void> {
      await db.schema.createIndex('users_keyed_by_age').on('users').column('created_at')
        .where(sql.ref('idempotency_key'), 'is not', null)
        .execute()
    },
    async down (db: Kysely<any>): Promise<void> {
      await db.schema.dropIndex('users_keyed_by_age').execute()
    }
  }
}
