/**
 * Opens the database named by the configuration. SQLite is the embedded default; PostgreSQL
 * lets many instances share one database. Everything above this module sees only
 * `Kysely<Database>`, so both run the same queries, migrations and tests.
 */
import { mkdirSync } from 'node:fs'
import { dirname } from 'node:path'
import SQLite from 'better-sqlite3'
import { Kysely, PostgresDialect, SqliteDialect } from 'kysely'
import pg from 'pg'
import type { DatabaseConfig } from '../config.js'
import type { Database } from './schema.js'

export type Dialect = DatabaseConfig['dialect']

export function createDatabase (config: DatabaseConfig): Kysely<Database> {
  if (config.dialect === 'postgres') {
    return new Kysely<Database>({
      dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: config.connectionString }) })
    })
  }
  return new Kysely<Database>({ dialect: new SqliteDialect({ database: openSqlite(config.filename) }) })
}

function openSqlite (filename: string): SQLite.Database {
  if (filename !== ':memory:') mkdirSync(dirname(filename), { recursive: true })
  const database = new SQLite(filename)
  // WAL lets readers run beside the writer; synchronous=FULL makes every commit reach the disk
  // before the 201 goes out; busy_timeout lets `npm run migrate` and the service share the file.
  database.pragma('journal_mode = WAL')
  database.pragma('synchronous = FULL')
  database.pragma('busy_timeout = 5000')
  return database
}
