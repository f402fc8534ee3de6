/**
 * Tells a database that cannot do its work now (unreachable, too busy, out of disk, its file
 * gone) from a query that is wrong. The first is the client's to retry (503); the second is
 * our bug (500). Only errors that come from the database are sorted here, so that the same
 * codes from elsewhere (a client that hangs up mid-upload is an ECONNRESET too) are never
 * taken for an outage.
 */
const UNREACHABLE_CODES = new Set([
  'ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', 'EPIPE',
  // PostgreSQL: shutting down, crashed, starting up, too many connections, disk full.
  '57P01', '57P02', '57P03', '53300', '53100'
])

/**
 * SQLite, by the prefix of its extended codes: another process holds the lock past the wait
 * (BUSY), the disk is full (FULL), the file cannot be written or opened (READONLY, CANTOPEN,
 * IOERR), or it is no longer a database (CORRUPT, NOTADB); and the service's own finding that
 * the file was deleted or replaced under it (FILE_CHANGED).
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
  if (typeof code === 'string' && (UNREACHABLE_CODES.has(code) || code.startsWith('08') || SQLITE_UNAVAILABLE.test(code))) return true
  return UNREACHABLE_MESSAGES.test(error.message)
}

/** The error as callers see it: a `DatabaseUnavailableError`, or the error itself. */
export function classified (error: unknown): unknown {
  return error instanceof Error && !(error instanceof DatabaseUnavailableError) && isUnavailable(error)
    ? new DatabaseUnavailableError(error)
    : error
}

/**
 * Runs a piece of work against the database; an error that means the database is unavailable
 * comes out as a `DatabaseUnavailableError`, any other as it is.
 */
export async function fromDatabase<T> (work: () => Promise<T>): Promise<T> {
  try {
    return await work()
  } catch (error) {
    throw classified(error)
  }
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
 * One log line when the database becomes unavailable, naming why, and one when it is back,
 * saying how many operations failed meanwhile: an outage under load is two lines, not one a
 * request.
 */
export function outageLog (log: OutageLogger) {
  let failures = 0
  return {
    async track<T> (operation: Promise<T>): Promise<T> {
      try {
        const result = await operation
        if (failures > 0) {
          log.info({ failedOperations: failures }, 'database available again')
          failures = 0
        }
        return result
      } catch (error) {
        if (error instanceof DatabaseUnavailableError && failures++ === 0) {
          log.error({ err: error.cause }, error.message)
        }
        throw error
      }
    }
  }
}
