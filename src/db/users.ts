/** Storage of user records; the only module that writes SQL for them. */
import { CompiledQuery, type Compilable, type Kysely } from 'kysely'
import type { Dialect } from './database.js'
import type { Database, UserRow } from './schema.js'

/** Ids are 32-bit on PostgreSQL (`integer`); the same bound holds on SQLite. */
export const MAX_USER_ID = 2_147_483_647

export type UserSummary = Pick<UserRow, 'id' | 'name'>
type NewUser = Pick<UserRow, 'name' | 'email'>

export interface Page {
  limit: number
  offset: number
}

export interface UserRepository {
  /** Stores a user; resolves once it is committed, with its new id. */
  create (user: NewUser): Promise<number>
  findById (id: number): Promise<UserSummary | undefined>
  /** One page in ascending id order, and how many users there are in all. */
  list (page: Page): Promise<{ users: UserSummary[], total: number }>
}

type Executor = Pick<Kysely<Database>, 'executeQuery'>

/**
 * A query built and compiled once. Kysely would rebuild and recompile the same SQL on every
 * request, which took longer than SQLite took to run it. The values passed to `run` take the
 * places of the example values the query was built with, in the same order.
 */
function compileOnce<Row> (query: Compilable<Row>): (executor: Executor, values: unknown[]) => Promise<Row[]> {
  const { sql, parameters } = query.compile()
  return async (executor, values) => {
    if (values.length !== parameters.length) throw new Error(`${sql} takes ${parameters.length} values, not ${values.length}`)
    return (await executor.executeQuery(CompiledQuery.raw(sql, values) as CompiledQuery<Row>)).rows
  }
}

export function createUserRepository (db: Kysely<Database>, dialect: Dialect): UserRepository {
  const insertUser = compileOnce(db.insertInto('users').values({ name: '', email: '' }).returning('id'))
  const selectUser = compileOnce(db.selectFrom('users').select(['id', 'name']).where('id', '=', 0))
  const selectPage = compileOnce(db.selectFrom('users').select(['id', 'name']).orderBy('id').limit(0).offset(0))
  const countUsers = compileOnce(db.selectFrom('users').select((eb) => eb.fn.countAll<number | string>().as('total')))

  async function insertOne (executor: Executor, { name, email }: NewUser): Promise<number> {
    const [row] = await insertUser(executor, [name, email])
    return row!.id
  }

  return {
    create: dialect === 'sqlite' ? groupCommit(db, insertOne) : async (user) => await insertOne(db, user),

    async findById (id) {
      const [user] = await selectUser(db, [id])
      return user
    },

    async list ({ limit, offset }) {
      const [users, [count]] = await Promise.all([selectPage(db, [limit, offset]), countUsers(db, [])])
      // PostgreSQL returns count(*) as a bigint string.
      return { users, total: Number(count!.total) }
    }
  }
}

interface PendingInsert {
  user: NewUser
  resolve: (id: number) => void
  reject: (error: unknown) => void
}

/**
 * SQLite commits one transaction at a time, and each commit waits for the disk
 * (synchronous=FULL), blocking the event loop. So the users that arrive together (in one
 * turn of the event loop) are inserted in one transaction and committed with one disk
 * write; each caller is answered after that commit, with its own id. Should the group fail,
 * each user is retried in a transaction of its own, so that one bad row cannot fail the
 * others.
 */
function groupCommit (db: Kysely<Database>, insertOne: (executor: Executor, user: NewUser) => Promise<number>): UserRepository['create'] {
  let pending: PendingInsert[] = []

  async function commitPending (): Promise<void> {
    const group = pending
    pending = []
    try {
      const ids = await db.transaction().execute(async (transaction) => {
        const inserted: number[] = []
        for (const { user } of group) inserted.push(await insertOne(transaction, user))
        return inserted
      })
      group.forEach(({ resolve }, index) => resolve(ids[index]!))
    } catch {
      for (const { user, resolve, reject } of group) insertOne(db, user).then(resolve, reject)
    }
  }

  return async (user) => await new Promise<number>((resolve, reject) => {
    pending.push({ user, resolve, reject })
    if (pending.length === 1) setImmediate(commitPending)
  })
}
