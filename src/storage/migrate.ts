/**
 * Brings the schema to the latest version. Instances starting together migrate once: each runs the
 * whole migrator in one transaction that first takes a lock the others wait for.
 */
import { sql, type Kysely } from 'kysely'
import { DEFAULT_MIGRATION_TABLE, Migrator, type Migration, type MigrationProvider } from 'kysely/migration'
import type { Dialect } from './database.js'
import { createUsers } from './migrations/2026-11-22-create-users.js'
import { countUsers } from './migrations/2026-11-24-count-users.js'
import { idempotencyKeys } from './migrations/2026-11-24-idempotency-keys.js'
import { boundUserIds } from './migrations/2026-11-25-bound-user-ids.js'
import { keyedUsersByAge } from './migrations/2026-11-26-keyed-users-by-age.js'
import { changingUsers } from './migrations/2026-11-29-changing-users.js'
import { readinessProbe } from './migrations/2026-11-29-readiness-probe.js'
import { erasedKeysWithoutFingerprints } from './migrations/2026-12-02-erased-keys-without-fingerprints.js'
import { searchableUsers } from './migrations/2026-12-02-searchable-users.js'
import { userEvents } from './migrations/2026-12-02-user-events.js'
import { eventsWithoutAgeIndex } from './migrations/2026-12-02-user-events-without-age-index.js'
import { eventTickets } from './migrations/2026-12-07-event-tickets.js'
import { userOwners } from './migrations/2026-12-07-user-owners.js'

/** Every migration, by name, in the order they run. */
export function migrations (dialect: Dialect): Record<string, Migration> {
  return {
    '2026-11-22-create-users': createUsers(dialect),
    '2026-11-24-count-users': countUsers(dialect),
    '2026-11-24-idempotency-keys': idempotencyKeys(),
    '2026-11-25-bound-user-ids': boundUserIds(dialect),
    '2026-11-26-keyed-users-by-age': keyedUsersByAge(),
    '2026-11-29-changing-users': changingUsers(dialect),
    '2026-11-29-readiness-probe': readinessProbe(dialect),
    '2026-12-02-erased-keys-without-fingerprints': erasedKeysWithoutFingerprints(dialect),
    '2026-12-02-searchable-users': searchableUsers(dialect),
    '2026-12-02-user-events': userEvents(dialect),
    '2026-12-02-user-events-without-age-index': eventsWithoutAgeIndex(),
    '2026-12-07-event-tickets': eventTickets(),
    '2026-12-07-user-owners': userOwners()
  }
}

export interface MigrationOutcome {
  /** The migrations this run applied. */
  applied: string[]
  /** Migrations the database has run that this version does not know: a newer version ran them. */
  newer: string[]
}

/** What start-up logs, at `warn`, when the database was migrated by a newer version. */
export const NEWER_SCHEMA = 'the database was migrated by a newer version of the service: this version runs on it as it is, without migrating'

/**
 * Leaves a schema a newer version migrated further as it is, if it has every migration this code
 * knows: migrations only add, so an older version runs on it, where Kysely's migrator would refuse
 * it. With `apply` false it only checks that nothing this version needs is missing.
 */
export async function migrateToLatest (db: Kysely<any>, dialect: Dialect, { apply = true } = {}): Promise<MigrationOutcome> {
  const migrate = async (db: Kysely<any>): Promise<MigrationOutcome> => {
    const schema = await currentSchema(db, dialect)
    const known = migrations(dialect)
    const executed = await executedMigrations(db, dialect, schema)
    const newer = executed.filter((name) => !(name in known))
    const missing = Object.keys(known).filter((name) => !executed.includes(name))
    if (!apply) {
      if (missing.length > 0) {
        throw new Error(`MIGRATE is off and the database has not run ${missing.join(', ')}: run \`npm run migrate\` with this version first, or start it with MIGRATE=on`)
      }
      return { applied: [], newer }
    }
    if (newer.length > 0) {
      if (missing.length > 0) {
        throw new Error(`the database has run migrations this version does not know (${newer.join(', ')}) but not ${missing.join(', ')}, ` +
          'which it needs: migrate it with a version that knows them all')
      }
      return { applied: [], newer }
    }
    const provider: MigrationProvider = { getMigrations: async () => known }
    const migrator = new Migrator({ db, provider, migrationTableSchema: schema })
    const { error, results } = await migrator.migrateToLatest()
    if (error !== undefined) throw error
    return { applied: (results ?? []).filter((result) => result.status === 'Success').map((result) => result.migrationName), newer: [] }
  }
  if (!apply) return await migrate(db)
  if (dialect === 'sqlite') return await underSqliteWriteLock(db, migrate)
  // Kysely's migrator lists the tables of every schema to find its own: a schema or table that
  // another process drops meanwhile fails the listing (3F000, 42P01); the next try does not see it.
  for (let attempt = 1; ; attempt++) {
    try {
      return await underPostgresLock(db, migrate)
    } catch (error) {
      if (attempt === MIGRATION_TRIES || !DROPPED_WHILE_LISTED.has((error as { code?: unknown }).code)) throw error
    }
  }
}

