import type { Kysely } from 'kysely'
import type { Dialect } from '../database.js'

/**
 * One row that readiness rewrites while writes fail, to tell when they work again without a
 * client's write (storage.ts).
 */
export function readinessProbe (dialect: Dialect) {
  return {
    async up (db: Kysely<any>): Promise<void> {
      await db.schema
        .createTable('readiness_probe')
        .addColumn('id', 'integer', (column) => column.primaryKey())
        .addColumn('payload', dialect === 'postgres' ? 'bytea' : 'blob', (column) => column.notNull())
        .execute()
      await db.insertInto('readiness_probe').values({ id: 1, payload: Buffer.alloc(0) }).execute()
    },
    async down (db: Kysely<any>): Promise<void> {
      await db.schema.dropTable('readiness_probe').execute()
    }
  }
}
