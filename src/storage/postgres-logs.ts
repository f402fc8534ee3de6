/** The PostgreSQL pool's losses and refusals of connections, each in one log line at a time. */
import type { OutageLogger } from './observed-queries.js'

/** PostgreSQL's SQLSTATE for a session it ended for being idle too long. */
const IDLE_SESSION_TIMEOUT = '57P05'

/** How long the losses of idle connections are gathered into one log line. */
const CONNECTION_LOSSES_LOG_MS = 1000

/**
 * Idle connections the server closed, in one line a second at most, so that a restart is one line;
 * closings by idle_session_timeout are policy, logged at `info`.
 */
export function connectionLossesLog (log: OutageLogger): (error: Error) => void {
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
export function connectionRefusalsLog (log: OutageLogger, openConnections: () => number): (error: Error) => void {
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