/** Tries of a PostgreSQL migration that failed on a schema or table dropped while it ran. */
const MIGRATION_TRIES = 3
/** PostgreSQL's codes for a schema (invalid_schema_name) and a table (undefined_table) not found. */
const DROPPED_WHILE_LISTED = new Set<unknown>(['3F000', '42P01'])

/** The names of the migrations the database records as run; none on a new database. */
async function executedMigrations (db: Kysely<any>, dialect: Dialect, schema: string | undefined): Promise<string[]> {
  const table = dialect === 'postgres'
    ? sql<{ found: boolean | number }>`select to_regclass(format('%I.%I', ${schema}::text, ${DEFAULT_MIGRATION_TABLE}::text)) is not null as found`
    : sql<{ found: boolean | number }>`select count(*) > 0 as found from sqlite_master where type = 'table' and name = ${DEFAULT_MIGRATION_TABLE}`
  const [exists] = (await table.execute(db)).rows
  if (exists === undefined || !exists.found) return []
  const rows = await (schema === undefined ? db : db.withSchema(schema)).selectFrom(DEFAULT_MIGRATION_TABLE).select('name').execute()
  return rows.map((row: { name: string }) => row.name)
}

/** Any fixed number, the same in every instance: the key of the advisory lock below. */
export const MIGRATION_LOCK_KEY = 7_431_998_216_553_012n

/**
 * How long a migration waits for another process's lock: long enough for another instance's
 * migration, short enough that start-up fails with one line, and below the pool's query timeout.
 */
const MIGRATION_LOCK_WAIT_MS = 4000

/**
 * Runs the migration in one PostgreSQL transaction under a transaction-scoped advisory lock, which
 * holds behind PgBouncer and ends with the transaction
 * (docs/decisions/0003-migration-advisory-lock.md).
 */
async function underPostgresLock<T> (db: Kysely<any>, work: (db: Kysely<any>) => Promise<T>): Promise<T> {
  return await db.transaction().execute(async (transaction) => {
    // Also spares the service's queries a migration statement queued for a table's lock, which
    // would make every later query of that table queue behind it.
    await sql`set local lock_timeout = ${sql.lit(MIGRATION_LOCK_WAIT_MS)}`.execute(transaction)
    try {
      await sql`select pg_advisory_xact_lock(${sql.lit(MIGRATION_LOCK_KEY)})`.execute(transaction)
    } catch (error) {
      if ((error as { code?: unknown }).code !== '55P03') throw error
      throw new Error(`another process has held the migration lock for ${MIGRATION_LOCK_WAIT_MS / 1000} s ` +
        '(an instance or npm run migrate migrating this database): start again once it is done')
    }
    return await work(transaction)
  })
}

/**
 * Runs the migration in one SQLite transaction that holds the write lock from its start (BEGIN
 * IMMEDIATE): another process waits, then finds the schema up to date; a failure rolls back whole.
 */
async function underSqliteWriteLock<T> (db: Kysely<any>, work: (db: Kysely<any>) => Promise<T>): Promise<T> {
  return await db.connection().execute(async (connection) => {
    await sql`begin immediate`.execute(connection)
    try {
      const result = await work(connection)
      await sql`commit`.execute(connection)
      return result
    } catch (error) {
      // After some errors (a full disk, an I/O error) SQLite has rolled back by itself, and
      // ROLLBACK fails with "no transaction is active": the error to report is the first.
      await sql`rollback`.execute(connection).catch(() => {})
      throw error
    }
  })
}

/**
 * On PostgreSQL, the schema the service works in, so that Kysely never takes another schema's
 * migration table for its own.
 */
async function currentSchema (db: Kysely<any>, dialect: Dialect): Promise<string | undefined> {
  if (dialect !== 'postgres') return undefined
  const { rows } = await sql<{ schema: string | null }>`select current_schema() as schema`.execute(db)
  const schema = rows[0]?.schema
  if (schema == null) throw new Error('no schema of search_path exists; create it or fix search_path')
  return schema
}
