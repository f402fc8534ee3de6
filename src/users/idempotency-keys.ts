/**
 * Creation under an `Idempotency-Key`: a key held by a user, live or erased, answers that user. An
 * erased user keeps no fingerprint of its request, so any request with its key is answered as a retry.
 */
import { sql, type Kysely } from 'kysely'
import { isUniqueViolation } from '../storage/observed-queries.js'
import type { Database, NewUser, UserOwner } from '../storage/schema.js'

/** An `Idempotency-Key`, the fingerprint of its request, and the oldest creation it still covers. */
export interface IdempotencyKey {
  key: string
  fingerprint: string
  /** Keys of users created before this time (ISO 8601, UTC) are forgotten. */
  keptSince: string
}

/** A new user, the one an earlier request with the same key created, or that key's request differed. */
export type CreateOnceOutcome = { id: number, replayed: boolean } | { differentRequest: true }

/** Forgets the keys of users created before `keptSince`, found by the index of keyed users by age. */
export const forgetKeysBefore = (db: Kysely<Database>, keptSince: string) => db.updateTable('users')
  .set({ idempotency_key: null, request_fingerprint: null })
  .where('idempotency_key', 'is not', null)
  .where('created_at', '<', keptSince)

export async function forgetIdempotencyKeys (db: Kysely<Database>, keptSince: string): Promise<void> {
  await forgetKeysBefore(db, keptSince).execute()
  await db.deleteFrom('erased_user_keys').where('created_at', '<', keptSince).execute()
}

/**
 * Inserts only while no user, live or deleted, holds the key, so that PostgreSQL spends no id on a
 * retry; the unique key still settles two requests at the same moment. Undefined when it is held.
 */
async function insertUnlessKeyHeld (db: Kysely<Database>, { name, email }: NewUser, { key, fingerprint }: IdempotencyKey, owner: UserOwner | undefined) {
  try {
    const row = await db.insertInto('users')
      .columns(['name', 'email', 'idempotency_key', 'request_fingerprint', 'owner_issuer', 'owner_subject'])
      .expression(db.selectNoFrom(({ val }) => [
        val(name).as('name'), val(email).as('email'), val(key).as('idempotency_key'), val(fingerprint).as('request_fingerprint'),
        val(owner?.issuer ?? null).as('owner_issuer'), val(owner?.subject ?? null).as('owner_subject')
      ])
        .where(({ and, not, exists, selectFrom }) => and([
          not(exists(selectFrom('users').select('id').where('idempotency_key', '=', key))),
          not(exists(selectFrom('erased_user_keys').select('user_id').where('idempotency_key', '=', key)))
        ])))
      .returning('id').executeTakeFirst()
    return row === undefined ? undefined : { id: row.id, replayed: false }
  } catch (error) {
    if (isUniqueViolation(error)) return undefined
    throw error
  }
}

/**
 * Stores a user unless one holds the same key; then answers that user's id, or says the request
 * differed. User and key are committed together.
 */
export async function createUserOnce (db: Kysely<Database>, user: NewUser, idempotency: IdempotencyKey, owner?: UserOwner): Promise<CreateOnceOutcome> {
  const holderOf = async () => await db.selectFrom('users').select(['id', 'request_fingerprint', 'created_at'])
    .where('idempotency_key', '=', idempotency.key).executeTakeFirst() ??
    await db.selectFrom('erased_user_keys').select(['user_id as id', sql<null>`null`.as('request_fingerprint'), 'created_at'])
      .where('idempotency_key', '=', idempotency.key).executeTakeFirst()
  // An erased user's key has no fingerprint left to compare: whatever the request, it is the retry.
  const answerOf = (row: { id: number, request_fingerprint: string | null }): CreateOnceOutcome =>
    row.request_fingerprint === null || row.request_fingerprint === idempotency.fingerprint ? { id: row.id, replayed: true } : { differentRequest: true }

  const created = await insertUnlessKeyHeld(db, user, idempotency, owner)
  if (created !== undefined) return created
  const holder = await holderOf()
  if (holder !== undefined && holder.created_at >= idempotency.keptSince) return answerOf(holder)
  // The key is past its time and not yet cleared: clear it and try once more. Should another
  // request take the key meanwhile, the answer is that request's.
  await forgetIdempotencyKeys(db, idempotency.keptSince)
  const retried = await insertUnlessKeyHeld(db, user, idempotency, owner)
  if (retried !== undefined) return retried
  const taker = await holderOf()
  if (taker === undefined) throw new Error(`Idempotency-Key ${JSON.stringify(idempotency.key)} is neither free nor held`)
  return answerOf(taker)
}
