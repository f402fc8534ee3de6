/**
 * How far each webhook endpoint is delivered, shared by every instance on the database. One
 * instance delivers to an endpoint at a time: it holds the endpoint's lease, renewed by each write
 * it makes, and every write checks that it still holds it. An instance that dies holding it loses
 * it when it runs out; the next holder sends again the event it was sending (same `webhook-id`).
 */
import type { Kysely } from 'kysely'
import type { Database } from '../storage/schema.js'

export interface Cursor {
  position: number
  attempts: number
  firstFailedAt: string | null
  nextAttemptAt: string | null
}

/** An endpoint new to the database starts at the feed's newest event: it gets what happens from now on. */
export async function addEndpoint (db: Kysely<Database>, url: string): Promise<void> {
  await db.insertInto('webhook_cursors')
    .values((eb) => ({ url, position: eb.selectFrom('events').select(eb.fn.coalesce(eb.fn.max('position'), eb.lit(0)).as('newest')) }))
    .onConflict((conflict) => conflict.column('url').doNothing())
    .execute()
}

/** Takes or renews the lease until `until` when it is free, run out, or already this owner's; undefined when another holds it. */
export async function lease (db: Kysely<Database>, url: string, owner: string, now: string, until: string): Promise<Cursor | undefined> {
  const row = await db.updateTable('webhook_cursors').set({ lease_owner: owner, leased_until: until })
    .where('url', '=', url)
    .where((eb) => eb.or([eb('lease_owner', '=', owner), eb('leased_until', 'is', null), eb('leased_until', '<', now)]))
    .returning(['position', 'attempts', 'first_failed_at', 'next_attempt_at'])
    .executeTakeFirst()
  return row === undefined
    ? undefined
    : { position: Number(row.position), attempts: row.attempts, firstFailedAt: row.first_failed_at, nextAttemptAt: row.next_attempt_at }
}

/** Moves the endpoint past `position` (delivered, or given up on); false when the lease was lost. */
export async function advance (db: Kysely<Database>, url: string, owner: string, position: number, until: string): Promise<boolean> {
  const { numUpdatedRows } = await db.updateTable('webhook_cursors')
    .set({ position, attempts: 0, first_failed_at: null, next_attempt_at: null, leased_until: until })
    .where('url', '=', url).where('lease_owner', '=', owner)
    .executeTakeFirst()
  return numUpdatedRows > 0n
}

/** Records a failed try of the next event and when to try again; false when the lease was lost. */
export async function retryLater (db: Kysely<Database>, url: string, owner: string, cursor: Cursor, now: string, nextAttemptAt: string): Promise<boolean> {
  const { numUpdatedRows } = await db.updateTable('webhook_cursors')
    .set({ attempts: cursor.attempts + 1, first_failed_at: cursor.firstFailedAt ?? now, next_attempt_at: nextAttemptAt })
    .where('url', '=', url).where('lease_owner', '=', owner)
    .executeTakeFirst()
  return numUpdatedRows > 0n
}

/**
 * Keeps the event as failed for the endpoint, then moves past it; false when the lease was lost.
 * In that order, so that a process that dies between the two leaves the event both failed and
 * next to send, rather than neither.
 */
export async function giveUp (db: Kysely<Database>, url: string, owner: string, position: number, attempts: number, reason: string, now: string, until: string): Promise<boolean> {
  await db.insertInto('webhook_failures').columns(['url', 'position', 'attempts', 'reason', 'failed_at'])
    .expression((eb) => eb.selectFrom('webhook_cursors')
      .select([eb.val(url).as('url'), eb.val(position).as('position'), eb.val(attempts).as('attempts'), eb.val(reason).as('reason'), eb.val(now).as('failed_at')])
      .where('url', '=', url).where('lease_owner', '=', owner))
    .onConflict((conflict) => conflict.columns(['url', 'position']).doNothing())
    .execute()
  return await advance(db, url, owner, position, until)
}

/** The least position every one of these endpoints is past: events up to it are delivered or failed everywhere. */
export async function deliveredEverywhere (db: Kysely<Database>, urls: string[]): Promise<number | undefined> {
  if (urls.length === 0) return undefined
  const { least } = await db.selectFrom('webhook_cursors').select((eb) => eb.fn.min('position').as('least'))
    .where('url', 'in', urls).executeTakeFirstOrThrow()
  return least === null ? 0 : Number(least)
}

/** Events kept as failed, for the metrics. */
export async function failedEvents (db: Kysely<Database>): Promise<number> {
  const { total } = await db.selectFrom('webhook_failures').select((eb) => eb.fn.countAll<number | string>().as('total')).executeTakeFirstOrThrow()
  return Number(total)
}
