/**
 * Every query observed. Its failure is told apart: a database that cannot work now (503, the
 * client's to retry) from a wrong query (500, our bug), every id taken, a unique value taken. Each
 * outage is logged once as it starts and once as it ends, reads and writes apart; with tracing on,
 * each query is a child span of its request. Only errors that come from the database are sorted
 * here, so a client's ECONNRESET is never an outage.
 */
import { SpanKind, SpanStatusCode, trace } from '@opentelemetry/api'
import type { CompiledQuery, DatabaseConnection, Dialect, Driver } from 'kysely'

const UNREACHABLE_CODES = new Set([
  'ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', 'EPIPE',
  // No descriptor is left for a new connection: the process's open-file limit, or the machine's.
  'EMFILE', 'ENFILE',
  // PostgreSQL: it takes no writes now (a standby, or default_transaction_read_only set for
  // maintenance); another transaction is in the way, and PostgreSQL's own advice is to retry
  // (a serialization failure, a deadlock, a lock not granted within lock_timeout).
  '25006', '40001', '40P01', '55P03'
])

/**
 * PostgreSQL's SQLSTATE classes that mean "not now", whatever the query: 08 connection, 28 login
 * refused, 53 resources, 57 operator intervention, 58 system error; and 3D000, the database gone.
 */
const POSTGRES_UNAVAILABLE = /^((08|28|53|57|58)[0-9A-Z]{3}|3D000)$/

/**
 * SQLite's extended codes that mean "not now": BUSY, FULL, READONLY, CANTOPEN, IOERR, CORRUPT,
 * NOTADB, and the service's own FILE_CHANGED.
 */
const SQLITE_UNAVAILABLE = /^SQLITE_(BUSY|LOCKED|FULL|READONLY|CANTOPEN|IOERR|CORRUPT|NOTADB|FILE_CHANGED)/

// node-postgres reports lost connections and its own timeouts by message only.
const UNREACHABLE_MESSAGES = /Connection terminated|timeout exceeded when trying to connect|Query read timeout|connection error|Client was closed/

/** The database cannot do its work now; `cause` is what it said. */
export class DatabaseUnavailableError extends Error {
  override name = 'DatabaseUnavailableError'
  constructor (cause: Error) {
    super(`database unavailable: ${cause.message}`, { cause })
  }
}

function isUnavailable (error: Error): boolean {
  const code = (error as { code?: unknown }).code
  if (typeof code === 'string' && (UNREACHABLE_CODES.has(code) || POSTGRES_UNAVAILABLE.test(code) || SQLITE_UNAVAILABLE.test(code))) return true
  return UNREACHABLE_MESSAGES.test(error.message)
}

/**
 * Every id is taken: PostgreSQL's identity has reached its end (2200H), or SQLite's bound refused
 * the insert.
 */
export class UserIdsExhaustedError extends Error {
  override name = 'UserIdsExhaustedError'
  constructor (cause: Error) {
    super(`no user ids left: ${cause.message}`, { cause })
  }
}

function isIdsExhausted (error: Error): boolean {
  const code = (error as { code?: unknown }).code
  return code === '2200H' || (code === 'SQLITE_CONSTRAINT_TRIGGER' && error.message === 'user ids exhausted')
}

/** The error as callers see it: a `DatabaseUnavailableError`, a `UserIdsExhaustedError`, or the error itself. */
export function classified (error: unknown): unknown {
  if (!(error instanceof Error) || error instanceof DatabaseUnavailableError || error instanceof UserIdsExhaustedError) return error
  if (isUnavailable(error)) return new DatabaseUnavailableError(error)
  if (isIdsExhausted(error)) return new UserIdsExhaustedError(error)
  return error
}

/** The database refused a row because a unique index already holds its value. */
export function isUniqueViolation (error: unknown): boolean {
  const code = (error as { code?: unknown } | undefined)?.code
  return code === '23505' || code === 'SQLITE_CONSTRAINT_UNIQUE'
}

/** The part of a pino logger the storage layer uses. */
export interface OutageLogger {
  error: (details: object, message: string) => void
  warn: (details: object, message: string) => void
  info: (details: object, message: string) => void
}

/**
 * One log line as the database becomes unavailable and one as it is back, for reads and writes
 * apart, since a database may refuse only writes: an outage under load is two lines, not one a
 * request.
 */
