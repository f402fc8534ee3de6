/** Storage of user records; the only module that writes SQL for them. */
import { sql } from 'kysely'
import type { QueryRunner } from './queries.js'
import type { UserRow } from './schema.js'

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

export interface UserRepository {
  /** Stores a user; resolves once it is committed to the disk, with its new id. */
  create (user: NewUser): Promise<number>
  findById (id: number): Promise<UserSummary | undefined>
  /** One page in ascending id order, and how many users there are in all. */
  list (page: Page): Promise<{ users: UserSummary[], total: number }>
}

export function createUserRepository ({ db, read, write }: QueryRunner): UserRepository {
  return {
    async create ({ name, email }) {
      const [row] = await write(db.insertInto('users').values({ name, email }).returning('id').compile())
      return row!.id
    },

    async findById (id) {
      const [user] = await read(db.selectFrom('users').select(['id', 'name']).where('id', '=', id).compile())
      return user
    },

    async list ({ limit, offset, after }) {
      let page = db.selectFrom('users').select(['id', 'name']).orderBy('id').limit(limit).offset(offset)
      if (after !== undefined) page = page.where('id', '>', after)
      // Both queries start in the same turn, so on SQLite they read the same snapshot.
      const [users, [count]] = await Promise.all([
        read(page.compile()),
        read(db.selectFrom('user_counts').select(sql<number | string>`coalesce(sum(total), 0)`.as('total')).compile())
      ])
      // PostgreSQL returns a sum of integers as a bigint, in a string.
      return { users, total: Number(count!.total) }
    }
  }
}
