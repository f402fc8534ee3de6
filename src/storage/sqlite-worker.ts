/**
 * The service's SQLite connection, on a thread of its own so that its waits never hold up the event
 * loop. Each batch runs in a transaction that begins and ends inside one message. It loads no
 * Kysely: the thread that starts it migrates through it, statement by statement.
 */
import { statSync, type Stats } from 'node:fs'
import { parentPort, workerData } from 'node:worker_threads'
import type SQLite from 'better-sqlite3'
import { openSqliteFile } from './sqlite-file.js'

// The messages between this thread and the main thread's dialect (sqlite.ts), which imports only
// their types from here: importing this module runs the worker.
export interface Batch {
  type: 'batch'
  id: number
  /** `statement`: one statement run as it is, outside the worker's transactions (migrations). */
  kind: 'read' | 'write' | 'check' | 'statement'
  queries: Array<{ sql: string, parameters: readonly unknown[] }>
  /**
   * When its callers stop waiting, on `process.hrtime.bigint()`, a clock that never steps and is the
   * same in every thread; none for a migration's statement, which takes as long as it needs.
   */
  deadline: bigint | undefined
}
export type WorkerMessage = Batch | { type: 'close' }

export interface ErrorDescription { code: string | undefined, message: string }
/** A statement's rows, and for one that writes, how many rows it changed. */
export type Outcome = { rows: unknown[], changes?: number } | { error: ErrorDescription }
export type BatchResult =
  | { id: number, outcomes: Outcome[] }
  | { id: number, expired: true }
  | { id: number, failed: ErrorDescription }

const port = parentPort!

/** How soon a WAL that could not be cut after an erasure is tried again. */
const WAL_CUT_RETRY_MS = 1000
const { filename, reopening } = workerData as { filename: string, reopening: boolean }

interface FileIdentity { dev: number, ino: number }
const identityOf = (stats: Stats): FileIdentity => ({ dev: stats.dev, ino: stats.ino })
/** The files this connection has open, each as first seen, to notice them deleted or replaced under it. */
const opened = new Map<string, FileIdentity>()

class FileChangedError extends Error {
  readonly code = 'SQLITE_FILE_CHANGED'
}

/** The WAL of a new file appears with the first write, and is watched from then on. */
function checkFiles (): void {
  if (filename === ':memory:') return
  for (const path of [filename, `${filename}-wal`]) {
    const now = statSync(path, { throwIfNoEntry: false })
    const identity = opened.get(path)
    if (identity === undefined) {
      if (now !== undefined) opened.set(path, identityOf(now))
    } else if (now === undefined || now.dev !== identity.dev || now.ino !== identity.ino) {
      throw new FileChangedError(`${path} was deleted or replaced while the service had it open`)
    }
  }
}

const describe = (error: unknown): ErrorDescription => {
  const { code, message } = error as { code?: unknown, message?: unknown }
  return { code: typeof code === 'string' ? code : undefined, message: String(message ?? error) }
}

/** Milliseconds until the batch's callers stop waiting. */
const timeLeft = ({ deadline }: Batch): number =>
  deadline === undefined ? Number.POSITIVE_INFINITY : Number(deadline - process.hrtime.bigint()) / 1e6

function main (database: SQLite.Database): void {
  // Each statement is prepared once and reused, since preparing parses the SQL again;
  // better-sqlite3 runs one statement to completion before the next.
  const statements = new Map<string, SQLite.Statement>()
  const run = (sql: string, parameters: readonly unknown[]): { rows: unknown[], changes?: number } => {
    let statement = statements.get(sql)
    if (statement === undefined) {
      statement = database.prepare(sql)
      statements.set(sql, statement)
    }
    if (statement.reader) return { rows: statement.all(...parameters) }
    return { rows: [], changes: statement.run(...parameters).changes }
  }

  /** Reads share one snapshot; each fails alone. */
  function read (batch: Batch): Outcome[] {
    run('begin', [])
    try {
      return batch.queries.map(({ sql, parameters }) => {
        try {
          return run(sql, parameters)
        } catch (error) {
          return { error: describe(error) }
        }
      })
    } finally {
      run('rollback', [])
    }
  }

  /**
   * Writes share one commit, and so one sync. A refused statement fails alone, as SQLite undoes
   * just that statement; if SQLite rolled the whole transaction back, the whole batch fails.
   */
  function write (batch: Batch): Outcome[] | 'expired' {
    checkFiles()
    database.pragma(`busy_timeout = ${Math.max(0, Math.ceil(timeLeft(batch)))}`)
    run('begin immediate', [])
    if (timeLeft(batch) <= 0) {
      run('rollback', [])
      return 'expired'
    }
    const outcomes = batch.queries.map(({ sql, parameters }): Outcome => {
      try {
        return run(sql, parameters)
      } catch (error) {
        if (!database.inTransaction) throw error
        return { error: describe(error) }
      }
    })
    try {
      run('commit', [])
    } catch (error) {
      // A commit that fails (a full disk, a failed sync) leaves the transaction open.
      if (database.inTransaction) run('rollback', [])
      throw error
    }
    if (batch.queries.some(({ sql }) => /^\s*delete\b/i.test(sql))) cutWal()
    return outcomes
  }

  /**
   * Erasure: deleted rows are zeroed in the file (secure_delete, sqlite-file.ts), but the WAL keeps
   * their pages as they were until it is checkpointed and cut to nothing. That waits for no one: while
   * another connection holds a read, it is tried again a second later.
   */
  let cutPending: NodeJS.Timeout | undefined
  function cutWal (): void {
    if (filename === ':memory:' || cutPending !== undefined) return
    let cut = false
    try {
      database.pragma('busy_timeout = 0')
      const [result] = database.pragma('wal_checkpoint(TRUNCATE)') as Array<{ busy: number }>
      cut = result?.busy === 0
    } catch {}
    if (!cut) cutPending = setTimeout(() => { cutPending = undefined; cutWal() }, WAL_CUT_RETRY_MS)
  }

  /** A migration's statement, in the transaction the migration opened itself. */
  function statement (batch: Batch): Outcome[] {
    checkFiles()
    return batch.queries.map(({ sql, parameters }) => run(sql, parameters))
  }

  /** Readiness: the files are the ones opened, and a write could begin now. */
  function check (): Outcome[] {
    checkFiles()
    database.pragma('busy_timeout = 0')
    run('begin immediate', [])
    run('rollback', [])
    return []
  }

  const runs = { read, write, statement, check }
  port.on('message', (message: WorkerMessage) => {
    if (message.type === 'close') {
      clearTimeout(cutPending)
      database.close()
      port.close()
      return
    }
    const batch = message
    let result: BatchResult
    if (timeLeft(batch) <= 0) {
      result = { id: batch.id, expired: true }
    } else {
      try {
        const outcomes = runs[batch.kind](batch)
        result = outcomes === 'expired' ? { id: batch.id, expired: true } : { id: batch.id, outcomes }
      } catch (error) {
        result = { id: batch.id, failed: describe(error) }
      }
    }
    port.postMessage(result)
  })
}

try {
  const database = await openSqliteFile(filename, { mustExist: reopening })
  checkFiles()
  main(database)
  port.postMessage({ type: 'ready' })
} catch (error) {
  port.postMessage({ type: 'failed', error: describe(error) })
}
