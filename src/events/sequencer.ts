/**
 * Gives PostgreSQL's events their positions in commit order. Transactions commit in another order
 * than they take sequence numbers, so a reader that read by such numbers could pass an event
 * still to be committed below them. Each event is stored with its transaction's id instead; once
 * every transaction older than the oldest still running has ended (its id below the snapshot's
 * xmin), its events can gain no company before them, and take the next positions in (transaction,
 * insertion) order. A transaction left open anywhere on the server holds back every event after it.
 * One instance does it at a time, under an advisory lock; on SQLite, where one
 * writer commits at a time, an event's position is its row's and there is nothing to do.
 */
import { sql, type Kysely } from 'kysely'
import type { Dialect } from '../storage/database.js'
import type { Database } from '../storage/schema.js'

/** The advisory lock of the instance that sequences, with the schema's hash as its second half: services in other schemas of one database do not wait for it. */
const SEQUENCER_LOCK = 7_106_201
/** Events given positions in one statement. */
const SEQUENCED_AT_ONCE = 1000

export function eventSequencer (db: Kysely<Database>, dialect: Dialect): () => Promise<void> {
  if (dialect === 'sqlite') return async () => {}
  return async () => {
    await db.transaction().execute(async (transaction) => {
      const { rows } = await sql<{ held: boolean }>`select pg_try_advisory_xact_lock(${sql.lit(SEQUENCER_LOCK)}, hashtext(current_schema())) as held`.execute(transaction)
      if (rows[0]?.held !== true) return
      await sql`with ready as (
          select id, row_number() over (order by tx, id) as n from events
          where position is null and tx < pg_snapshot_xmin(pg_current_snapshot())
          order by tx, id limit ${sql.lit(SEQUENCED_AT_ONCE)})
        update events set position = (select coalesce(max(position), 0) from events) + ready.n
        from ready where events.id = ready.id`.execute(transaction)
    })
  }
}
