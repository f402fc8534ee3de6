/**
 * Kysely over the SQLite worker's one connection, statement by statement outside its batches: the
 * migrations run through it before the worker takes any batch, so the worker itself loads no Kysely.
 */
import {
  CompiledQuery, Kysely, SqliteAdapter, SqliteIntrospector, SqliteQueryCompiler,
  type DatabaseConnection, type Driver, type QueryResult
} from 'kysely'
import { migrateToLatest, type MigrationOutcome } from './migrate.js'

export type RunStatement = (sql: string, parameters: readonly unknown[]) => Promise<{ rows: unknown[], changes?: number }>

export async function migrateThroughWorker (run: RunStatement): Promise<MigrationOutcome> {
  const connection: DatabaseConnection = {
    async executeQuery<R> ({ sql, parameters }: CompiledQuery): Promise<QueryResult<R>> {
      const { rows, changes } = await run(sql, parameters)
      return { rows: rows as R[], ...(changes !== undefined && { numAffectedRows: BigInt(changes) }) }
    },
    async * streamQuery () { throw new Error('migrations on the SQLite worker do not stream rows') }
  }
  const driver: Driver = {
    init: async () => {},
    acquireConnection: async () => connection,
    beginTransaction: async () => { await connection.executeQuery(CompiledQuery.raw('begin')) },
    commitTransaction: async () => { await connection.executeQuery(CompiledQuery.raw('commit')) },
    rollbackTransaction: async () => { await connection.executeQuery(CompiledQuery.raw('rollback')) },
    releaseConnection: async () => {},
    destroy: async () => {}
  }
  const db = new Kysely<any>({
    dialect: {
      createAdapter: () => new SqliteAdapter(),
      createDriver: () => driver,
      createIntrospector: (db) => new SqliteIntrospector(db),
      createQueryCompiler: () => new SqliteQueryCompiler()
    }
  })
  return await migrateToLatest(db, 'sqlite')
}
