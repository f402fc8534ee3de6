/**
 * Standard output for log lines, written as pino writes it by default (sonic-boom, without
 * blocking the event loop), with bounds, so that an output that stops taking lines (a stalled
 * log collector, a pipe nobody drains, a reader gone, a log file's disk full) costs log lines
 * and never the service:
 *
 * - Lines wait in memory for the output to take them, up to MAX_WAITING_BYTES; past that
 *   they are dropped and counted, and the count is logged once the output takes lines again.
 *   pino's own destination keeps every line until the process runs out of memory.
 * - At exit, the lines still waiting are written if the output takes them within
 *   EXIT_FLUSH_MS, else given up; an output that fails is given up at once. pino's own
 *   destination (sonic-boom 4) waits for a stalled reader for ever, and retries any
 *   failure for ever, and the process never exits.
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
