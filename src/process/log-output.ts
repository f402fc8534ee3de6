/**
 * Standard output for log lines, with bounds, so that an output that stops taking lines costs log
 * lines, never the service: lines past MAX_WAITING_BYTES are dropped and counted, and at exit
 * waiting lines get EXIT_FLUSH_MS (docs/decisions/0011-log-output.md).
 */
import type { FastifyBaseLogger } from 'fastify'
import type { DestinationStream } from 'pino'
import sonicBoom from 'sonic-boom'

const MAX_WAITING_BYTES = 4 * 1024 * 1024
const EXIT_FLUSH_MS = 1000

export interface LogOutput {
  stream: DestinationStream
  /** Has `log` say, once the output takes lines again, how many were dropped. */
  reportDropsTo: (log: FastifyBaseLogger) => void
  /** Lines dropped since the process started: a metric, which says so even while no line can. */
  droppedLines: () => number
}

export function standardOutput (): LogOutput {
  let exitingSince: number | undefined
  const stream = new sonicBoom.SonicBoom({
    fd: 1,
    maxLength: MAX_WAITING_BYTES,
    // A full pipe is tried again every 100 ms: for as long as it takes, except at exit.
    retryEAGAIN: () => exitingSince === undefined || performance.now() - exitingSince < EXIT_FLUSH_MS
  })
  // An output that fails (its reader gone, EPIPE; its disk full, ENOSPC) loses the lines
  // it cannot take; the service goes on, and writes again once it can.
  stream.on('error', () => {})
  let dropped = 0
  let droppedInAll = 0
  stream.on('drop', () => {
    dropped++
    droppedInAll++
  })
  process.once('exit', () => {
    exitingSince = performance.now()
    try {
      stream.flushSync()
    } catch {
      // The output took no more within EXIT_FLUSH_MS, or is gone: the lines still waiting are lost.
    }
  })

  return {
    stream,
    droppedLines: () => droppedInAll,
    reportDropsTo (log) {
      stream.on('write', () => {
        if (dropped === 0) return
        const droppedLines = dropped
        dropped = 0
        // Once this write is accounted for, not from inside it.
        setImmediate(() => { log.warn({ droppedLines }, 'log lines dropped: standard output was not being read') })
      })
    }
  }
}
