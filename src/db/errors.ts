/**
 * Tells a database that cannot be reached, or is too busy to answer now, from a query that
 * is wrong. The first is the client's to retry (503); the second is our bug (500).
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

export function isDatabaseUnavailable (error: unknown): boolean {
  if (!(error instanceof Error)) return false
  const code = (error as { code?: unknown }).code
  if (typeof code === 'string' && (UNREACHABLE_CODES.has(code) || code.startsWith('08'))) return true
  return UNREACHABLE_MESSAGES.test(error.message)
}
