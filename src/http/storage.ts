/**
 * Opens the database, migrates it, and offers it to the repositories; it closes after in-flight
 * requests.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { describeDatabase, type DatabaseConfig } from '../config/config.js'
import { NEWER_SCHEMA } from '../storage/migrate.js'
import { openStorage, type Storage } from '../storage/storage.js'
import type { Kysely } from 'kysely'
import type { Database } from '../storage/schema.js'

declare module 'fastify' {
  interface FastifyInstance {
    /** The open database, for the repositories (users/index.ts). */
    db: Kysely<Database>
    /** Resolves when the database can do its work now; rejects otherwise. */
    checkDatabase: () => Promise<void>
    /** The connection pool's state, on PostgreSQL. */
    databasePoolStats: Storage['poolStats']
  }
}

/** The database could not be opened or migrated at start-up; the message says which and why. */
export class DatabaseStartupError extends Error {
  override name = 'DatabaseStartupError'
}

/**
 * How long opening and migrating may take in all, inside Fastify's plugin timeout, so that a
 * database that stops answering midway fails start-up with one line.
 */
const OPEN_TIMEOUT_MS = 8000

/** What start-up says when a migration may need longer than it gives. */
const RUN_MIGRATE = 'a migration needs longer: run npm run migrate, which waits as long as it takes, then start'

/** The storage, or an error once `OPEN_TIMEOUT_MS` has passed; storage that opens later is closed. */
async function openWithin (opening: Promise<Storage>): Promise<Storage> {
  const timer = new AbortController()
  const timedOut = sleep(OPEN_TIMEOUT_MS, undefined, { signal: timer.signal }).then(() => {
    opening.then(async (late) => await late.close()).catch(() => {})
    throw new Error(`it did not open and migrate within ${OPEN_TIMEOUT_MS / 1000} s (it stopped answering, or ${RUN_MIGRATE})`)
  })
  try {
    return await Promise.race([opening, timedOut])
  } finally {
    timer.abort()
  }
}

async function storage (app: FastifyInstance, options: { database: DatabaseConfig, migrate: boolean, traced: boolean }): Promise<void> {
  let storage: Storage
  try {
    storage = await openWithin(openStorage(options.database, app.log, { traced: options.traced, migrate: options.migrate }))
  } catch (error) {
    let reason = error instanceof Error ? error.message : String(error)
    // PostgreSQL ended a statement at the service's bound (database.ts): only migrations run now.
    if ((error as { code?: unknown }).code === '57014' && reason.includes('statement timeout')) reason += ` (${RUN_MIGRATE})`
    throw new DatabaseStartupError(`cannot use DATABASE_URL ${describeDatabase(options.database)}: ${reason}`)
  }
  app.addHook('onClose', async () => await storage.close())
  const { applied, newer } = storage.migrations
  app.log.info({ database: describeDatabase(options.database), migrationsApplied: applied }, 'database open')
  if (newer.length > 0) app.log.warn({ migrations: newer }, NEWER_SCHEMA)

  app.decorate('db', storage.db)
  app.decorate('checkDatabase', storage.check)
  app.decorate('databasePoolStats', storage.poolStats)
}

export default fp(storage, { name: 'storage' })
