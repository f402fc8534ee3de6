import { sql, type Kysely } from 'kysely'
import type { Dialect } from '../database.js'

/** As in 2026-11-24-count-users.ts: the count is spread over this many rows, chosen by id. */
const SHARDS = 16

/**
 * Users that change and are erased. Each row has a `version`, raised by every change, that its
 * ETag is made of. A deleted user leaves its count, and leaves behind only the `Idempotency-Key`
 * it was created with, so that a retry of that creation makes no second user.
 */
export function changingUsers (dialect: Dialect) {
  const forEachDeleted = (name: string, statement: ReturnType<typeof sql>, when = sql`true`) => dialect === 'postgres'
    ? [
        sql`create function ${sql.raw(name)}() returns trigger language plpgsql as $$ begin ${statement}; return null; end $$`,
        sql`create trigger ${sql.raw(name)} after delete on users for each row when (${when}) execute function ${sql.raw(name)}()`
      ]
    : [sql`create trigger ${sql.raw(name)} after delete on users when ${when} begin ${statement}; end`]
  return {
    async up (db: Kysely<any>): Promise<void> {
      await db.schema.alterTable('users').addColumn('version', 'integer', (column) => column.notNull().defaultTo(1)).execute()
      await db.schema
        .createTable('erased_user_keys')
        .addColumn('idempotency_key', 'text', (column) => column.primaryKey())
        .addColumn('request_fingerprint', 'text', (column) => column.notNull())
        .addColumn('user_id', 'integer', (column) => column.notNull())
        .addColumn('created_at', 'text', (column) => column.notNull())
        .execute()
      await db.schema.createIndex('erased_user_keys_by_age').on('erased_user_keys').column('created_at').execute()
      const statements = [
        ...forEachDeleted('uncount_user', sql`update user_counts set total = total - 1 where shard = old.id % ${sql.lit(SHARDS)}`),
        ...forEachDeleted('keep_erased_user_key',
          sql`insert into erased_user_keys (idempotency_key, request_fingerprint, user_id, created_at)
            values (old.idempotency_key, old.request_fingerprint, old.id, old.created_at)`,
          sql`old.idempotency_key is not null and old.request_fingerprint is not null`)
      ]
      for (const statement of statements) await statement.execute(db)
    },
    async down (db: Kysely<any>): Promise<void> {
      for (const name of ['keep_erased_user_key', 'uncount_user']) {
        await sql`drop trigger ${sql.raw(name)}${sql.raw(dialect === 'postgres' ? ' on users' : '')}`.execute(db)
        if (dialect === 'postgres') await sql`drop function ${sql.raw(name)}()`.execute(db)
      }
      await db.schema.dropTable('erased_user_keys').execute()
      await db.schema.alterTable('users').dropColumn('version').execute()
    }
  }
}
