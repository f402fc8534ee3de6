/** `npm run migrate`: brings the configured database's schema up to date, then exits. */
import '../supported-node.js'
import { ConfigError, loadDatabaseConfig, readEnvironment } from '../../config/config.js'
import { createDatabase } from '../../storage/database.js'
import { migrateToLatest } from '../../storage/migrate.js'

try {
  const database = loadDatabaseConfig(readEnvironment())
  // A migration may take as long as it needs here; at start-up it has seconds.
  const { db } = await createDatabase(database, { unbounded: true })
  try {
    const { applied, newer } = await migrateToLatest(db, database.dialect)
    process.stdout.write(newer.length > 0
      ? `Nothing to apply: a newer version of the service has migrated the database further (${newer.join(', ')}).\n`
      : applied.length === 0 ? 'Schema is up to date.\n' : `Applied: ${applied.join(', ')}\n`)
  } finally {
    await db.destroy()
  }
} catch (error) {
  const message = error instanceof ConfigError ? `Configuration error: ${error.message}` : `Migration failed: ${String(error)}`
  process.stderr.write(`${message}\n`)
  process.exitCode = 1
}
