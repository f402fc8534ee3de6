import { sql, type Kysely } from 'kysely'
import type { Dialect } from '../database.js'

const TRIGGER = 'keep_erased_user_key'

/**
 * A deleted user leaves its `Idempotency-Key`, its id and its creation time, and nothing derived
 * from its fields: a hash of the request it was created by would let whoever reads the database
 * test guesses of its name and email (docs/decisions/0021-user-versions-and-erasure.md).
 */
export function erasedKeysWithoutFingerprints (dialect: Dialect) {
  const dropTrigger = async (db: Kysely<any>) => {
    await sql`drop trigger ${sql.raw(TRIGGER)}${sql.raw(dialect === 'postgres' ? ' on users' : '')}`.execute(db)
    if (dialect === 'postgres') await sql`drop function ${sql.raw(TRIGGER)}()`.execute(db)
  }
  const createTrigger = async (db: Kysely<any>, columns: string, values: string, when: string) => {
    const statement = sql`insert into erased_user_keys (${sql.raw(columns)}) values (${sql.raw(values)})`
    const statements = dialect === 'postgres'
      ? [
          sql`create function ${sql.raw(TRIGGER)}() returns trigger language plpgsql as $$ begin ${statement}; return null; end $$`,
          sql`create trigger ${sql.raw(TRIGGER)} after delete on users for each row when (${sql.raw(when)}) execute function ${sql.raw(TRIGGER)}()`
        ]
      : [sql`create trigger ${sql.raw(TRIGGER)} after delete on users when ${sql.raw(when)} begin ${statement}; end`]
    for (const one of statements) await one.execute(db)
  }
  /** The table anew, with or without the fingerprint column, keeping its rows' keys, ids and times. */
  const rebuildTable = async (db: Kysely<any>, withFingerprint: boolean) => {
    let table = db.schema.createTable('erased_user_keys_next').addColumn('idempotency_key', 'text', (column) => column.primaryKey())
    if (withFingerprint) table = table.addColumn('request_fingerprint', 'text', (column) => column.notNull())
    await table
      .addColumn('user_id', 'integer', (column) => column.notNull())
      .addColumn('created_at', 'text', (column) => column.notNull())
      .execute()
    const copied = withFingerprint ? sql`idempotency_key, '', user_id, created_at` : sql`idempotency_key, user_id, created_at`
    await sql`insert into erased_user_keys_next select ${copied} from erased_user_keys`.execute(db)
    await db.schema.dropTable('erased_user_keys').execute()
    await db.schema.alterTable('erased_user_keys_next').renameTo('erased_user_keys').execute()
    await db.schema.createIndex('erased_user_keys_by_age').on('erased_user_keys').column('created_at').execute()
  }
  return {
    async up (db: Kysely<any>): Promise<void> {
      await dropTrigger(db)
      await rebuildTable(db, false)
      await createTrigger(db, 'idempotency_key, user_id, created_at', 'old.idempotency_key, old.id, old.created_at', 'old.idempotency_key is not null')
    },
    async down (db: Kysely<any>): Promise<void> {
      await dropTrigger(db)
      // The fingerprints are gone: an erased user's key then answers any request as a different one.
      await rebuildTable(db, true)
      await createTrigger(db, 'idempotency_key, request_fingerprint, user_id, created_at', 'old.idempotency_key, old.request_fingerprint, old.id, old.created_at',
        'old.idempotency_key is not null and old.request_fingerprint is not null')
    }
  }
}
