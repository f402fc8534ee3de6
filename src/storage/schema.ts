/** The tables, as Kysely sees them; row types are derived, never written twice. */
import type { Generated, Insertable, Selectable } from 'kysely'

/** Ids are 32-bit on PostgreSQL (`integer`); the same bound holds on SQLite. */
export const MAX_USER_ID = 2_147_483_647

export interface UsersTable {
  id: Generated<number>
  name: string
  email: string
  created_at: Generated<string>
  /** The `Idempotency-Key` the user was created with, while it is kept; else null. */
  idempotency_key: string | null
  /** A hash of the request that created the user with that key. */
  request_fingerprint: string | null
  /** Raised by every change to the row; the user's ETag is made of it. */
  version: Generated<number>
  /** The `iss` (empty when the token has none) and `sub` of the token that stored it, under `USER_OWNERSHIP=on`; else null. */
  owner_issuer: string | null
  owner_subject: string | null
}

/** The `Idempotency-Key` of a deleted user, kept as long as a live user's would be. */
export interface ErasedUserKeysTable {
  idempotency_key: string
  user_id: number
  created_at: string
}

/** How many users there are, spread over a few rows (migrations/2026-11-24-count-users.ts). */
export interface UserCountsTable {
  shard: number
  total: number
}

/** One row, rewritten by readiness while writes fail (migrations/2026-11-29-readiness-probe.ts). */
export interface ReadinessProbeTable {
  id: number
  payload: Buffer
}

/** The change feed's outbox, written by triggers (migrations/2026-12-02-user-events.ts). */
export interface EventsTable {
  /** Where the event is in the feed, rising in commit order; on PostgreSQL null until sequenced (events/sequencer.ts). */
  position: Generated<number | null>
  type: 'user.created' | 'user.updated' | 'user.deleted'
  user_id: number
  /** A JSON list of the fields a change set (`["name"]`), for `user.updated`; else null. */
  changed: string | null
  created_at: Generated<string>
}

/** How far each webhook endpoint is delivered, and who is delivering to it until when. */
export interface WebhookCursorsTable {
  url: string
  /** The last event delivered (or given up on). */
  position: number
  /** Failed tries of the next event, and when the first of them was. */
  attempts: Generated<number>
  first_failed_at: string | null
  next_attempt_at: string | null
  lease_owner: string | null
  leased_until: string | null
}

/** Events an endpoint did not take within WEBHOOK_RETRY_FOR. */
export interface WebhookFailuresTable {
  url: string
  position: number
  attempts: number
  reason: string
  failed_at: string
}

/** A ticket for one stream of `GET /events`, by its hash, with the token it was issued to. */
export interface EventTicketsTable {
  ticket_hash: string
  issuer: string
  subject: string
  expires_at: string
}

export interface Database {
  users: UsersTable
  events: EventsTable
  webhook_cursors: WebhookCursorsTable
  webhook_failures: WebhookFailuresTable
  user_counts: UserCountsTable
  erased_user_keys: ErasedUserKeysTable
  readiness_probe: ReadinessProbeTable
  event_tickets: EventTicketsTable
}

/** The token that stored a user, under `USER_OWNERSHIP=on`: its issuer (empty when it names none) and subject. */
export interface UserOwner { issuer: string, subject: string }

export type UserRow = Selectable<UsersTable>
export type NewUserRow = Insertable<UsersTable>
/** What a client gives to create a user. */
export type NewUser = Pick<NewUserRow, 'name' | 'email'>
