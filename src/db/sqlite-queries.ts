/**
 * SQLite on a worker thread, with what arrives in one turn sent as one batch and every batch under
 * a deadline (docs/decisions/0001-sqlite-on-a-worker-thread.md). A worker that stops is replaced
 * when next needed.
 */
import { once } from 'node:events'
import { stat } from 'node:fs/promises'
import { Worker } from 'node:worker_threads'
import { CompiledQuery, DummyDriver, Kysely, SqliteAdapter, SqliteIntrospector, SqliteQueryCompiler } from 'kysely'
import { classified, DatabaseUnavailableError, type OutageLogger } from './errors.js'
import type { MigrationOutcome } from './migrate.js'
import type { QueryRunner } from './queries.js'
import type { Database } from './schema.js'

/** How long a request waits for SQLite before it is answered 503, and readiness. */
const QUERY_TIMEOUT_MS = 5000
const CHECK_TIMEOUT_MS = 1000

/**
 * The most reads one batch carries: a batch's answers are all in memory at once, so a burst of full
 * pages must not go as one.
 */
const MAX_BATCH_READS = 64

export interface Batch {
  type: 'batch'
  id: number
  kind: 'read' | 'write' | 'check'
  queries: Array<{ sql: string, parameters: readonly unknown[] }>
  /** When its callers stop waiting, in `monotonicMs`. */
  deadline: number
}
export type WorkerMessage = Batch | { type: 'close' }

export interface ErrorDescription { code: string | undefined, message: string }
export type Outcome = { rows: unknown[] } | { error: ErrorDescription }
export type BatchResult =
  | { id: number, outcomes: Outcome[] }
  | { id: number, expired: true }
  | { id: number, failed: ErrorDescription }

const toError = ({ code, message }: ErrorDescription): Error => Object.assign(new Error(message), { code })

/** Queries that go in one batch, so that they share its snapshot or its commit. */
interface Pending {
  queries: CompiledQuery[]
  resolve: (rows: unknown[][]) => void
  reject: (error: unknown) => void
}

/** Kysely as a compiler of SQLite queries only; the worker runs them. */
const compiler = new Kysely<Database>({
  dialect: {
    createAdapter: () => new SqliteAdapter(),
    createDriver: () => new DummyDriver(),
    createIntrospector: (db) => new SqliteIntrospector(db),
    createQueryCompiler: () => new SqliteQueryCompiler()
  }
})

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

/**
 * Starts a worker and waits until it has opened and migrated the file. `reopening` opens only a
 * file that is there, so that a deleted database is never replaced by an empty one.
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
    stopped(error)
  }
  worker.on('error', die)
  worker.on('exit', (code) => die(new Error(`exit code ${code}`)))

  return {
    migrations: started.migrations,
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
}

/** A WAL this large has not been checkpointed for a while: some open read still needs it. */
const WAL_HELD_BACK_BYTES = 64 * 1024 * 1024
const WAL_CHECK_INTERVAL_MS = 1000

/**
 * One warning as the WAL grows past WAL_HELD_BACK_BYTES and one line as it is back under, so that a
 * read held open by mistake is found before the disk fills. The size is read off the event loop.
 */
function watchWalSize (filename: string, log: OutageLogger): () => void {
  let warned = false
  let checking = false
  const timer = setInterval(() => {
    if (checking) return
    checking = true
    stat(`${filename}-wal`).then(({ size: walBytes }) => {
      if (!warned && walBytes > WAL_HELD_BACK_BYTES) {
        warned = true
        log.warn({ walBytes }, 'the SQLite WAL keeps growing: another connection is likely holding a read open (a backup, a sqlite3 shell in a transaction), and the WAL grows with every write until it ends')
      } else if (warned && walBytes <= WAL_HELD_BACK_BYTES) {
        warned = false
        log.info({ walBytes }, 'the SQLite WAL is small again: the read that held it back has ended')
      }
    }, () => {}).finally(() => { checking = false })
  }, WAL_CHECK_INTERVAL_MS).unref()
  return () => { clearInterval(timer) }
}

/** How often, at most, a stopped worker's file is tried again while it cannot be opened. */
const REOPEN_INTERVAL_MS = 1000

/** Milliseconds of a clock that never steps, the same in every thread: deadlines cross threads. */
export const monotonicMs = (): number => Number(process.hrtime.bigint() / 1_000_000n)

export async function openSqliteQueries (filename: string, log: OutageLogger): Promise<QueryRunner> {
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
  function send (kind: Batch['kind'], queries: CompiledQuery[], timeoutMs: number): Promise<BatchResult> {
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

  /** Why a whole batch failed, if it did. */
  const failureOf = (result: BatchResult): Error | undefined =>
    'expired' in result
      ? new DatabaseUnavailableError(new Error('SQLite did not answer in time'))
      : 'failed' in result ? classified(toError(result.failed)) as Error : undefined

  /** Settles queries asked for together with their outcomes: the rows of each, or the first error. */
  function settle ({ resolve, reject }: Pending, outcomes: Outcome[]): void {
    const rows: unknown[][] = []
    for (const outcome of outcomes) {
      if ('error' in outcome) {
        reject(classified(toError(outcome.error)))
        return
      }
      rows.push(outcome.rows)
    }
    resolve(rows)
  }

  /**
   * Gathers queries into batches: what arrives in one turn goes together, and what arrives while a
   * batch is with the worker goes next, so each sync of the disk serves every write waiting for it.
   */
  function batched (kind: 'read' | 'write') {
    const pending: Pending[] = []
    let busy = false

    function nextBatch (): Pending[] {
      if (kind === 'write') return pending.splice(0)
      let taken = 1
      let queries = pending[0]!.queries.length
      while (taken < pending.length && queries + pending[taken]!.queries.length <= MAX_BATCH_READS) {
        queries += pending[taken]!.queries.length
        taken++
      }
      return pending.splice(0, taken)
    }

    async function flush (): Promise<void> {
      const batch = nextBatch()
      busy = true
      const result = await send(kind, batch.flatMap(({ queries }) => queries), QUERY_TIMEOUT_MS)
      busy = false
      if (pending.length > 0) setImmediate(flush)
      const failure = failureOf(result)
      let next = 0
      for (const entry of batch) {
        const outcomes = failure === undefined && 'outcomes' in result ? result.outcomes.slice(next, next + entry.queries.length) : undefined
        next += entry.queries.length
        if (outcomes === undefined) entry.reject(failure)
        else settle(entry, outcomes)
      }
    }

    /** Runs the queries in one batch; resolves with the rows of each, in order. */
    return async (queries: CompiledQuery[]): Promise<unknown[][]> => await new Promise((resolve, reject) => {
      pending.push({ queries, resolve, reject })
      if (pending.length === 1 && !busy) setImmediate(flush)
    })
  }

  const reads = batched('read')
  const writes = batched('write')
  return {
    db: compiler,
    read: async <Row>(query: CompiledQuery<Row>) => (await reads([query]))[0] as Row[],
    readTogether: async <A, B>(first: CompiledQuery<A>, second: CompiledQuery<B>) => await reads([first, second]) as [A[], B[]],
    write: async <Row>(query: CompiledQuery<Row>) => (await writes([query]))[0] as Row[],
    async check () {
      const failure = failureOf(await send('check', [], CHECK_TIMEOUT_MS))
      if (failure !== undefined) throw failure
    },
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
