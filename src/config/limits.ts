/** Defaults that follow the machine: the heap V8 allows, the open-file limit, the memory. */
import { readFileSync } from 'node:fs'
import { totalmem } from 'node:os'
import { getHeapStatistics } from 'node:v8'
import { ConfigError } from './config-error.js'
import type { DatabaseConfig } from './values.js'

const MB = 1024 * 1024

/**
 * The heap in use past which API routes shed load: below the heap V8 allows, or the process runs
 * out of heap before it sheds anything.
 */
export function heapToShedAt (megabytes: number | undefined): number {
  const limitMb = Math.floor(getHeapStatistics().heap_size_limit / MB)
  if (megabytes === undefined) return Math.min(1024, Math.floor(limitMb * 0.75)) * MB
  if (megabytes >= limitMb) {
    throw new ConfigError(`OVERLOAD_MAX_HEAP_MB must be below the heap this process may have, ${limitMb} MB (set by Node from the memory ` +
      `of the machine or container, or by --max-old-space-size), or it could never shed load; 0 turns it off (got ${megabytes})`)
  }
  return megabytes * MB
}

/** Descriptors kept for everything but client connections and PostgreSQL's pool: files being sent (at most 64, http/pages/file-limit.ts), SQLite's files, logs, Node's own. */
const RESERVED_DESCRIPTORS = 128

/**
 * The memory kept for each client connection by default: a client that does not read its page holds
 * what the kernel has not taken of it.
 */
const MEMORY_PER_CONNECTION = 128 * 1024

/**
 * How many client connections may be open at once: by default what the open-file limit leaves after
 * the pool and a reserve, and what memory allows (docs/decisions/0008-connection-limit.md).
 */
export function connectionLimit (setting: number | undefined, database: DatabaseConfig): number {
  const openFiles = openFileLimit()
  const pool = database.dialect === 'postgres' ? database.poolSize : 0
  const available = openFiles - RESERVED_DESCRIPTORS - pool
  const budget = `the open-file limit is ${openFiles}, less ${RESERVED_DESCRIPTORS} kept for the process` +
    (pool > 0 ? ` and ${pool} for DATABASE_POOL_SIZE` : '')
  if (available < 1) {
    throw new ConfigError(`No open file is left for client connections: ${budget} (raise the limit${pool > 0 ? ', or lower DATABASE_POOL_SIZE' : ''})`)
  }
  if (setting === undefined) return Math.min(available, Math.floor(processMemory() / MEMORY_PER_CONNECTION))
  if (setting > available) {
    throw new ConfigError(`MAX_CONNECTIONS must be at most ${available}: ${budget} (raise the limit, or lower MAX_CONNECTIONS) (got ${setting})`)
  }
  return setting
}

/** The memory the process may have: its control group's limit (a container's), or the machine's where that is lower or unset. */
function processMemory (): number {
  return Math.min(process.constrainedMemory() || Infinity, totalmem())
}

/** The process's soft limit of open files, from /proc/self/limits; Infinity where there is none or it cannot be read. */
function openFileLimit (): number {
  let limits: string
  try {
    limits = readFileSync('/proc/self/limits', 'utf8')
  } catch {
    return Infinity
  }
  const soft = /^Max open files\s+(\d+|unlimited)/m.exec(limits)?.[1]
  return soft === undefined || soft === 'unlimited' ? Infinity : Number(soft)
}
