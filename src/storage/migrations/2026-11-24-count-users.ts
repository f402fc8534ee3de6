import { sql, type Kysely } from 'kysely'
import type { Dialect } from '../database.js'

/** Rows the count is spread over: enough that concurrent inserts rarely update the same one. */
const SHARDS = 16

/**
 * How many users there are, kept by a trigger so that `X-Total-Count` costs the same at any size.
 * It is spread over 16 rows chosen by id, so that concurrent inserts on PostgreSQL rarely wait on
 * one row; the total is their sum.
 */
export function countUsers (dialect: Dialect) {
  return {
    async up (db: Kysely<any>): Promise<void> {
      await db.schema
        .createTable('user_counts')
        .addColumn('shard', 'integer', (column) => column.primaryKey())
        .addColumn('total', 'integer', (column) => column.notNull())
        .execute()
      await db.insertInto('user_counts')
        .values(Array.from({ length: SHARDS }, (_, shard) => ({ shard, total: 0 })))
        .execute()
      await sql`update user_counts set total = (select count(*) from users where users.id % ${sql.lit(SHARDS)} = user_counts.shard)`.execute(db)
      const addOne = sql`update user_counts set total = total + 1 where shard = new.id % ${sql.lit(SHARDS)}`
      if (dialect === 'postgres') {
        await sql`create function count_new_user() returns trigger language plpgsql as $$ begin ${addOne}; return null; end $$`.execute(db)
        await sql`create trigger count_users after insert on users for each row execute function count_new_user()`.execute(db)
      } else {
        await sql`create trigger count_users after insert on users begin ${addOne}; end`.execute(db)
      }
    },
    async down (db: Kysely<any>): Promise<void> {
      await sql`drop trigger count_users${sql.raw(dialect === 'postgres' ? ' on users' : '')}`.execute(db)
      if (dialect === 'postgres') await sql`drop function count_new_user()`.execute(db)
      await db.schema.dropTable('user_counts').execute()
    }
  }
}
