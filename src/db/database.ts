/**
 * Opens the configured database as Kysely over a connection of this thread. `npm run migrate`, the
 * tests and the SQLite worker use it directly; the service goes through `queries.ts`, which keeps
 * SQLite's waits off the event loop.
 */
import { accessSync, constants, mkdirSync } from 'node:fs'
import { dirname } from 'node:path'
import { createRequire } from 'node:module'
import { setTimeout as sleep } from 'node:timers/promises'
import type SQLite from 'better-sqlite3'
import type pg from 'pg'
import { Kysely, PostgresAdapter, PostgresDialect, SqliteDialect, type SqliteDatabase } from 'kysely'
import type { DatabaseConfig } from '../config.js'
import type { Database } from './schema.js'

export type Dialect = DatabaseConfig['dialect']

const require = createRequire(import.meta.url)

export interface PoolStats {
  open: number
  idle: number
  waiting: number
}

export interface DatabaseHandle {
  db: Kysely<Database>
  /** PostgreSQL's pool, under `db` too; SQLite has none. */
  postgres?: {
    /** Runs one statement on a connection of the pool; resolves with its rows. */
    run: (sql: string, parameters: readonly unknown[]) => Promise<unknown[]>
    /** Connections of the pool right now. */
    poolStats: () => PoolStats
  }
}

/**
 * How long a request may wait for PostgreSQL, for a connection and for a query's answer, before it
 * is answered 503: our queries take milliseconds, so these bound outages.
 */
const CONNECT_TIMEOUT_MS = 3000
const QUERY_TIMEOUT_MS = 5000

/**
 * The server ends a statement after this long unless the role sets less, so that a statement the
 * service has given up on (waiting on a lock, say) does not go on holding a server process.
 */
const STATEMENT_TIMEOUT_MS = 4500

/**
 * PostgreSQL as Kysely speaks it, without Kysely's migration lock
 * (docs/decisions/0003-migration-advisory-lock.md).
 */
class PostgresWithoutMigrationLock extends PostgresDialect {
  override createAdapter (): PostgresAdapter {
    return new (class extends PostgresAdapter {
      override async acquireMigrationLock (): Promise<void> {}
      override async releaseMigrationLock (): Promise<void> {}
    })()
  }
}

/** PostgreSQL's SQLSTATE for a write refused because the session takes none. */
const READ_ONLY_TRANSACTION = '25006'

/**
 * A connection refused because there are as many as allowed, by PostgreSQL (53300) or by PgBouncer,
 * which says so only in words.
 */
function isTooManyConnections (error: unknown): boolean {
  const { code, message } = error as { code?: unknown, message?: unknown }
  return code === '53300' || (code === '08P01' && message === 'no more connections allowed (max_client_conn)')
}

/** While the server refuses this instance more connections, how often it is asked for one more. */
const MORE_CONNECTIONS_EVERY_MS = 1000

/**
 * Lends the pool's connections; while the server refuses more, a request waits for one this
 * instance has, as for a full pool, and one more is asked for every MORE_CONNECTIONS_EVERY_MS.
 */
function connectionLender (pool: pg.Pool, size: number, refused: (error: Error) => void) {
  let limit = size
  let lent = 0
  let askedForMoreAt = 0
  const waiting: Array<() => void> = []

  function giveBack (): void {
    lent--
    if (lent < limit && waiting.length > 0) {
      lent++
      waiting.shift()!()
    }
  }

  async function take (): Promise<void> {
    if (limit < size && performance.now() - askedForMoreAt >= MORE_CONNECTIONS_EVERY_MS) {
      limit++
      askedForMoreAt = performance.now()
    }
    if (lent < limit) {
      lent++
      return
    }
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        waiting.splice(waiting.indexOf(lend), 1)
        reject(new Error('timeout exceeded when trying to connect'))
      }, CONNECT_TIMEOUT_MS)
      function lend (): void {
        clearTimeout(timer)
        resolve()
      }
      waiting.push(lend)
    })
  }

  return {
    waiting: () => waiting.length,
    /** A connection of the pool; `giveBack` once it is released. */
    async connect (): Promise<pg.PoolClient> {
      for (;;) {
        await take()
        try {
          return await pool.connect()
        } catch (error) {
          giveBack()
          const tooMany = isTooManyConnections(error)
          if (tooMany) {
            limit = Math.max(1, pool.totalCount)
            askedForMoreAt = performance.now()
            refused(error as Error)
          }
          // With none open, there is no connection to wait for.
          if (!tooMany || pool.totalCount === 0) throw error
        }
      }
    },
    giveBack
  }
}

export interface DatabaseOptions {
  /**
   * Told when an idle pooled connection breaks; the pool drops it and opens a new one when needed.
   */
  onConnectionError?: (error: Error) => void
  /** Told when the server refuses the pool a connection for having too many: it goes on with those it has. */
  onConnectionRefused?: (error: Error) => void
  /**
   * For `npm run migrate`: statements run as long as they need, since one migration may take
   * minutes.
   */
  unbounded?: boolean
}

