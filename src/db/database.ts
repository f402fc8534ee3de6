/**
 * Opens the database named by the configuration. SQLite is the embedded default; PostgreSQL
 * lets many instances share one database. Everything above this module sees only
 * `Kysely<Database>`, so both run the same queries, migrations and tests.
 */
import { mkdirSync } from 'node:fs'
import { dirname } from 'node:path'
import SQLite from 'better-sqlite3'
import { Kysely, PostgresDialect, SqliteDialect, type SqliteDatabase } from 'kysely'
import pg from 'pg'
import type { DatabaseConfig } from '../config.js'
import type { Database } from './schema.js'

export type Dialect = DatabaseConfig['dialect']

export interface PoolStats {
  open: number
  idle: number
  waiting: number
}

export interface DatabaseHandle {
  db: Kysely<Database>
  /** Connections of the PostgreSQL pool right now; SQLite has no pool. */
  poolStats?: () => PoolStats
}

/**
 * How long a request may wait for PostgreSQL before it is answered 503: for a connection
 * (when the pool is exhausted or the server unreachable) and for a query's answer (when
 * the network drops packets silently). Our queries take milliseconds; these bound outages.
 */
export const CONNECT_TIMEOUT_MS = 3000
export const QUERY_TIMEOUT_MS = 5000

/**
 * @param onConnectionError told when an idle pooled connection breaks (the database went
 * away); the pool drops it and opens a new one when needed.
 */
export function createDatabase (config: DatabaseConfig, onConnectionError: (error: Error) => void = () => {}): DatabaseHandle {
  if (config.dialect === 'postgres') {
    const pool = new pg.Pool({
      connectionString: config.connectionString,
      max: config.poolSize,
      connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
      query_timeout: QUERY_TIMEOUT_MS,
      keepAlive: true
    })
    // A connection that drops while idle is reported by the pool; without a listener, that
    // report would crash the process.
    pool.on('error', onConnectionError)
    // One that drops while checked out (between a query and its release) is reported by the
    // client itself, which the pool leaves unlistened then. Its query, if any, has failed
    // already and is answered 503; the pool discards the broken client on release.
    pool.on('connect', (client) => client.on('error', () => {}))
    return {
      db: new Kysely<Database>({ dialect: new PostgresDialect({ pool }) }),
      poolStats: () => ({ open: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount })
    }
  }
  return { db: new Kysely<Database>({ dialect: new SqliteDialect({ database: reusingStatements(openSqlite(config.filename)) }) }) }
}

/**
 * Kysely prepares every query anew, and preparing parses the SQL again; the service runs a
 * handful of parameterised statements, so each is prepared once and reused. (better-sqlite3
 * runs a statement to completion before the next, so sharing one is safe.)
 */
function reusingStatements (database: SQLite.Database): SqliteDatabase {
  const statements = new Map<string, SQLite.Statement>()
  return {
    prepare (sql: string) {
      let statement = statements.get(sql)
      if (statement === undefined) {
        statement = database.prepare(sql)
        statements.set(sql, statement)
      }
      return statement
    },
    close: () => { database.close() }
  }
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
