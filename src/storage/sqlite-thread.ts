/**
 * The thread side of the SQLite worker: starts and migrates it, sends it batches with a deadline,
 * and replaces it should it stop.
 */
import { once } from 'node:events'
import { Worker } from 'node:worker_threads'
import type { CompiledQuery } from 'kysely'
import type { MigrationOutcome } from './migrate.js'
import { failureOf, migrateThroughWorker, settle } from './sqlite-dialect.js'
import { monotonicMs, toError, type Batch, type BatchResult, type ErrorDescription, type SqliteWorker, type WorkerMessage } from './sqlite-protocol.js'
import { watchWalSize } from './sqlite-wal-size.js'
import type { OutageLogger } from './unavailable.js'

/** One worker thread, and the batches it has yet to answer. */
interface WorkerThread {
  /** Sends a batch; `answer` hears its result, or that the worker stopped. */
  post: (batch: Batch, answer: (result: BatchResult) => void) => void
  /** Stops waiting for a batch's answer. */
  forget: (id: number) => void
  close: () => Promise<void>
  /** What opening did to the schema. */
  migrations: MigrationOutcome
}

const describeStop = (error: Error): ErrorDescription =>
  ({ code: 'SQLITE_CANTOPEN', message: `the SQLite worker stopped: ${error.message}` })

/** A migration's statements go one at a time, under an id no batch has. */
const STATEMENT_ID = -1

/** Runs one statement of a migration, for as long as it takes: the service waits for its schema. */
function runStatement (thread: Omit<WorkerThread, 'migrations'>, { sql, parameters }: CompiledQuery) {
  return new Promise<{ rows: unknown[], changes?: number }>((resolve, reject) => {
    const batch: Batch = { type: 'batch', id: STATEMENT_ID, kind: 'statement', queries: [{ sql, parameters }], deadline: Number.POSITIVE_INFINITY }
    thread.post(batch, (result) => { settle({ resolve, reject }, 'outcomes' in result ? result.outcomes[0] : undefined, failureOf(result)) })
  })
}

/**
 * Starts a worker and migrates the file through it. `reopening` opens only a file that is there,
 * so that a deleted database is never replaced by an empty one.
 */
async function startWorker (filename: string, reopening: boolean, stopped: (error: Error) => void): Promise<WorkerThread> {
  const worker = new Worker(new URL('./sqlite-worker.js', import.meta.url), { name: 'sqlite', workerData: { filename, reopening } })
  const [started] = await Promise.race([
    once(worker, 'message'),
    once(worker, 'error').then(([error]) => [{ type: 'failed', error }]),
    once(worker, 'exit').then(([code]) => [{ type: 'failed', error: { message: `the SQLite worker stopped: exit code ${code}` } }])
  ])
  if (started.type !== 'ready') {
    await worker.terminate()
    throw toError(started.error)
  }

  const waiting = new Map<number, (result: BatchResult) => void>()
  let stop: Error | undefined
  // A worker that stops while it migrates fails the start, and is not replaced.
  let onStop = (_error: Error) => {}
  worker.on('message', (result: BatchResult) => {
    const answer = waiting.get(result.id)
    waiting.delete(result.id)
    answer?.(result)
  })
  const die = (error: Error) => {
    if (stop !== undefined) return
    stop = error
    for (const [id, answer] of waiting) answer({ id, failed: describeStop(error) })
    waiting.clear()
    onStop(error)
  }
  worker.on('error', die)
  worker.on('exit', (code) => die(new Error(`exit code ${code}`)))

  const thread: Omit<WorkerThread, 'migrations'> = {
    post (batch, answer) {
      if (stop !== undefined) {
        answer({ id: batch.id, failed: describeStop(stop) })
        return
      }
      waiting.set(batch.id, answer)
      worker.postMessage(batch)
    },
    forget: (id) => { waiting.delete(id) },
    async close () {
      if (stop !== undefined) return
      stop = new Error('closed')
      worker.removeAllListeners('exit')
      worker.postMessage({ type: 'close' } satisfies WorkerMessage)
      const exited = once(worker, 'exit')
      const timer = setTimeout(() => { worker.terminate().catch(() => {}) }, 2000)
      await exited
      clearTimeout(timer)
    }
  }
  try {
    const migrations = await migrateThroughWorker((query) => runStatement(thread, query))
    onStop = stopped
    return { ...thread, migrations }
  } catch (error) {
    await thread.close()
    throw error
  }
}

/** How often, at most, a stopped worker's file is tried again while it cannot be opened. */
const REOPEN_INTERVAL_MS = 1000

export async function openSqliteWorker (filename: string, log: OutageLogger): Promise<SqliteWorker> {
  /**
   * Should the worker stop, what it was asked answers 503 at once, and the next request opens the
   * file on a new worker. An in-memory database goes with its worker.
   */
  const workerStopped = (error: Error) => {
    worker = undefined
    log.error({ err: error }, filename === ':memory:'
      ? 'the SQLite worker stopped; an in-memory database cannot be reopened, so it stays unavailable until a restart'
      : 'the SQLite worker stopped; the database will be reopened when needed')
  }
  let worker: Promise<WorkerThread> | undefined = startWorker(filename, false, workerStopped)
  const { migrations } = await worker
  const stopWatchingWal = filename === ':memory:' ? () => {} : watchWalSize(filename, log)
  let closed = false
  let lastFailure: { error: Error, at: number } | undefined

  async function currentWorker (): Promise<WorkerThread> {
    if (worker !== undefined) return await worker
    if (closed) throw new Error('the database is closed')
    if (filename === ':memory:') throw new Error('the SQLite worker stopped, and an in-memory database cannot be reopened')
    if (lastFailure !== undefined && monotonicMs() - lastFailure.at < REOPEN_INTERVAL_MS) throw lastFailure.error
    const opening = startWorker(filename, true, workerStopped)
    worker = opening
    try {
      const opened = await opening
      log.info({}, 'the SQLite database is open again')
      lastFailure = undefined
      return opened
    } catch (error) {
      if (worker === opening) worker = undefined
      const failure = new Error(`the SQLite worker stopped, and ${filename} could not be opened again: ${(error as Error).message}`)
      if (lastFailure === undefined) log.error({ err: error }, `${filename} could not be opened again; it will be tried again when needed, at most once a second`)
      lastFailure = { error: failure, at: monotonicMs() }
      throw failure
    }
  }

  let nextId = 0
  function send (kind: Batch['kind'], queries: Array<{ sql: string, parameters: readonly unknown[] }>, timeoutMs: number): Promise<BatchResult> {
    const id = nextId++
    const batch: Batch = { type: 'batch', id, kind, queries: queries.map(({ sql, parameters }) => ({ sql, parameters })), deadline: monotonicMs() + timeoutMs }
    return new Promise((resolve) => {
      let thread: WorkerThread | undefined
      let answered = false
      const answer = (result: BatchResult) => {
        answered = true
        clearTimeout(timer)
        resolve(result)
      }
      const timer = setTimeout(() => {
        thread?.forget(id)
        answer({ id, expired: true })
      }, timeoutMs)
      // Whatever keeps a worker from being had (closed, in memory, not reopened) is the database unavailable.
      currentWorker().then((current) => {
        if (answered) return
        thread = current
        current.post(batch, answer)
      }, (error: Error) => answer({ id, failed: { code: 'SQLITE_CANTOPEN', message: error.message } }))
    })
  }

  return {
    send,
    migrations,
    async close () {
      closed = true
      stopWatchingWal()
      const current = worker
      worker = undefined
      await (await current?.catch(() => undefined))?.close()
    }
  }
}
