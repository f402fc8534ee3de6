/**
 * The service's storage: Kysely over the configured database, migrated, with every query watched
 * for outages (observed-dialect.ts). SQLite runs on a worker thread; PostgreSQL through its pool.
 */
import { Kysely } from 'kysely'
import type { DatabaseConfig } from '../config/config.js'
import { migrateToLatest, type MigrationOutcome } from './migrate.js'
import { observed } from './observed-dialect.js'
import { postgresDialect, type PoolStats } from './postgres.js'
import { connectionLossesLog, connectionRefusalsLog } from './postgres-logs.js'
import type { Database } from './schema.js'
import { sqliteWorkerDialect } from './sqlite-dialect.js'
import { openSqliteWorker } from './sqlite-thread.js'
import { outageLog, type OutageLogger } from './unavailable.js'

export interface Storage {
  db: Kysely<Database>
  /** Resolves when the database can do its work now (readiness); rejects otherwise. */
  check: () => Promise<void>
  close: () => Promise<void>
  /** Connections of the PostgreSQL pool right now; SQLite has no pool. */
  poolStats?: () => PoolStats
  /** What opening did to the schema: the migrations it applied, and any a newer version had run. */
  migrations: MigrationOutcome
}

export async function openStorage (config: DatabaseConfig, log: OutageLogger, { traced = false } = {}): Promise<Storage> {
  const outages = { reads: outageLog(log, 'reads'), writes: outageLog(log, 'writes') }
  if (config.dialect === 'sqlite') {
    const worker = await openSqliteWorker(config.filename, log)
    const { dialect, check } = sqliteWorkerDialect(worker, { outages, traced: traced ? 'sqlite' : undefined })
    const db = new Kysely<Database>({ dialect })
    // Kysely closes its driver only once a query has run: the worker is closed here either way.
    const close = async () => { await db.destroy(); await worker.close() }
    return { db, check: async () => { await outages.reads.track(check()) }, close, migrations: worker.migrations }
  }

  const { dialect, poolStats, end } = postgresDialect(config, {
    onConnectionError: connectionLossesLog(log),
    // Asked only once a refusal has come, when the pool is there to ask.
    onConnectionRefused: connectionRefusalsLog(log, () => poolStats().open)
  })
  // Migrated over the same pool before any request, outside the watch for outages.
  const migrating = new Kysely<Database>({ dialect })
  let migrations: MigrationOutcome
  try {
    migrations = await migrateToLatest(migrating, 'postgres')
  } catch (error) {
    await end()
    throw error
  }
  const db = new Kysely<Database>({ dialect: observed(dialect, { outages, traced: traced ? 'postgresql' : undefined }) })
  const check = async () => { await db.selectNoFrom((eb) => eb.lit(1).as('one')).execute() }
  return { db, check, close: async () => { await db.destroy(); await end() }, poolStats, migrations }
}
