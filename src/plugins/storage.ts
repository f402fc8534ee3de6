/**
 * Opens the database, brings its schema up to date, and offers the repositories to routes.
 * The connection closes with the app, after in-flight requests have finished.
 */
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { sql, type Kysely } from 'kysely'
import { describeDatabase, type DatabaseConfig } from '../config.js'
import { createDatabase, type DatabaseHandle } from '../db/database.js'
import { fromDatabase } from '../db/errors.js'
import { migrateToLatest } from '../db/migrate.js'
import type { Database } from '../db/schema.js'
import { createUserRepository, type UserRepository } from '../db/users.js'

declare module 'fastify' {
  interface FastifyInstance {
    users: UserRepository
    /** Resolves when the database answers a trivial query; rejects otherwise. */
    checkDatabase: () => Promise<void>
    /** The connection pool's state, on PostgreSQL. */
    databasePoolStats: DatabaseHandle['poolStats']
  }
}

/** The database could not be opened or migrated at start-up; the message says which and why. */
export class DatabaseStartupError extends Error {
  override name = 'DatabaseStartupError'
}

async function storage (app: FastifyInstance, options: { database: DatabaseConfig }): Promise<void> {
  let handle: DatabaseHandle | undefined
  try {
    handle = await createDatabase(options.database, (error) => {
      app.log.warn({ err: error }, 'database connection lost; it will be reopened when needed')
    })
    await migrateToLatest(handle.db, options.database.dialect)
  } catch (error) {
    await handle?.db.destroy()
    const reason = error instanceof Error ? error.message : String(error)
    throw new DatabaseStartupError(`cannot use DATABASE_URL ${describeDatabase(options.database)}: ${reason}`)
  }
  const database: Kysely<Database> = handle.db
  app.addHook('onClose', async () => await database.destroy())

  app.decorate('users', createUserRepository(database, options.database.dialect, handle.walSync))
  app.decorate('checkDatabase', async () => { await fromDatabase(async () => await sql`select 1`.execute(database)) })
  app.decorate('databasePoolStats', handle.poolStats)
}

export default fp(storage, { name: 'storage' })
