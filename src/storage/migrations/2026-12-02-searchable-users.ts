import { sql, type Kysely } from 'kysely'
import type { Dialect } from '../database.js'

/**
 * Indexes for finding and sorting users (`GET /users?email=…&sort=…`): each ends with the id, so
 * that a keyset page (sort key, id) is one range of one index, however deep. Names compare by
 * code point on both databases: PostgreSQL's column takes the "C" collation, SQLite's BINARY
 * already does; addresses are found whatever the case of their ASCII letters.
 */
export function searchableUsers (dialect: Dialect) {
  return {
    async up (db: Kysely<any>): Promise<void> {
      if (dialect === 'postgres') await sql`alter table users alter column name type text collate "C"`.execute(db)
      await sql`create index users_by_email on users (lower(email), id)`.execute(db)
      await db.schema.createIndex('users_by_name').on('users').columns(['name', 'id']).execute()
      await db.schema.createIndex('users_by_creation').on('users').columns(['created_at', 'id']).execute()
    },
    async down (db: Kysely<any>): Promise<void> {
      for (const index of ['users_by_creation', 'users_by_name', 'users_by_email']) await db.schema.dropIndex(index).execute()
      if (dialect === 'postgres') await sql`alter table users alter column name type text collate "default"`.execute(db)
    }
  }
}
