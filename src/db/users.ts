/** Storage of user records; the only module that writes SQL for them. */
import { CompiledQuery, sql, type Compilable, type Kysely } from 'kysely'
import type { Dialect } from './database.js'
import { fromDatabase } from './errors.js'
import type { Database, UserRow } from './schema.js'
import type { WalSync } from './wal-sync.js'

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

/** Where one read runs its queries, and the number of users as that read sees it. */
interface ReadContext {
  executor: Executor
  total: () => Promise<number>
}

type Reader = <T>(read: (context: ReadContext) => Promise<T>) => Promise<T>

/**
 * @param walSync on a SQLite file, brings commits to the disk; every write, and every read
 * that may have seen one, is answered only once it is there.
 */
export function createUserRepository (db: Kysely<Database>, dialect: Dialect, walSync?: WalSync): UserRepository {
  const insertUser = compileOnce(db.insertInto('users').values({ name: '', email: '' }).returning('id'))
  const selectUser = compileOnce(db.selectFrom('users').select(['id', 'name']).where('id', '=', 0))
  // With a bare parameter as its LIMIT, SQLite (3.53) took 5 µs more for each run of the page
  // query, a third of its time, than with a literal; with the parameter in a cast, no more.
  const selectPage = compileOnce(db.selectFrom('users').select(['id', 'name']).orderBy('id').limit(sql<number>`cast(${0} as integer)`).offset(0))
  const countUsers = compileOnce(db.selectFrom('users').select((eb) => eb.fn.countAll<number | string>().as('total')))

  async function insertOne (executor: Executor, { name, email }: NewUser): Promise<number> {
    const [row] = await insertUser(executor, [name, email])
    return row!.id
  }

  async function countAll (executor: Executor): Promise<number> {
    const [row] = await countUsers(executor, [])
    // PostgreSQL returns count(*) as a bigint string.
    return Number(row!.total)
  }

  const read: Reader = dialect === 'sqlite'
    ? batchedReads(db, countAll, walSync)
    : async (read) => await read({ executor: db, total: async () => await countAll(db) })

  const create = dialect === 'sqlite' ? groupCommit(db, insertOne, walSync) : async (user: NewUser) => await insertOne(db, user)

  return {
    create: async (user) => await fromDatabase(async () => await create(user)),

    findById: async (id) => await fromDatabase(async () => {
      const [user] = await read(async ({ executor }) => await selectUser(executor, [id]))
      return user
    }),

    list: async ({ limit, offset }) => await fromDatabase(async () => await read(async ({ executor, total }) => {
      const [users, count] = await Promise.all([selectPage(executor, [limit, offset]), total()])
      return { users, total: count }
    }))
  }
}

/**
 * Gathers what arrives in one turn of the event loop and hands it on, all together, in the
 * next. `handle` answers every item, failures included.
 */
function perTurn<Item> (handle: (items: Item[]) => Promise<void>): (item: Item) => void {
  let items: Item[] = []
  return (item) => {
    items.push(item)
    if (items.length > 1) return
    setImmediate(() => {
      const arrived = items
      items = []
      handle(arrived)
    })
  }
}

interface PendingInsert {
  user: NewUser
  resolve: (id: number) => void
  reject: (error: unknown) => void
}

/**
 * SQLite commits one transaction at a time, and each commit has its cost however few rows it
 * holds: writing the WAL frames, and one sync to bring them to the disk. So the users that
 * arrive together (in one turn of the event loop) are inserted in one transaction; each
 * caller is answered, with its own id, once that commit is on the disk. Should the group
 * fail, each user is retried in a transaction of its own, so that one bad row cannot fail
 * the others.
 */
function groupCommit (db: Kysely<Database>, insertOne: (executor: Executor, user: NewUser) => Promise<number>, walSync: WalSync | undefined): UserRepository['create'] {
  async function insertAlone (user: NewUser): Promise<number> {
    walSync?.noteCommit()
    const id = await insertOne(db, user)
    await walSync?.untilOnDisk()
    return id
  }

  async function commit (group: PendingInsert[]): Promise<void> {
    let ids: number[]
    try {
      walSync?.noteCommit()
      ids = await db.transaction().execute(async (transaction) => {
        const inserted: number[] = []
        for (const { user } of group) inserted.push(await insertOne(transaction, user))
        return inserted
      })
    } catch {
      for (const { user, resolve, reject } of group) insertAlone(user).then(resolve, reject)
      return
    }
    try {
      await walSync?.untilOnDisk()
    } catch (error) {
      for (const { reject } of group) reject(error)
      return
    }
    group.forEach(({ resolve }, index) => resolve(ids[index]!))
  }
  const enqueue = perTurn(commit)

  return async (user) => await new Promise<number>((resolve, reject) => enqueue({ user, resolve, reject }))
}

interface PendingRead {
  read: (context: ReadContext) => Promise<unknown>
  resolve: (value: unknown) => void
  reject: (error: unknown) => void
}

/**
 * On SQLite, the reads that arrive together (in one turn of the event loop) run one after
 * another in one read transaction, and are answered when all have run. Alone, each query
 * took and released SQLite's WAL read lock (three system calls) and ran with the CPU's
 * caches full of the HTTP work done between queries: under load, a lookup by id took 15 µs
 * that way and 4 µs in a batch. The lists of a batch share one count of the users, which is
 * exact, since they all read the same snapshot; a count scans the table. Each read still
 * runs its own queries, after every commit that was answered before it arrived, and a read
 * that fails fails alone.
 */
function batchedReads (db: Kysely<Database>, countAll: (executor: Executor) => Promise<number>, walSync: WalSync | undefined): Reader {
  async function runTogether (batch: PendingRead[]): Promise<void> {
    let outcomes: Array<PromiseSettledResult<unknown>>
    try {
      outcomes = await db.transaction().execute(async (transaction) => {
        let total: Promise<number> | undefined
        const context: ReadContext = { executor: transaction, total: async () => await (total ??= countAll(transaction)) }
        const settled: Array<PromiseSettledResult<unknown>> = []
        for (const { read } of batch) settled.push((await Promise.allSettled([read(context)]))[0]!)
        return settled
      })
      // The reads may have seen rows whose writers are still waiting for the disk.
      await walSync?.untilOnDisk()
    } catch (error) {
      // The transaction could not begin or end, or the commits it saw could not be synced.
      for (const { reject } of batch) reject(error)
      return
    }
    batch.forEach(({ resolve, reject }, index) => {
      const outcome = outcomes[index]!
      if (outcome.status === 'fulfilled') resolve(outcome.value)
      else reject(outcome.reason)
    })
  }
  const enqueue = perTurn(runTogether)

  return async <T>(read: (context: ReadContext) => Promise<T>) => await new Promise<T>((resolve, reject) =>
    enqueue({ read, resolve: resolve as (value: unknown) => void, reject }))
}
