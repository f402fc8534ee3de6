import type { Kysely } from 'kysely'

/**
 * Who created each user, when ownership is on (`USER_OWNERSHIP=on`): the issuer and subject of
 * the token that stored it. A user stored while ownership is off, or without a token, has none.
 */
export function userOwners () {
  return {
    async up (db: Kysely<any>): Promise<void> {
      await db.schema.alterTable('users').addColumn('owner_issuer', 'text').execute()
      await db.schema.alterTable('users').addColumn('owner_subject', 'text').execute()
    },
    async down (db: Kysely<any>): Promise<void> {
      await db.schema.alterTable('users').dropColumn('owner_subject').execute()
      await db.schema.alterTable('users').dropColumn('owner_issuer').execute()
    }
  }
}
