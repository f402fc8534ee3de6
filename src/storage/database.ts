/**
 * The configured database as Kysely over a connection of this thread, for `npm run migrate` and the
 * tests; the service opens it through storage.ts, which keeps SQLite's waits off the event loop.
 */
import { Kysely, SqliteDialect } from 'kysely'
import type { DatabaseConfig } from '../config/config.js'
import { postgresDialect, type PostgresOptions } from './postgres.js'
import type { Database } from './schema.js'
import { openSqliteFile } from './sqlite-file.js'

export type Dialect = DatabaseConfig['dialect']

export async function createDatabase (config: DatabaseConfig, options: PostgresOptions = {}): Promise<{ db: Kysely<Database> }> {
  if (config.dialect === 'postgres') return { db: new Kysely<Database>({ dialect: postgresDialect(config, options).dialect }) }
  return { db: new Kysely<Database>({ dialect: new SqliteDialect({ database: await openSqliteFile(config.filename) }) }) }
}
