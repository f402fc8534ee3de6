/**
 * The service's storage: Kysely over the configured database, migrated, with every query watched
 * for outages (observed-queries.ts). SQLite runs on a worker thread; PostgreSQL through its pool.
 */
import { randomBytes } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import { Kysely } from 'kysely'
import type { DatabaseConfig } from '../config/config.js'
import { migrateToLatest, type MigrationOutcome } from './migrate.js'
import { observed, outageLog, type OutageLog, type OutageLogger } from './observed-queries.js'
import { postgresDialect, type PoolStats } from './postgres.js'
import { connectionLossesLog, connectionRefusalsLog } from './postgres-logs.js'
import type { Database } from './schema.js'
import { openSqliteWorker, sqliteWorkerDialect } from './sqlite.js'

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

/** The probe writes as many bytes as a large client write, so that its success means theirs fit too. */
const PROBE_BYTES = 32 * 1024
/** How long readiness waits for the probe; a probe still running is shared by the next check. */
const PROBE_TIMEOUT_MS = 1000

/**
 * Readiness includes writes: while the last write failed for the database (a full disk, a failed
 * sync, a read-only file), each check rewrites the probe row, and only its success, tracked as any
 * write, ends the outage.
 */
function withWriteProbe (db: Kysely<Database>, outages: { writes: OutageLog }, check: () => Promise<void>): () => Promise<void> {
  let probing: Promise<unknown> | undefined
  const probe = () => {
    probing ??= db.updateTable('readiness_probe').set({ payload: randomBytes(PROBE_BYTES) }).where('id', '=', 1).execute()
      .finally(() => { probing = undefined })
    return probing
  }
  return async () => {
    await check()
    if (outages.writes.failing()) await within(probe(), PROBE_TIMEOUT_MS)
  }
}

/** Waits for `promise` at most `ms`, then rejects; the promise goes on. */
async function within (promise: Promise<unknown>, ms: number): Promise<void> {
  const timer = new AbortController()
  try {
    await Promise.race([promise, sleep(ms, undefined, { signal: timer.signal }).then(() => { throw new Error(`the write probe took over ${ms} ms`) })])
  } finally {
    timer.abort()
  }
}

export async function openStorage (config: DatabaseConfig, log: OutageLogger, { traced = false, migrate = true } = {}): Promise<Storage> {
  const outages = { reads: outageLog(log, 'reads'), writes: outageLog(log, 'writes') }
  if (config.dialect === 'sqlite') {
    const worker = await openSqliteWorker(config.filename, log, { migrate })
    const { dialect, check } = sqliteWorkerDialect(worker, { outages, traced: traced ? 'sqlite' : undefined })
    const db = new Kysely<Database>({ dialect })
    // Kysely closes its driver only once a query has run: the worker is closed here either way.
    const close = async () => { await db.destroy(); await worker.close() }
    const checkReads = async () => { await outages.reads.track(check()) }
    return { db, check: withWriteProbe(db, outages, checkReads), close, migrations: worker.migrations }
  }

  const { dialect, poolStats, end } = postgresDialect(config, {
    onConnectionError: connectionLossesLog(log),
    // Asked only once a refusal has come, when the pool is there to ask.
    onConnectionRefused: connectionRefusalsLog(log, () => poolStats().open)
  })
  // Migrated (or checked, when `migrate` is false) over the same pool before any request, outside
  // the watch for outages.
  const migrating = new Kysely<Database>({ dialect })
  let migrations: MigrationOutcome
  try {
    migrations = await migrateToLatest(migrating, 'postgres', { apply: migrate })
  } catch (error) {
    await end()
    throw error
  }
  const db = new Kysely<Database>({ dialect: observed(dialect, { outages, traced: traced ? 'postgresql' : undefined }) })
  const check = withWriteProbe(db, outages, async () => { await db.selectNoFrom((eb) => eb.lit(1).as('one')).execute() })
  return { db, check, close: async () => { await db.destroy(); await end() }, poolStats, migrations }
}
