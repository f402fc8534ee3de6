/**
 * Tells a database that cannot work now (503, the client's to retry) from a wrong query (500, our
 * bug). Only errors that come from the database are sorted here, so a client's ECONNRESET is never
 * an outage.
 */
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