export interface OutageLog {
  /** The operation's result; a failure comes out classified, and counts toward the outage if it is one. */
  track: <T>(operation: Promise<T>) => Promise<T>
  /** Whether the last of these operations failed because the database cannot work now. */
  failing: () => boolean
}

export function outageLog (log: OutageLogger, operations: 'reads' | 'writes'): OutageLog {
  let failures = 0
  const succeeded = <T>(result: T): T => {
    if (failures > 0) {
      log.info({ operations, failedOperations: failures }, 'database available again')
      failures = 0
    }
    return result
  }
  const failed = (error: unknown): never => {
    const seen = classified(error)
    if (seen instanceof DatabaseUnavailableError && failures++ === 0) log.error({ operations, err: seen.cause }, seen.message)
    throw seen
  }
  return {
    track: (operation) => operation.then(succeeded, failed),
    failing: () => failures > 0
  }
}

const tracer = trace.getTracer('user-records-service/db')

/** Whether a query only reads: a SELECT, or raw SQL that begins with one. */
const isRead = (query: CompiledQuery): boolean =>
  query.query.kind === 'SelectQueryNode' || (query.query.kind === 'RawNode' && /^\s*select\b/i.test(query.sql))

export interface Observation {
  /** The outages of reads and of writes, each logged as it starts and as it ends. */
  outages: { reads: OutageLog, writes: OutageLog }
  /** The database's name in spans, when tracing is on. */
  traced?: 'sqlite' | 'postgresql' | undefined
}

/**
 * Runs a query as observed: a failure meaning the database cannot work now comes out as a
 * `DatabaseUnavailableError` and counts toward its outage, and with tracing on the query is a span.
 * `run` is told whether the query reads or writes, as decided here.
 */
export function observeQuery<T> ({ outages, traced }: Observation, query: CompiledQuery, run: (operation: 'read' | 'write') => Promise<T>): Promise<T> {
  const operation = isRead(query) ? 'read' : 'write'
  const outage = operation === 'read' ? outages.reads : outages.writes
  if (traced === undefined) return outage.track(run(operation))
  return tracer.startActiveSpan(`db.${operation}`, {
    kind: SpanKind.CLIENT,
    attributes: { 'db.system.name': traced, 'db.query.text': query.sql }
  }, async (span) => {
    try {
      return await outage.track(run(operation))
    } catch (error) {
      span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) })
      throw error
    } finally {
      span.end()
    }
  })
}

/** A dialect whose connections are taken per query and observed, so that a connection that cannot be had counts as an outage. */
export function observed (dialect: Dialect, observation: Observation): Dialect {
  async function execute<R> (connection: () => Promise<DatabaseConnection>, query: CompiledQuery) {
    return await observeQuery(observation, query, async () => await (await connection()).executeQuery<R>(query))
  }

  /** The driver's connections, each taken only when its first query runs. */
  function watchedDriver (driver: Driver): Driver {
    const own = new WeakMap<DatabaseConnection, DatabaseConnection>()
    const ownOf = async (watched: DatabaseConnection) => {
      let connection = own.get(watched)
      if (connection === undefined) {
        connection = await driver.acquireConnection()
        own.set(watched, connection)
      }
      return connection
    }
    return {
      init: async (options) => await driver.init(options),
      async acquireConnection () {
        const watched: DatabaseConnection = {
          executeQuery: async (query) => await execute(async () => await ownOf(watched), query),
          streamQuery: () => { throw new Error('rows are not streamed here') }
        }
        return watched
      },
      beginTransaction: async (watched, settings) => await driver.beginTransaction(await ownOf(watched), settings),
      commitTransaction: async (watched) => await driver.commitTransaction(await ownOf(watched)),
      rollbackTransaction: async (watched) => await driver.rollbackTransaction(await ownOf(watched)),
      async releaseConnection (watched, options) {
        const connection = own.get(watched)
        if (connection !== undefined) await driver.releaseConnection(connection, options)
      },
      destroy: async (options) => await driver.destroy(options)
    }
  }

  return {
    createAdapter: () => dialect.createAdapter(),
    createDriver: () => watchedDriver(dialect.createDriver()),
    createIntrospector: (db) => dialect.createIntrospector(db),
    createQueryCompiler: () => dialect.createQueryCompiler()
  }
}
