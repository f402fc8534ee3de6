/**
 * `npm run backup -- <file>`: copies the configured SQLite database into a new file while the
 * service runs. `VACUUM INTO` reads one snapshot, in one read transaction, so the copy holds
 * every commit before it began and none after, whatever the service writes meanwhile (in WAL
 * mode a reader holds up no writer); copying the file itself could catch it between a commit
 * and its checkpoint. SQLite does not sync what VACUUM INTO writes, so the copy is written
 * beside the target, synced, and only then given the target's name: a file by that name is
 * always a whole backup, even after a crash. PostgreSQL has its own tools.
 */
import '../supported-node.js'
import { closeSync, existsSync, fsyncSync, linkSync, openSync, rmSync } from 'node:fs'
import { dirname } from 'node:path'
import { ConfigError, loadConfig, readEnvironment } from '../config.js'
import { openSqliteFile } from '../db/database.js'

function sync (path: string): void {
  const fd = openSync(path, 'r')
  try {
    fsyncSync(fd)
  } finally {
    closeSync(fd)
  }
}

/** The database file to copy, and where to, once the request makes sense. */
function backupOf (target: string | undefined): { source: string, target: string } {
  const { database } = loadConfig(readEnvironment())
  if (database.dialect !== 'sqlite') throw new Error('DATABASE_URL is a PostgreSQL database: back it up with pg_dump (README, Backups)')
  if (database.filename === ':memory:') throw new Error('DATABASE_URL is an in-memory database: there is no file to back up')
  if (target === undefined || target === '') throw new Error('name the file to write: npm run backup -- <file>')
  if (existsSync(target)) throw new Error(`${target} already exists, and a backup never overwrites a file`)
  if (!existsSync(dirname(target))) throw new Error(`${dirname(target)} does not exist`)
  return { source: database.filename, target }
}

try {
  const { source, target } = backupOf(process.argv[2])
  const sqlite = await openSqliteFile(source, { mustExist: true }).catch((error: Error) => {
    throw new Error(`cannot open ${source}: ${error.message}`)
  })
  const partial = `${target}.${process.pid}.partial`
  try {
    sqlite.prepare('vacuum into ?').run(partial)
    sync(partial)
    linkSync(partial, target) // unlike a rename, never replaces a file that appeared meanwhile
    sync(dirname(target))
  } finally {
    sqlite.close()
    rmSync(partial, { force: true })
  }
  process.stdout.write(`Backed up ${source} to ${target}.\n`)
} catch (error) {
  const message = error instanceof ConfigError ? `Configuration error: ${error.message}` : `Backup failed: ${error instanceof Error ? error.message : String(error)}`
  process.stderr.write(`${message}\n`)
  process.exitCode = 1
}
