/**
 * SQLite as the main thread sees it. The worker thread (sqlite-worker.ts) is started, migrated and
 * replaced should it stop; batches go to it with a deadline. Kysely's SQLite dialect hands each
 * query to it, observed as every query is: what arrives in one turn goes as one batch, reads in one
 * snapshot and writes in one commit (docs/decisions/0001-sqlite-on-a-worker-thread.md). The same
 * driver carries the migrations, a statement at a time, before the worker takes any batch.
 */
import { once } from 'node:events'
import { Worker } from 'node:worker_threads'
import {
  Kysely, SqliteAdapter, SqliteIntrospector, SqliteQueryCompiler,
  type CompiledQuery, type DatabaseConnection, type Dialect, type Driver, type QueryResult
} from 'kysely'
import { migrateToLatest, type MigrationOutcome } from './migrate.js'
import type { Batch, BatchResult, ErrorDescription, Outcome, WorkerMessage } from './sqlite-worker.js'
import { watchWalSize } from './sqlite-wal-size.js'
import { DatabaseUnavailableError, observeQuery, type Observation, type OutageLogger } from './observed-queries.js'

/** How long a request waits for SQLite before it is answered 503, and readiness. */
const QUERY_TIMEOUT_MS = 5000
const CHECK_TIMEOUT_MS = 1000

/** The most reads one batch carries: a batch's answers are all in memory at once. */
const MAX_BATCH_READS = 64

interface Pending {
  query: CompiledQuery
  resolve: (outcome: { rows: unknown[], changes?: number }) => void
  reject: (error: unknown) => void
}

/** The worker as the dialect sees it. */
export interface SqliteWorker {
  /** Sends queries as one batch; resolves with its result, or `expired` past `timeoutMs`. */
  send: (kind: Batch['kind'], queries: Array<{ sql: string, parameters: readonly unknown[] }>, timeoutMs: number) => Promise<BatchResult>
  /** What opening did to the schema. */
  migrations: MigrationOutcome
  close: () => Promise<void>
}

const toError = ({ code, message }: ErrorDescription): Error => Object.assign(new Error(message), { code })

/** Why a whole batch failed, if it did. */
const failureOf = (result: BatchResult): Error | undefined =>
  'expired' in result
    ? new DatabaseUnavailableError(new Error('SQLite did not answer in time'))
    : 'failed' in result ? toError(result.failed) : undefined

function settle ({ resolve, reject }: Pick<Pending, 'resolve' | 'reject'>, outcome: Outcome | undefined, failure: Error | undefined): void {
  if (outcome === undefined) reject(failure)
  else if ('error' in outcome) reject(toError(outcome.error))
  else resolve(outcome)
}

/**
 * Gathers queries into batches: what arrives in one turn goes together, and what arrives while a
 * batch is with the worker goes next, so each sync of the disk serves every write waiting for it.
 */
function batched (worker: SqliteWorker, kind: 'read' | 'write') {
  const pending: Pending[] = []
  let busy = false

  async function flush (): Promise<void> {
    const batch = pending.splice(0, kind === 'write' ? pending.length : MAX_BATCH_READS)
    busy = true
    const result = await worker.send(kind, batch.map(({ query }) => query), QUERY_TIMEOUT_MS)
    busy = false
    if (pending.length > 0) setImmediate(flush)
    const failure = failureOf(result)
    batch.forEach((entry, index) => { settle(entry, 'outcomes' in result ? result.outcomes[index] : undefined, failure) })
  }

  return (query: CompiledQuery) => new Promise<{ rows: unknown[], changes?: number }>((resolve, reject) => {
    pending.push({ query, resolve, reject })
    if (pending.length === 1 && !busy) setImmediate(flush)
  })
}

/** Queries of many requests are in flight at once: the worker's batches, not a lock, put them in order. */
class WorkerAdapter extends SqliteAdapter {
  override get supportsMultipleConnections (): boolean {
    return true
  }
}

const noTransactions = async (): Promise<never> => {
  throw new Error('queries on the SQLite worker run in its batches; a transaction of their own is not supported')
}

type Execute = (query: CompiledQuery) => Promise<{ rows: unknown[], changes?: number }>

