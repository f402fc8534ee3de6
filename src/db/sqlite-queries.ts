/**
 * SQLite, run on a worker thread (`sqlite-worker.ts`) so that the event loop never waits for
 * the disk or for another process's lock. What arrives in one turn of the event loop goes to
 * the worker together: the reads as one batch, run in one snapshot, and the writes as another,
 * committed together, so that one sync of the disk serves them all. Every batch has a
 * deadline: a caller waits at most that long and then hears that the database is unavailable,
 * and the worker starts nothing whose deadline has passed.
 */
import { once } from 'node:events'
import { Worker } from 'node:worker_threads'
import { CompiledQuery, DummyDriver, Kysely, SqliteAdapter, SqliteIntrospector, SqliteQueryCompiler } from 'kysely'
import { classified, DatabaseUnavailableError } from './errors.js'
import type { QueryRunner } from './queries.js'
import type { Database } from './schema.js'

/** How long a request waits for SQLite before it is answered 503, and readiness. */
const QUERY_TIMEOUT_MS = 5000
const CHECK_TIMEOUT_MS = 1000

/**
 * The most reads one batch carries. A batch's answers are in memory all at once, in the
 * worker and then in the main thread: unbounded, a burst of requests for full pages (1,000
 * users each) went as one batch, and its answer ran the worker or the process out of heap.
 */
const MAX_BATCH_READS = 64

export interface Batch {
  type: 'batch'
  id: number
  kind: 'read' | 'write' | 'check'
  queries: Array<{ sql: string, parameters: readonly unknown[] }>
  /** When its callers stop waiting (milliseconds since the epoch). */
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

export async function openSqliteQueries (filename: string): Promise<QueryRunner> {
  const worker = new Worker(new URL('./sqlite-worker.js', import.meta.url), { workerData: { filename } })
  const [started] = await Promise.race([once(worker, 'message'), once(worker, 'error').then(([error]) => [{ type: 'failed', error }])])
  if (started.type !== 'ready') {
    await worker.terminate()
    throw toError(started.error)
  }

  const waiting = new Map<number, (result: BatchResult) => void>()
  let nextId = 0
  let stopped: Error | undefined

  worker.on('message', (result: BatchResult) => {
    const answer = waiting.get(result.id)
    waiting.delete(result.id)
    answer?.(result)
  })
  // The worker never throws; should it die all the same, every caller hears it, now and later.
  const workerStopped = (id: number, error: Error): BatchResult =>
    ({ id, failed: { code: 'SQLITE_CANTOPEN', message: `the SQLite worker stopped: ${error.message}` } })
  const die = (error: Error) => {
    stopped ??= error
    for (const [id, answer] of waiting) answer(workerStopped(id, error))
    waiting.clear()
  }
  worker.on('error', die)
  worker.on('exit', (code) => die(new Error(`exit code ${code}`)))

  function send (kind: Batch['kind'], queries: CompiledQuery[], timeoutMs: number): Promise<BatchResult> {
    const id = nextId++
    return new Promise((resolve) => {
      if (stopped !== undefined) {
        resolve(workerStopped(id, stopped))
        return
      }
      const timer = setTimeout(() => {
        waiting.delete(id)
        resolve({ id, expired: true })
      }, timeoutMs)
      waiting.set(id, (result) => {
        clearTimeout(timer)
        resolve(result)
      })
      const message: Batch = { type: 'batch', id, kind, queries: queries.map(({ sql, parameters }) => ({ sql, parameters })), deadline: Date.now() + timeoutMs }
      worker.postMessage(message)
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
   * Gathers queries into batches: what arrives in one turn of the event loop goes together,
   * and while a batch is with the worker, what arrives meanwhile waits to go as the next one.
   * So under load a write batch holds everything that came during the previous commit's sync
   * of the disk, and each sync serves as many writes as there are to serve. Reads go at most
   * `MAX_BATCH_READS` at a time (a pair asked for together is never split), the rest in the
   * batches after.
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
    async close () {
      if (stopped !== undefined) return
      worker.removeAllListeners('exit')
      worker.postMessage({ type: 'close' } satisfies WorkerMessage)
      const exited = once(worker, 'exit')
      const timer = setTimeout(() => { worker.terminate().catch(() => {}) }, 2000)
      await exited
      clearTimeout(timer)
    }
  }
}
