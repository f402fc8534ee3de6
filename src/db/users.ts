/** Storage of user records; the only module that writes SQL for them. */
import { CompiledQuery, sql, type Kysely } from 'kysely'
import { isUniqueViolation } from './errors.js'
import type { QueryRunner } from './queries.js'
import type { Database, UserRow } from './schema.js'

/** Ids are 32-bit on PostgreSQL (`integer`); the same bound holds on SQLite. */
export const MAX_USER_ID = 2_147_483_647

export type UserSummary = Pick<UserRow, 'id' | 'name'>
type NewUser = Pick<UserRow, 'name' | 'email'>

/** A page: `limit` users after the id `after` (keyset), or after skipping `offset` of them. */
export interface Page {
  limit: number
  offset: number
  after?: number
}

/** An `Idempotency-Key`, the fingerprint of its request, and the oldest creation it still covers. */
export interface IdempotencyKey {
  key: string
  fingerprint: string
  /** Keys of users created before this time (ISO 8601, UTC) are forgotten. */
  keptSince: string
}

/** A new user, the one an earlier request with the same key created, or that key's request differed. */
export type CreateOnceOutcome = { id: number, replayed: boolean } | { differentRequest: true }

export interface UserRepository {
  /** Stores a user; resolves once it is committed to the disk, with its new id. */
  create (user: NewUser): Promise<number>
  /**
   * Stores a user unless one holds the same key; then answers that user's id, or says the request
   * differed. User and key are committed together.
   */
  createOnce (user: NewUser, idempotency: IdempotencyKey): Promise<CreateOnceOutcome>
  /** Forgets the keys of users created before `keptSince`. */
  forgetIdempotencyKeys (keptSince: string): Promise<void>
  findById (id: number): Promise<UserSummary | undefined>
  /** One page in ascending id order, and how many users there are in all. */
  list (page: Page): Promise<{ users: UserSummary[], total: number }>
}

/** A compiled query's SQL run with other values, in the order of its placeholders. */
const withValues = <Row>(query: CompiledQuery<Row>, parameters: unknown[]): CompiledQuery<Row> =>
  CompiledQuery.raw(query.sql, parameters) as CompiledQuery<Row>

/** Clears the keys of the users created before `keptSince`, found by the index of keyed users by age. */
export const forgetKeysBefore = (db: Kysely<Database>, keptSince: string) => db.updateTable('users')
  .set({ idempotency_key: null, request_fingerprint: null })
  .where('idempotency_key', 'is not', null)
  .where('created_at', '<', keptSince)
  .compile()

export function createUserRepository ({ db, read, readTogether, write }: QueryRunner): UserRepository {
  async function forgetIdempotencyKeys (keptSince: string): Promise<void> {
    await write(forgetKeysBefore(db, keptSince))
  }

  // The most frequent queries, compiled once and run with their own values in placeholder order
  // (docs/decisions/0020-queries-compiled-once.md).
  /** name, email */
  const insertUser = db.insertInto('users').values({ name: '', email: '' }).returning('id').compile()
  /** id */
  const userById = db.selectFrom('users').select(['id', 'name']).where('id', '=', 0).compile()
  /** limit, offset */
  const pageAt = db.selectFrom('users').select(['id', 'name']).orderBy('id').limit(0).offset(0).compile()
  /** after, limit, offset */
  const pageAfter = db.selectFrom('users').select(['id', 'name']).where('id', '>', 0).orderBy('id').limit(0).offset(0).compile()
  const userCount = db.selectFrom('user_counts').select(sql<number | string>`coalesce(sum(total), 0)`.as('total')).compile()

  return {
    async create ({ name, email }) {
      const [row] = await write(withValues(insertUser, [name, email]))
      return row!.id
    },

    async createOnce ({ name, email }, { key, fingerprint, keptSince }) {
      // Inserts only while no user holds the key, so that PostgreSQL spends no id on a retry; the
      // unique key still settles two requests at the same moment.
      const insert = async (): Promise<CreateOnceOutcome | undefined> => {
        try {
          const [row] = await write(db.insertInto('users')
            .columns(['name', 'email', 'idempotency_key', 'request_fingerprint'])
            .expression(db.selectNoFrom(({ val }) => [val(name).as('name'), val(email).as('email'), val(key).as('idempotency_key'), val(fingerprint).as('request_fingerprint')])
              .where(({ not, exists, selectFrom }) => not(exists(selectFrom('users').select('id').where('idempotency_key', '=', key)))))
            .returning('id').compile())
          return row === undefined ? undefined : { id: row.id, replayed: false }
        } catch (error) {
          if (isUniqueViolation(error)) return undefined
          throw error
        }
      }
      const earlier = async () => {
        const [row] = await read(db.selectFrom('users').select(['id', 'request_fingerprint', 'created_at']).where('idempotency_key', '=', key).compile())
        return row
      }
      const answerOf = (row: { id: number, request_fingerprint: string | null }): CreateOnceOutcome =>
        row.request_fingerprint === fingerprint ? { id: row.id, replayed: true } : { differentRequest: true }

      const created = await insert()
      if (created !== undefined) return created
      const holder = await earlier()
      if (holder !== undefined && holder.created_at >= keptSince) return answerOf(holder)
      // The key is past its time and not yet cleared: clear it and try once more. Should another
      // request take the key meanwhile, the answer is that request's.
      await forgetIdempotencyKeys(keptSince)
      const retried = await insert()
      if (retried !== undefined) return retried
      const taker = await earlier()
      if (taker === undefined) throw new Error(`Idempotency-Key ${JSON.stringify(key)} is neither free nor held`)
      return answerOf(taker)
    },

    forgetIdempotencyKeys,

    async findById (id) {
      const [user] = await read(withValues(userById, [id]))
      return user
    },

    async list ({ limit, offset, after }) {
      const page = after === undefined ? withValues(pageAt, [limit, offset]) : withValues(pageAfter, [after, limit, offset])
      // Together, so that on SQLite the page and the total come from one snapshot.
      const [users, [count]] = await readTogether(page, userCount)
      // PostgreSQL returns a sum of integers as a bigint, in a string.
      return { users, total: Number(count!.total) }
    }
  }
}
