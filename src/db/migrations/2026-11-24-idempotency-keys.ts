import type { Kysely } from 'kysely'

/**
 * Safe retries of `POST /users` (the `Idempotency-Key` header): the key a user was created
 * with, and a fingerprint of the request, are stored on the user's own row, so that the user
 * and its key are committed together by one statement, and a retry finds the one or neither.
 * A unique index makes a second user with the same key impossible, from any instance.
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
