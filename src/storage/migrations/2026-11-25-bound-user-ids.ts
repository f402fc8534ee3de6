import { sql, type Kysely } from 'kysely'
import type { Dialect } from '../database.js'

/**
 * Ids stop at 2,147,483,647 on both databases. PostgreSQL's identity column is an `integer`,
 * whose sequence ends there; SQLite's AUTOINCREMENT would go on past it, to ids the API can
 * neither give nor look up, so an insert beyond it is refused here, as PostgreSQL refuses it.
 */
export function boundUserIds (dialect: Dialect) {
  return {
    async up (db: Kysely<unknown>): Promise<void> {
      if (dialect !== 'sqlite') return
      await sql`create trigger bound_user_ids before insert on users
        when (select seq from sqlite_sequence where name = 'users') >= ${sql.lit(2_147_483_647)}
        begin select raise(abort, 'user ids exhausted'); end`.execute(db)
    },
    async down (db: Kysely<unknown>): Promise<void> {
      if (dialect === 'sqlite') await sql`drop trigger bound_user_ids`.execute(db)
    }
  }
}
