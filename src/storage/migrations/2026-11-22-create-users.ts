import { sql, type Kysely } from 'kysely'
import type { Dialect } from '../database.js'

/**
 * Ids are integers handed out by the database, never reused: SQLite's
 * AUTOINCREMENT and PostgreSQL's identity column both guarantee that.
 */
export function createUsers (dialect: Dialect) {
  return {
    async up (db: Kysely<unknown>): Promise<void> {
      await db.schema
        .createTable('users')
        .addColumn('id', 'integer', (column) =>
          dialect === 'postgres'
            ? column.primaryKey().generatedByDefaultAsIdentity()
            : column.primaryKey().autoIncrement())
        .addColumn('name', 'text', (column) => column.notNull())
        .addColumn('email', 'text', (column) => column.notNull())
        .addColumn('created_at', 'text', (column) =>
          column.notNull().defaultTo(dialect === 'postgres'
            ? sql`to_char(now() at time zone 'utc', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`
            : sql`(strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))`))
        .execute()
    },
    async down (db: Kysely<unknown>): Promise<void> {
      await db.schema.dropTable('users').execute()
    }
  }
}
