/**
 * Opens the database named by the configuration, as Kysely over a connection of this thread:
 * a PostgreSQL pool, or a SQLite file. `npm run migrate`, the tests and the SQLite worker use
 * it directly; the service reaches its database through `queries.ts`, which keeps SQLite's
 * waits (for the disk, for another process's lock) off the event loop.
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
 * How long a request may wait for PostgreSQL before it is answered 503: for a connection
 * (when the pool is exhausted or the server unreachable) and for a query's answer (when
 * the network drops packets silently). Our queries take milliseconds; these bound outages.
 */
const CONNECT_TIMEOUT_MS = 3000
const QUERY_TIMEOUT_MS = 5000

/**
 * The server ends a statement of the service's after this long, unless the role sets less: a
 * statement the service has given up on (one waiting for a lock an ALTER TABLE holds, say)
 * would otherwise go on waiting on the server. Its connection is closed at QUERY_TIMEOUT_MS,
 * but PostgreSQL notices only when the statement ends, and each request meanwhile opens
 * another: waiting server processes add up until the lock is released, and a few instances
 * could take every connection the server allows (README, Outages). Ended by the
 * server, a statement fails with PostgreSQL's own error, before the client's timeout, and its
 * connection stays usable.
 */
const STATEMENT_TIMEOUT_MS = 4500

/**
 * PostgreSQL as Kysely speaks it, without Kysely's migration lock: migrate.ts takes a lock of
 * its own, and says why Kysely's would do harm.
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
 * A connection refused because there are as many as allowed: by PostgreSQL (SQLSTATE 53300:
 * its `max_connections`, or a role's or database's `CONNECTION LIMIT`), or by PgBouncer in
 * front of it (its `max_client_conn`), which says so only in words, under the code of a
 * protocol error.
 */
function isTooManyConnections (error: unknown): boolean {
  const { code, message } = error as { code?: unknown, message?: unknown }
  return code === '53300' || (code === '08P01' && message === 'no more connections allowed (max_client_conn)')
}

/** While the server refuses this instance more connections, how often it is asked for one more. */
const MORE_CONNECTIONS_EVERY_MS = 1000

/**
 * Lends the pool's connections, at most `size` at once, as the pool would; but while the
 * server or PgBouncer refuses more (other instances hold what it allows: N instances ×
 * DATABASE_POOL_SIZE past its max_connections, say), at most as many as this instance has
 * open. A request then waits for one of those, as for a pool that is full; the pool alone
 * would fail every request that asked it for a new connection. One more connection is asked
 * for every MORE_CONNECTIONS_EVERY_MS, so that the pool grows back as other instances close
 * theirs.
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
   * Told when an idle pooled connection breaks (the database went away); the pool drops it
   * and opens a new one when needed.
   */
  onConnectionError?: (error: Error) => void
  /** Told when the server refuses the pool a connection for having too many: it goes on with those it has. */
  onConnectionRefused?: (error: Error) => void
  /**
   * PostgreSQL's statements run as long as they need (within the role's own
   * `statement_timeout`, if it has one): for `npm run migrate`, where one migration may take
   * minutes on a large table. The service's are bounded, so that a request is answered.
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
         * A connection whose statement failed other than by the server's own answer (no answer
         * within QUERY_TIMEOUT_MS, a network error) is closed, not given back to the pool, which
         * opens a new one when needed. Kysely gives every connection back: one whose far end
         * vanished without a word (a failover moved the address, a host lost power) would then
         * fail every statement it was lent for, each after the timeout, for as long as the
         * kernel takes to give up on it (many minutes), while new connections would work.
         * So is one whose server refused a write for taking none (a standby, or a session
         * opened read-only): after a failover, a connection opened to the old address, or
         * while the cluster's name still gave it, would refuse every write for as long as the
         * pool kept it busy, while a new one reaches the primary.
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
 * Asks for WAL mode. The switch needs the file to itself, and SQLite refuses it at once, without waiting, while another process is
 * opening a new file too (two instances starting together); so it is tried again for as long
 * as SQLite would wait for a lock. Once a file is in WAL mode it stays so, and every later
 * opening finds it there.
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
 * Opens a SQLite database with the settings every connection of the service uses: a busy
 * timeout, so that `npm run migrate` and other instances can share the file; WAL, so that
 * readers run beside the writer; and synchronous=FULL, so that a commit returns only once it
 * is on the disk (in WAL mode, before other connections can see it). With `mustExist`, it
 * opens only a file that is there, and never creates one.
 *
 * The WAL is copied into the file and started again every thousand pages or so, except while
 * another connection reads a snapshot older than its end (a backup, a `sqlite3` shell left in
 * a transaction): then it grows with every write meanwhile, and SQLite would keep the file at
 * the largest size it ever reached. journal_size_limit gives that space back when the WAL
 * starts again.
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
 * Refuses a database this process cannot write, saying why. SQLite would open a file it may
 * not write read-only, without a word, so that a database restored by another user (root,
 * say) would start, answer reads and `/ready`, and refuse every write; and it needs to create
 * files beside the database (its -wal and -shm).
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
 * Kysely prepares every query anew, and preparing parses the SQL again; the service runs a
 * handful of parameterised statements, so each is prepared once and reused. (better-sqlite3
 * runs a statement to completion before the next, so sharing one is safe.)
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
