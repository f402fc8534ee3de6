/**
 * PostgreSQL through Kysely's own dialect, over a pool of node-postgres's that closes a broken
 * connection instead of lending it again, waits for the connections it has while the server refuses
 * more, and bounds every statement (docs/decisions/0002-postgres-pool-closes-broken-connections.md).
 */
import { createRequire } from 'node:module'
import type pg from 'pg'
import { PostgresAdapter, PostgresDialect, type PostgresCursor, type PostgresPool, type PostgresPoolClient, type PostgresQueryResult } from 'kysely'
import type { DatabaseConfig } from '../config/config.js'

const require = createRequire(import.meta.url)

export interface PoolStats {
  open: number
  idle: number
  waiting: number
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

/** PostgreSQL's SQLSTATE for a write refused because the session takes none. */
const READ_ONLY_TRANSACTION = '25006'
/** PostgreSQL's SQLSTATE for a session it ended for idling (idle_session_timeout). */
const IDLE_SESSION_ENDED = '57P05'

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

export interface PostgresOptions {
  /** Told when an idle pooled connection breaks; the pool drops it and opens a new one when needed. */
  onConnectionError?: (error: Error) => void
  /** Told when the server refuses the pool a connection for having too many: it goes on with those it has. */
  onConnectionRefused?: (error: Error) => void
  /** For `npm run migrate`: statements run as long as they need, since one migration may take minutes. */
  unbounded?: boolean
}

type PostgresConfig = Extract<DatabaseConfig, { dialect: 'postgres' }>

/** Kysely's PostgreSQL dialect over the service's pool, and the pool's state for the metrics. */
export function postgresDialect (config: PostgresConfig, { onConnectionError = () => {}, onConnectionRefused = () => {}, unbounded = false }: PostgresOptions = {}) {
  // Loaded only here: on SQLite, the default, start-up skips it.
  const { DatabaseError, Pool }: typeof pg = require('pg')
  const pool = new Pool({
    connectionString: config.connectionString,
    max: config.poolSize,
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    ...(!unbounded && { query_timeout: QUERY_TIMEOUT_MS }),
    keepAlive: true
  })
  // A connection that drops while idle is reported by the pool; without a listener, that report
  // would crash the process.
  pool.on('error', onConnectionError)
  pool.on('connect', (client) => {
    // One that drops while lent is reported by the client itself, which the pool leaves unlistened
    // then; its query has failed already, and the connection is closed on release.
    client.on('error', () => {})
    if (unbounded) return
    // Queued ahead of the query the connection was opened for, which runs after it either way.
    client.query(`select set_config('statement_timeout', $1, false) from pg_settings
      where name = 'statement_timeout' and (setting = '0' or setting::int > $1::int)`, [String(STATEMENT_TIMEOUT_MS)]).catch(() => {})
  })
  const connections = connectionLender(pool, config.poolSize, onConnectionRefused)

  /** A connection whose statement failed without the server's answer, or was refused a write as read-only, is closed on release. */
  async function connect (): Promise<PostgresPoolClient> {
    let client: pg.PoolClient | undefined = await connections.connect()
    let broken = false
    let used = false
    /**
     * The first statement on a lent connection that the server ended for idling, before the pool
     * heard of it, never reached the server: it runs on a new connection, and costs no request.
     */
    async function run (sql: string, parameters: unknown[]): Promise<pg.QueryResult> {
      if (client === undefined) throw new Error('the connection was lost')
      const first = !used
      used = true
      try {
        return await client.query(sql, parameters)
      } catch (error) {
        if (!first || (error as { code?: unknown }).code !== IDLE_SESSION_ENDED) throw error
        client.release(true)
        client = undefined
        client = await pool.connect()
        return await client.query(sql, parameters)
      }
    }
    function query<R> (sql: string, parameters: readonly unknown[]): Promise<PostgresQueryResult<R>>
    function query<R> (cursor: PostgresCursor<R>): PostgresCursor<R>
    function query<R> (sql: string | PostgresCursor<R>, parameters: readonly unknown[] = []): Promise<PostgresQueryResult<R>> | PostgresCursor<R> {
      if (typeof sql !== 'string') throw new Error('rows are not streamed from PostgreSQL here')
      return run(sql, [...parameters]).then((result) => result as PostgresQueryResult<R>, (error: unknown) => {
        if (!(error instanceof DatabaseError) || error.code === READ_ONLY_TRANSACTION) broken = true
        throw error
      })
    }
    return {
      query,
      release (destroy?: boolean) {
        client?.release(broken || destroy === true)
        connections.giveBack()
      }
    }
  }
  // Ended once, by Kysely or by whoever closes storage, whichever comes first.
  let ended: Promise<void> | undefined
  const end = async () => { await (ended ??= pool.end()) }
  const kyselyPool: PostgresPool = { connect, end, options: pool.options }
  return {
    dialect: new PostgresWithoutMigrationLock({ pool: kyselyPool }),
    end,
    poolStats: (): PoolStats => ({ open: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount + connections.waiting() })
  }
}
