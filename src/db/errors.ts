/**
 * Tells a database that cannot be reached, or is too busy to answer now, from a query that
 * is wrong. The first is the client's to retry (503); the second is our bug (500). Only
 * errors that come from the database are sorted here, so that the same codes from elsewhere
 * (a client that hangs up mid-upload is an ECONNRESET too) are never taken for an outage.
 */
const UNREACHABLE_CODES = new Set([
  'ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', 'EPIPE',
  // PostgreSQL: shutting down, crashed, starting up, too many connections.
  '57P01', '57P02', '57P03', '53300',
  // SQLite: another process holds the lock past busy_timeout.
  'SQLITE_BUSY'
])

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
  if (typeof code === 'string' && (UNREACHABLE_CODES.has(code) || code.startsWith('08'))) return true
  return UNREACHABLE_MESSAGES.test(error.message)
}

/**
 * Runs a piece of work against the database; an error that means the database is unavailable
 * comes out as a `DatabaseUnavailableError`, any other as it is.
 */
export async function fromDatabase<T> (work: () => Promise<T>): Promise<T> {
  try {
    return await work()
  } catch (error) {
    throw error instanceof Error && isUnavailable(error) ? new DatabaseUnavailableError(error) : error
  }
}