export async function createDatabase (config: DatabaseConfig, { onConnectionError = () => {}, onConnectionRefused = () => {}, unbounded = false }: DatabaseOptions = {}): Promise<DatabaseHandle> {
  if (config.dialect === 'postgres') {
    // Loaded only here: on SQLite, the default, start-up skips it.
    const { DatabaseError, Pool }: typeof pg = require('pg')
    const pool = new Pool({
      connectionString: config.connectionString,
      max: config.poolSize,
      connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
      ...(!unbounded && { query_timeout: QUERY_TIMEOUT_MS }),
      keepAlive: true
    })
    // A connection that drops while idle is reported by the pool; without a listener, that
    // report would crash the process.
    pool.on('error', onConnectionError)
    pool.on('connect', (client) => {
      // One that drops while checked out (between a query and its release) is reported by the
      // client itself, which the pool leaves unlistened then. Its query, if any, has failed
      // already and is answered 503; the pool discards the broken client on release.
      client.on('error', () => {})
      if (unbounded) return
      // Queued ahead of the query the connection was opened for, which runs after it either way.
      client.query(`select set_config('statement_timeout', $1, false) from pg_settings
        where name = 'statement_timeout' and (setting = '0' or setting::int > $1::int)`, [String(STATEMENT_TIMEOUT_MS)]).catch(() => {})
    })
    const connections = connectionLender(pool, config.poolSize, onConnectionRefused)
    return {
      db: new Kysely<Database>({ dialect: new PostgresWithoutMigrationLock({ pool }) }),
      postgres: {
        /**
         * A connection whose statement failed without the server's answer (a timeout, a network
         * error), or that a server refused a write for being read-only, is closed, not given back
         * (docs/decisions/0002-postgres-pool-closes-broken-connections.md).
         */
        async run (sql, parameters) {
          const client = await connections.connect()
          let broken: Error | undefined
          try {
            return (await client.query(sql, [...parameters])).rows
          } catch (error) {
            if (!(error instanceof DatabaseError) || error.code === READ_ONLY_TRANSACTION) broken = error as Error
            throw error
          } finally {
            client.release(broken)
            connections.giveBack()
          }
        },
        poolStats: () => ({ open: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount + connections.waiting() })
      }
    }
  }
  return { db: sqliteKysely(await openSqliteFile(config.filename)) }
}

/** Kysely over a SQLite connection of this thread. */
export function sqliteKysely (database: SQLite.Database): Kysely<Database> {
  return new Kysely<Database>({ dialect: new SqliteDialect({ database: reusingStatements(database) }) })
}

/** The size the WAL is cut back to when it starts again, above the 4 MB it reaches between checkpoints. */
const WAL_SIZE_LIMIT_BYTES = 16 * 1024 * 1024

/** How long SQLite waits for another connection's lock, unless told otherwise. */
const BUSY_TIMEOUT_MS = 5000

/**
 * Asks for WAL mode, trying again while another process opening a new file at the same moment holds
 * it: SQLite refuses the switch at once then, without waiting.
 */
async function switchToWal (database: SQLite.Database): Promise<void> {
  const giveUpAt = performance.now() + BUSY_TIMEOUT_MS
  for (;;) {
    try {
      database.pragma('journal_mode = WAL')
      return
    } catch (error) {
      if ((error as { code?: unknown }).code !== 'SQLITE_BUSY' || performance.now() > giveUpAt) throw error
      await sleep(10)
    }
  }
}

/**
 * Opens SQLite with the service's settings: a busy timeout, WAL, synchronous=FULL so that a commit
 * returns once on disk, and a journal_size_limit that gives back what a held read made the WAL
 * grow.
 */
export async function openSqliteFile (filename: string, { mustExist = false } = {}): Promise<SQLite.Database> {
  const BetterSqlite3: typeof SQLite = require('better-sqlite3')
  if (filename !== ':memory:') {
    if (!mustExist) mkdirSync(dirname(filename), { recursive: true })
    refuseUnwritable(filename)
  }
  const database = new BetterSqlite3(filename, { fileMustExist: mustExist })
  database.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`)
  if (filename !== ':memory:') await switchToWal(database)
  database.pragma('synchronous = FULL')
  database.pragma(`journal_size_limit = ${WAL_SIZE_LIMIT_BYTES}`)
  return database
}

/**
 * Refuses a database this process cannot write, saying why: SQLite would open it read-only without
 * a word, and every write would fail.
 */
function refuseUnwritable (filename: string): void {
  const folder = dirname(filename)
  const folderProblem = writeProblem(folder)
  if (folderProblem !== undefined) throw new Error(`the folder ${folder} ${folderProblem}: SQLite creates files beside the database (its -wal and -shm)`)
  const fileProblem = writeProblem(filename)
  if (fileProblem !== undefined) throw new Error(`${filename} ${fileProblem}: SQLite would open it read-only, and every write would fail`)
}

/** Why this process may not write `path`; nothing when it may, or when nothing is there yet (SQLite makes the file). */
function writeProblem (path: string): string | undefined {
  try {
    accessSync(path, constants.W_OK)
    return undefined
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === 'ENOENT') return undefined
    return code === 'EROFS' ? 'is on a read-only filesystem' : `is not writable by this process (user id ${process.getuid?.() ?? 'unknown'}, ${code})`
  }
}

/**
 * Each statement is prepared once and reused, since preparing parses the SQL again; better-sqlite3
 * runs one statement to completion before the next.
 */
function reusingStatements (database: SQLite.Database): SqliteDatabase {
  const statements = new Map<string, ReturnType<SqliteDatabase['prepare']>>()
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
