/**
 * `npm run backup -- <file>`: copies the SQLite database while the service runs. `VACUUM INTO`
 * reads one snapshot, and the copy is synced beside the target before it takes its name, so a file
 * by that name is always a whole backup.
 */
import '../supported-node.js'
import { closeSync, existsSync, fsyncSync, linkSync, openSync, rmSync } from 'node:fs'
import { dirname } from 'node:path'
import { ConfigError, loadDatabaseConfig, readEnvironment } from '../../config/config.js'
import { openSqliteFile } from '../../storage/sqlite-file.js'

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
  const database = loadDatabaseConfig(readEnvironment())
  if (database.dialect !== 'sqlite') throw new Error('DATABASE_URL is a PostgreSQL database: back it up with pg_dump (docs/deployment.md, Backups)')
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
