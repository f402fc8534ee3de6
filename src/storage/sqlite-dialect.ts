/**
 * Kysely's SQLite dialect with a driver that hands each query to the worker, observed as every
 * query is: what arrives in one turn goes as one batch, reads in one snapshot and writes in one
 * commit, each under a deadline (docs/decisions/0001-sqlite-on-a-worker-thread.md). The same
 * driver carries the migrations, a statement at a time, before the worker takes any batch.
 */
import {
  Kysely, SqliteAdapter, SqliteIntrospector, SqliteQueryCompiler,
  type CompiledQuery, type DatabaseConnection, type Dialect, type Driver, type QueryResult
} from 'kysely'
import { migrateToLatest, type MigrationOutcome } from './migrate.js'
import { toError, type BatchResult, type Outcome, type SqliteWorker } from './sqlite-protocol.js'
import { observeQuery, type Observation } from './observed-dialect.js'
import { DatabaseUnavailableError } from './unavailable.js'

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

/** Why a whole batch failed, if it did. */
export const failureOf = (result: BatchResult): Error | undefined =>
  'expired' in result
    ? new DatabaseUnavailableError(new Error('SQLite did not answer in time'))
    : 'failed' in result ? toError(result.failed) : undefined

export function settle ({ resolve, reject }: Pick<Pending, 'resolve' | 'reject'>, outcome: Outcome | undefined, failure: Error | undefined): void {
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
export async function migrateThroughWorker (runStatement: Execute): Promise<MigrationOutcome> {
  return await migrateToLatest(new Kysely<any>({ dialect: workerDialect(runStatement, async () => {}) }), 'sqlite')
}
