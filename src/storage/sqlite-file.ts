/**
 * A SQLite file opened with the service's settings, for the worker, `npm run migrate`, backups and
 * tests; this module loads no Kysely, so that the worker starts without it.
 */
import { accessSync, constants, mkdirSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import type SQLite from 'better-sqlite3'

const require = createRequire(import.meta.url)

/** The size the WAL is cut back to when it starts again, above the 4 MB it reaches between checkpoints. */
const WAL_SIZE_LIMIT_BYTES = 16 * 1024 * 1024

/** How long SQLite waits for another connection's lock, unless told otherwise. */
const BUSY_TIMEOUT_MS = 5000

/**
 * Asks for WAL mode, trying again while another process opening a new file at the same moment holds
 * it: SQLite refuses the switch at once then, without waiting.
 */
async function switchToWal (database: SQLite.Database): Promise<void> {
  const giveUpAt = performance.now() + BUSY_TIMEOUT_MS
  for (;;) {
    try {
      database.pragma('journal_mode = WAL')
      return
    } catch (error) {
      if ((error as { code?: unknown }).code !== 'SQLITE_BUSY' || performance.now() > giveUpAt) throw error
      await sleep(10)
    }
  }
}

/**
 * Opens SQLite with the service's settings: a busy timeout, WAL, synchronous=FULL so that a commit
 * returns once on disk, a journal_size_limit that gives back what a held read made the WAL grow,
 * and secure_delete, which zeroes what is deleted so that an erased user leaves no bytes behind.
 */
export async function openSqliteFile (filename: string, { mustExist = false } = {}): Promise<SQLite.Database> {
  const BetterSqlite3: typeof SQLite = require('better-sqlite3')
  if (filename !== ':memory:') {
    if (!mustExist) mkdirSync(dirname(filename), { recursive: true })
    refuseUnwritable(filename)
  }
  const database = new BetterSqlite3(filename, { fileMustExist: mustExist })
  database.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`)
  if (filename !== ':memory:') await switchToWal(database)
  database.pragma('synchronous = FULL')
  database.pragma(`journal_size_limit = ${WAL_SIZE_LIMIT_BYTES}`)
  database.pragma('secure_delete = ON')
  return database
}

/**
 * Refuses a database this process cannot write, saying why: SQLite would open it read-only without
 * a word, and every write would fail.
 */
function refuseUnwritable (filename: string): void {
  const folder = dirname(filename)
  const folderProblem = writeProblem(folder)
  if (folderProblem !== undefined) throw new Error(`the folder ${folder} ${folderProblem}: SQLite creates files beside the database (its -wal and -shm)`)
  const fileProblem = writeProblem(filename)
  if (fileProblem !== undefined) throw new Error(`${filename} ${fileProblem}: SQLite would open it read-only, and every write would fail`)
}

/** Why this process may not write `path`; nothing when it may, or when nothing is there yet (SQLite makes the file). */
function writeProblem (path: string): string | undefined {
  try {
    accessSync(path, constants.W_OK)
    return undefined
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === 'ENOENT') return undefined
    return code === 'EROFS' ? 'is on a read-only filesystem' : `is not writable by this process (user id ${process.getuid?.() ?? 'unknown'}, ${code})`
  }
}
