import { sql, type Kysely } from 'kysely'

/**
 * The users that still hold an `Idempotency-Key`, by age, so that clearing expired keys costs what
 * there is to clear; SQLite's planner scans the whole table for `idempotency_key is not null`
 * otherwise.
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
