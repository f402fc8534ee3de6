import type { Kysely } from 'kysely'

/**
 * Safe retries of `POST /users`: the key and a fingerprint of the request live on the user's own
 * row, committed by the same statement, and a unique index forbids a second user with the same key.
 */
export function idempotencyKeys () {
  return {
    async up (db: Kysely<any>): Promise<void> {
      await db.schema.alterTable('users').addColumn('idempotency_key', 'text').execute()
      await db.schema.alterTable('users').addColumn('request_fingerprint', 'text').execute()
      await db.schema.createIndex('users_idempotency_key').unique().on('users').column('idempotency_key').execute()
    },
    async down (db: Kysely<any>): Promise<void> {
      await db.schema.dropIndex('users_idempotency_key').execute()
      await db.schema.alterTable('users').dropColumn('request_fingerprint').execute()
      await db.schema.alterTable('users').dropColumn('idempotency_key').execute()
    }
  }
}
