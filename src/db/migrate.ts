/**
 * Brings the schema to the latest version. Kysely's migrator records what ran and takes a
 * lock while it runs, so concurrent start-ups of several instances migrate only once.
 */
import { sql, type Kysely } from 'kysely'
import { Migrator, type Migration, type MigrationProvider } from 'kysely/migration'
import type { Dialect } from './database.js'
import { createUsers } from './migrations/2026-11-22-create-users.js'

function migrationsFor (dialect: Dialect): Record<string, Migration> {
  return {
    '2026-11-22-create-users': createUsers(dialect)
  }
}

export async function migrateToLatest (db: Kysely<any>, dialect: Dialect): Promise<string[]> {
  const provider: MigrationProvider = { getMigrations: async () => migrationsFor(dialect) }
  const migrator = new Migrator({ db, provider, migrationTableSchema: await currentSchema(db, dialect) })
  const { error, results } = await migrator.migrateToLatest()
  if (error !== undefined) throw error
  return (results ?? []).filter((result) => result.status === 'Success').map((result) => result.migrationName)
}

/**
 * On PostgreSQL, the schema the service works in (the first of `search_path`). Kysely would
 * otherwise take another schema's migration table for its own, so that two services sharing
 * a database, each in its own schema, could not both migrate.
 */
async function currentSchema (db: Kysely<any>, dialect: Dialect): Promise<string | undefined> {
  if (dialect !== 'postgres') return undefined
  const { rows } = await sql<{ schema: string | null }>`select current_schema() as schema`.execute(db)
  const schema = rows[0]?.schema
  if (schema == null) throw new Error('no schema of search_path exists; create it or fix search_path')
  return schema
}
