/**
 * Opens the database, brings its schema up to date, and offers the repositories to routes.
 * The connection closes with the app, after in-flight requests have finished.
 */
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { sql, type Kysely } from 'kysely'
import type { DatabaseConfig } from '../config.js'
import { createDatabase } from '../db/database.js'
import { migrateToLatest } from '../db/migrate.js'
import type { Database } from '../db/schema.js'
import { createUserRepository, type UserRepository } from '../db/users.js'

declare module 'fastify' {
  interface FastifyInstance {
    users: UserRepository
    /** Resolves when the database answers a trivial query; rejects otherwise. */
    checkDatabase: () => Promise<void>
  }
}

async function storage (app: FastifyInstance, options: { database: DatabaseConfig }): Promise<void> {
  const db: Kysely<Database> = createDatabase(options.database)
  app.addHook('onClose', async () => await db.destroy())
  await migrateToLatest(db, options.database.dialect)

  app.decorate('users', createUserRepository(db))
  app.decorate('checkDatabase', async () => { await sql`select 1`.execute(db) })
}

export default fp(storage, { name: 'storage' })
