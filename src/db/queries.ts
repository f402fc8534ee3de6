/**
 * Where queries run: repositories build them with Kysely and hand them, compiled, to `read` or
 * `write`; on PostgreSQL they go through the pool, on SQLite to a worker thread. A write resolves
 * once committed to disk.
 */
import type { CompiledQuery, Kysely } from 'kysely'
import type { DatabaseConfig } from '../config.js'
import { createDatabase, type PoolStats } from './database.js'
import { fromDatabase, outageLog, type OutageLogger } from './errors.js'
import { migrateToLatest, type MigrationOutcome } from './migrate.js'
import type { Database } from './schema.js'
import { openSqliteQueries } from './sqlite-queries.js'

export interface QueryRunner {
  /** Builds and compiles queries for this database; the runner's methods run them. */
  readonly db: Kysely<Database>
  /** Runs a query that reads. */
  read: <Row>(query: CompiledQuery<Row>) => Promise<Row[]>
  /** Runs two queries that read, on SQLite in one snapshot (a page and its total, say). */
  readTogether: <A, B>(first: CompiledQuery<A>, second: CompiledQuery<B>) => Promise<[A[], B[]]>
  /** Runs a query that writes; resolves once it is committed to the disk. */
  write: <Row>(query: CompiledQuery<Row>) => Promise<Row[]>
  /** Resolves when the database can do its work now (readiness); rejects otherwise. */
  check: () => Promise<void>
  close: () => Promise<void>
  /** Connections of the PostgreSQL pool right now; SQLite has no pool. */
  poolStats?: () => PoolStats
  /** What opening did to the schema: the migrations it applied, and any a newer version had run. */
  readonly migrations: MigrationOutcome
}

export async function openQueryRunner (config: DatabaseConfig, log: OutageLogger): Promise<QueryRunner> {
  const runner = config.dialect === 'sqlite' ? await openSqliteQueries(config.filename, log) : await openPostgresQueries(config, log)
  return withOutageLog(runner, log)
}

/** PostgreSQL's SQLSTATE for a session it ended for being idle too long. */
const IDLE_SESSION_TIMEOUT = '57P05'

/** How long the losses of idle connections are gathered into one log line. */
const CONNECTION_LOSSES_LOG_MS = 1000

/**
 * Idle connections the server closed, in one line a second at most, so that a restart is one line;
 * closings by idle_session_timeout are policy, logged at `info`.
 */
function connectionLossesLog (log: OutageLogger): (error: Error) => void {
  let first: Error | undefined
  let connections = 0
  return (error) => {
    connections++
    if (first !== undefined) return
    first = error
    setTimeout(() => {
      if ((first as { code?: unknown }).code === IDLE_SESSION_TIMEOUT) log.info({ connections }, 'the database closed idle connections (idle_session_timeout); new ones open when needed')
      else log.warn({ connections, err: first }, 'database connections lost; new ones open when needed')
      first = undefined
      connections = 0
    }, CONNECTION_LOSSES_LOG_MS).unref()
  }
}

/** How often, at most, the server's refusals of more connections are logged while they go on. */
const CONNECTION_REFUSALS_LOG_MS = 60_000

/**
 * The server's refusals of more connections, in one line a minute at most, written once the
 * connections being opened have settled, to say how many there are.
 */
function connectionRefusalsLog (log: OutageLogger, openConnections: () => number): (error: Error) => void {
  let loggedAt: number | undefined
  return (error) => {
    if (loggedAt !== undefined && performance.now() - loggedAt < CONNECTION_REFUSALS_LOG_MS) return
    loggedAt = performance.now()
    setTimeout(() => {
      const open = openConnections()
      const meanwhile = open > 0 ? `it goes on with the ${open} it has, and requests wait for one of them` : 'it has none, and requests fail with 503 until it gets one'
      log.warn({ open, err: error }, `The database refuses this instance more connections (${error.message}): ${meanwhile}; the instances' DATABASE_POOL_SIZE together is more than it allows`)
    }, CONNECTION_LOSSES_LOG_MS).unref()
  }
}

async function openPostgresQueries (config: DatabaseConfig, log: OutageLogger): Promise<QueryRunner> {
  const { db, postgres } = await createDatabase(config, {
    onConnectionError: connectionLossesLog(log),
    onConnectionRefused: connectionRefusalsLog(log, () => postgres!.poolStats().open)
  })
  const { run: runStatement, poolStats } = postgres!
  let migrations: MigrationOutcome
  try {
    migrations = await migrateToLatest(db, 'postgres')
  } catch (error) {
    await db.destroy()
    throw error
  }
  // Kysely builds and compiles the queries (and runs the migrations); the pool runs them, so
  // that a connection the network has dropped is discarded (database.ts).
  const run = async <Row>(query: CompiledQuery<Row>): Promise<Row[]> =>
    await fromDatabase(async () => await runStatement(query.sql, query.parameters) as Row[])
  return {
    db,
    read: run,
    // Each in its own statement, as every PostgreSQL query here runs: READ COMMITTED.
    readTogether: async (first, second) => await Promise.all([run(first), run(second)]),
    write: run,
    check: async () => { await run(db.selectNoFrom((eb) => eb.lit(1).as('one')).compile()) },
    close: async () => await db.destroy(),
    poolStats,
    migrations
  }
}

/** One log line as an outage starts and one as it ends, for reads and for writes apart. */
function withOutageLog (runner: QueryRunner, log: OutageLogger): QueryRunner {
  const reads = outageLog(log, 'reads')
  const writes = outageLog(log, 'writes')
  return {
    ...runner,
    read: async (query) => await reads.track(runner.read(query)),
    readTogether: async (first, second) => await reads.track(runner.readTogether(first, second)),
    write: async (query) => await writes.track(runner.write(query)),
    check: async () => { await reads.track(runner.check()) }
  }
}