/** Kysely over the worker's one connection, each query handed to `execute`. */
function workerDialect (execute: Execute, destroy: () => Promise<void>): Dialect {
  const connection: DatabaseConnection = {
    async executeQuery<R> (query: CompiledQuery): Promise<QueryResult<R>> {
      const { rows, changes } = await execute(query)
      return { rows: rows as R[], ...(changes !== undefined && { numAffectedRows: BigInt(changes) }) }
    },
    async * streamQuery () { throw new Error('the SQLite worker does not stream rows') }
  }
  const driver: Driver = {
    init: async () => {},
    acquireConnection: async () => connection,
    beginTransaction: noTransactions,
    commitTransaction: noTransactions,
    rollbackTransaction: noTransactions,
    releaseConnection: async () => {},
    destroy
  }
  return {
    createAdapter: () => new WorkerAdapter(),
    createDriver: () => driver,
    createIntrospector: (db) => new SqliteIntrospector(db),
    createQueryCompiler: () => new SqliteQueryCompiler()
  }
}

/** The dialect, and readiness: the worker's files are the ones opened, and a write could begin now. */
export function sqliteWorkerDialect (worker: SqliteWorker, observation: Observation): { dialect: Dialect, check: () => Promise<void> } {
  const read = batched(worker, 'read')
  const write = batched(worker, 'write')
  const execute: Execute = (query) => observeQuery(observation, query, (operation) => operation === 'read' ? read(query) : write(query))
  return {
    dialect: workerDialect(execute, async () => await worker.close()),
    async check () {
      const failure = failureOf(await worker.send('check', [], CHECK_TIMEOUT_MS))
      if (failure !== undefined) throw failure
    }
  }
}

/**
 * Migrates a worker that takes no batch yet, each statement run as it is: the migration opens its
 * one transaction itself (migrate.ts).
 */
async function migrateThroughWorker (runStatement: Execute, apply: boolean): Promise<MigrationOutcome> {
  return await migrateToLatest(new Kysely<any>({ dialect: workerDialect(runStatement, async () => {}) }), 'sqlite', { apply })
}

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
    const batch: Batch = { type: 'batch', id: STATEMENT_ID, kind: 'statement', queries: [{ sql, parameters }], deadline: undefined }
    thread.post(batch, (result) => { settle({ resolve, reject }, 'outcomes' in result ? result.outcomes[0] : undefined, failureOf(result)) })
  })
}

/**
 * Starts a worker and migrates the file through it (or checks that it is migrated, when `migrate`
 * is false). `reopening` opens only a file that is there, so that a deleted database is never
 * replaced by an empty one.
 */
async function startWorker (filename: string, { reopening, migrate }: { reopening: boolean, migrate: boolean }, stopped: (error: Error) => void): Promise<WorkerThread> {
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
    const migrations = await migrateThroughWorker((query) => runStatement(thread, query), migrate)
    onStop = stopped
    return { ...thread, migrations }
  } catch (error) {
    await thread.close()
    throw error
  }
}

/** How often, at most, a stopped worker's file is tried again while it cannot be opened. */
const REOPEN_INTERVAL_MS = 1000

export async function openSqliteWorker (filename: string, log: OutageLogger, { migrate = true } = {}): Promise<SqliteWorker> {
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
  let worker: Promise<WorkerThread> | undefined = startWorker(filename, { reopening: false, migrate }, workerStopped)
  const { migrations } = await worker
  const stopWatchingWal = filename === ':memory:' ? () => {} : watchWalSize(filename, log)
  let closed = false
  let lastFailure: { error: Error, at: number } | undefined

  async function currentWorker (): Promise<WorkerThread> {
    if (worker !== undefined) return await worker
    if (closed) throw new Error('the database is closed')
    if (filename === ':memory:') throw new Error('the SQLite worker stopped, and an in-memory database cannot be reopened')
    if (lastFailure !== undefined && performance.now() - lastFailure.at < REOPEN_INTERVAL_MS) throw lastFailure.error
    const opening = startWorker(filename, { reopening: true, migrate }, workerStopped)
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
      lastFailure = { error: failure, at: performance.now() }
      throw failure
    }
  }

  let nextId = 0
  function send (kind: Batch['kind'], queries: Array<{ sql: string, parameters: readonly unknown[] }>, timeoutMs: number): Promise<BatchResult> {
    const id = nextId++
    const batch: Batch = { type: 'batch', id, kind, queries: queries.map(({ sql, parameters }) => ({ sql, parameters })), deadline: process.hrtime.bigint() + BigInt(timeoutMs) * 1_000_000n }
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
