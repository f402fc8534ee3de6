/** The databases the parts measure on: SQLite files seeded with users, and PostgreSQL schemas of their own. */
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import pg from 'pg'
import { createDatabase } from '../src/storage/database.js'
import { migrateToLatest } from '../src/storage/migrate.js'
import { folder, root } from './options.js'

/**
 * A database of `size` users, made with the schema and migrations of the source tree at
 * `source`: the service's own, or the one at `--against` (a build refuses a database that a
 * later one has migrated further).
 */
export async function seededDatabase (size: number, source = root): Promise<string> {
  const file = join(folder, `seed-${size}${source === root ? '' : '-against'}.db`)
  const module = async <T>(path: string): Promise<T> => await import(pathToFileURL(join(source, path)).href) as T
  const { createDatabase } = await module<typeof import('../src/storage/database.js')>('src/storage/database.ts')
  const { migrateToLatest } = await module<typeof import('../src/storage/migrate.js')>('src/storage/migrate.ts')
  const { db } = await createDatabase({ dialect: 'sqlite', filename: file })
  await migrateToLatest(db, 'sqlite')
  await db.transaction().execute(async (transaction) => {
    for (let first = 1; first <= size; first += 1000) {
      // A millisecond apart, as users stored one at a time are, rather than a statement's thousand at one time.
      const batch = Array.from({ length: Math.min(1000, size - first + 1) }, (_, i) => ({
        name: `user${first + i}`, email: `user${first + i}@example.com`, created_at: new Date(Date.UTC(2026, 0, 1) + first + i).toISOString()
      }))
      await transaction.insertInto('users').values(batch).execute()
    }
  })
  await db.destroy()
  return file
}

/** A schema of its own on PostgreSQL at `url`, migrated; a client working in it; the URL that points the service at it. */
export async function postgresSchema (url: string, schema: string) {
  const admin = new pg.Client({ connectionString: url })
  await admin.connect()
  await admin.query(`drop schema if exists ${schema} cascade; create schema ${schema}`)
  const serviceUrl = `${url}${url.includes('?') ? '&' : '?'}options=${encodeURIComponent(`-c search_path=${schema}`)}`
  const { db } = await createDatabase({ dialect: 'postgres', connectionString: serviceUrl, poolSize: 1 })
  await migrateToLatest(db, 'postgres')
  await db.destroy()
  await admin.query(`set search_path = ${schema}`)
  return {
    admin,
    serviceUrl,
    drop: async () => {
      await admin.query(`drop schema ${schema} cascade`)
      await admin.end()
    }
  }
}
