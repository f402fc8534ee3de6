import { sql, type Kysely } from 'kysely'
import type { Dialect } from '../database.js'

const NOW = {
  postgres: sql`to_char(now() at time zone 'utc', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`,
  sqlite: sql`(strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))`
}

/**
 * The change feed's outbox: triggers write an event for every user created, changed (naming the
 * fields, not their values) or deleted, in the transaction that writes the user. An event holds
 * no personal data, so that erasure stays real. Positions follow commit order: on SQLite one
 * writer commits at a time, and an event's position is its row's; on PostgreSQL an event is
 * stored with its transaction's id and given its position later, once every transaction that
 * could come before it has ended (events/sequencer.ts, docs/decisions/0026-events-in-commit-order.md).
 * Webhook endpoints keep how far they are delivered, and the events they failed.
 */
export function userEvents (dialect: Dialect) {
  const changed = dialect === 'postgres'
    ? sql`case when old.name is distinct from new.name and old.email is distinct from new.email then '["name","email"]'
        when old.name is distinct from new.name then '["name"]' else '["email"]' end`
    : sql`case when old.name is not new.name and old.email is not new.email then '["name","email"]'
        when old.name is not new.name then '["name"]' else '["email"]' end`
  const differs = dialect === 'postgres'
    ? sql`old.name is distinct from new.name or old.email is distinct from new.email`
    : sql`old.name is not new.name or old.email is not new.email`
  return {
    async up (db: Kysely<any>): Promise<void> {
      if (dialect === 'postgres') {
        await db.schema.createTable('events')
          .addColumn('id', 'bigint', (column) => column.primaryKey().generatedAlwaysAsIdentity())
          .addColumn('tx', sql`xid8`, (column) => column.notNull().defaultTo(sql`pg_current_xact_id()`))
          .addColumn('position', 'bigint', (column) => column.unique())
          .addColumn('type', 'text', (column) => column.notNull())
          .addColumn('user_id', 'integer', (column) => column.notNull())
          .addColumn('changed', 'text')
          .addColumn('created_at', 'text', (column) => column.notNull().defaultTo(NOW[dialect]))
          .execute()
        await sql`create index events_to_sequence on events (tx, id) where position is null`.execute(db)
      } else {
        await db.schema.createTable('events')
          .addColumn('position', 'integer', (column) => column.primaryKey().autoIncrement())
          .addColumn('type', 'text', (column) => column.notNull())
          .addColumn('user_id', 'integer', (column) => column.notNull())
          .addColumn('changed', 'text')
          .addColumn('created_at', 'text', (column) => column.notNull().defaultTo(NOW[dialect]))
          .execute()
      }
      await db.schema.createIndex('events_by_age').on('events').column('created_at').execute()
      await db.schema.createTable('webhook_cursors')
        .addColumn('url', 'text', (column) => column.primaryKey())
        .addColumn('position', 'bigint', (column) => column.notNull())
        .addColumn('attempts', 'integer', (column) => column.notNull().defaultTo(0))
        .addColumn('first_failed_at', 'text')
        .addColumn('next_attempt_at', 'text')
        .addColumn('lease_owner', 'text')
        .addColumn('leased_until', 'text')
        .execute()
      await db.schema.createTable('webhook_failures')
        .addColumn('url', 'text', (column) => column.notNull())
        .addColumn('position', 'bigint', (column) => column.notNull())
        .addColumn('attempts', 'integer', (column) => column.notNull())
        .addColumn('reason', 'text', (column) => column.notNull())
        .addColumn('failed_at', 'text', (column) => column.notNull())
        .addPrimaryKeyConstraint('webhook_failures_key', ['url', 'position'])
        .execute()

      const created = sql`insert into events (type, user_id) values ('user.created', new.id)`
      const updated = sql`insert into events (type, user_id, changed) values ('user.updated', new.id, ${changed})`
      const deleted = sql`insert into events (type, user_id) values ('user.deleted', old.id)`
      if (dialect === 'postgres') {
        await sql`create function record_user_event() returns trigger language plpgsql as $$
          begin
            if tg_op = 'UPDATE' and not (${differs}) then return null; end if;
            if tg_op = 'INSERT' then ${created};
            elsif tg_op = 'UPDATE' then ${updated};
            else ${deleted};
            end if;
            return null;
          end $$`.execute(db)
        await sql`create trigger user_events after insert or update of name, email or delete on users for each row execute function record_user_event()`.execute(db)
      } else {
        await sql`create trigger user_created_event after insert on users begin ${created}; end`.execute(db)
        await sql`create trigger user_updated_event after update of name, email on users when ${differs} begin ${updated}; end`.execute(db)
        await sql`create trigger user_deleted_event after delete on users begin ${deleted}; end`.execute(db)
      }
    },
    async down (db: Kysely<any>): Promise<void> {
      if (dialect === 'postgres') {
        await sql`drop trigger user_events on users`.execute(db)
        await sql`drop function record_user_event()`.execute(db)
      } else {
        for (const name of ['user_created_event', 'user_updated_event', 'user_deleted_event']) await sql`drop trigger ${sql.raw(name)}`.execute(db)
      }
      for (const table of ['webhook_failures', 'webhook_cursors', 'events']) await db.schema.dropTable(table).execute()
    }
  }
}
