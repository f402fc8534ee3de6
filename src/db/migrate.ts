/**
 * Brings the schema to the latest version. Kysely's migrator records what ran and takes a
 * lock while it runs, so concurrent start-ups of several instances migrate only once.
 */
import { Migrator, type Kysely, type Migration, type MigrationProvider } from 'kysely'
import type { Dialect } from './database.js'
import { createUsers } from './migrations/2026-11-22-create-users.js'

function migrationsFor (dialect: Dialect): Record<string, Migration> {
  return {
    '2026-11-22-create-users': createUsers(dialect)
  }
}

export async function migrateToLatest (db: Kysely<any>, dialect: Dialect): Promise<string[]> {
  const provider: MigrationProvider = { getMigrations: async () => migrationsFor(dialect) }
  const { error, results } = await new Migrator({ db, provider }).migrateToLatest()
  if (error !== undefined) throw error
  return (results ?? []).filter((result) => result.status === 'Success').map((result) => result.migrationName)
}
