/** Storage of user records; the only module that writes SQL for them. */
import type { Kysely } from 'kysely'
import type { Database, UserRow } from './schema.js'

/** Ids are 32-bit on PostgreSQL (`integer`); the same bound holds on SQLite. */
export const MAX_USER_ID = 2_147_483_647

export type UserSummary = Pick<UserRow, 'id' | 'name'>

export interface Page {
  limit: number
  offset: number
}

export interface UserRepository {
  /** Stores a user; resolves once it is committed, with its new id. */
  create (user: { name: string, email: string }): Promise<number>
  findById (id: number): Promise<UserSummary | undefined>
  /** One page in ascending id order, and how many users there are in all. */
  list (page: Page): Promise<{ users: UserSummary[], total: number }>
}

export function createUserRepository (db: Kysely<Database>): UserRepository {
  return {
    async create ({ name, email }) {
      const { id } = await db.insertInto('users').values({ name, email }).returning('id').executeTakeFirstOrThrow()
      return id
    },

    async findById (id) {
      return await db.selectFrom('users').select(['id', 'name']).where('id', '=', id).executeTakeFirst()
    },

    async list ({ limit, offset }) {
      const [users, { total }] = await Promise.all([
        db.selectFrom('users').select(['id', 'name']).orderBy('id').limit(limit).offset(offset).execute(),
        db.selectFrom('users').select((eb) => eb.fn.countAll<number | string>().as('total')).executeTakeFirstOrThrow()
      ])
      // PostgreSQL returns count(*) as a bigint string.
      return { users, total: Number(total) }
    }
  }
}
