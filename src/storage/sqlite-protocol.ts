/** The messages between the SQLite worker (sqlite-worker.ts) and the main thread that sends it batches (sqlite.ts). */
import type { MigrationOutcome } from './migrate.js'

export interface Batch {
  type: 'batch'
  id: number
  /** `statement`: one statement run as it is, outside the worker's transactions (migrations). */
  kind: 'read' | 'write' | 'check' | 'statement'
  queries: Array<{ sql: string, parameters: readonly unknown[] }>
  /** When its callers stop waiting, in `monotonicMs`. */
  deadline: number
}
export type WorkerMessage = Batch | { type: 'close' }

export interface ErrorDescription { code: string | undefined, message: string }
/** A statement's rows, and for one that writes, how many rows it changed. */
export type Outcome = { rows: unknown[], changes?: number } | { error: ErrorDescription }
export type BatchResult =
  | { id: number, outcomes: Outcome[] }
  | { id: number, expired: true }
  | { id: number, failed: ErrorDescription }

export const toError = ({ code, message }: ErrorDescription): Error => Object.assign(new Error(message), { code })

export const describeError = (error: unknown): ErrorDescription => {
  const { code, message } = error as { code?: unknown, message?: unknown }
  return { code: typeof code === 'string' ? code : undefined, message: String(message ?? error) }
}

/** Milliseconds of a clock that never steps, the same in every thread: deadlines cross threads. */
export const monotonicMs = (): number => Number(process.hrtime.bigint() / 1_000_000n)

/** The worker as the dialect sees it (sqlite.ts starts it). */
export interface SqliteWorker {
  /** Sends queries as one batch; resolves with its result, or `expired` past `timeoutMs`. */
  send: (kind: Batch['kind'], queries: Array<{ sql: string, parameters: readonly unknown[] }>, timeoutMs: number) => Promise<BatchResult>
  /** What opening did to the schema. */
  migrations: MigrationOutcome
  close: () => Promise<void>
}
