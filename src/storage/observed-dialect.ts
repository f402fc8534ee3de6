/**
 * Every query watched: a failure that means "the database cannot work now" comes out as a
 * `DatabaseUnavailableError`, each outage is logged once as it starts and once as it ends (reads and
 * writes apart), and, with tracing on, each query is a child span of its request.
 */
import { SpanKind, SpanStatusCode, trace } from '@opentelemetry/api'
import type { CompiledQuery, DatabaseConnection, Dialect, Driver } from 'kysely'
import type { OutageLog } from './unavailable.js'

const tracer = trace.getTracer('user-records-service/db')

/** Whether a query only reads: a SELECT, or raw SQL that begins with one. */
const isRead = (query: CompiledQuery): boolean =>
  query.query.kind === 'SelectQueryNode' || (query.query.kind === 'RawNode' && /^\s*select\b/i.test(query.sql))

export interface Observation {
  /** The outages of reads and of writes, each logged as it starts and as it ends. */
  outages: { reads: OutageLog, writes: OutageLog }
  /** The database's name in spans, when tracing is on. */
  traced?: 'sqlite' | 'postgresql' | undefined
}

/**
 * Runs a query as observed: a failure meaning the database cannot work now comes out as a
 * `DatabaseUnavailableError` and counts toward its outage, and with tracing on the query is a span.
 * `run` is told whether the query reads or writes, as decided here.
 */
export function observeQuery<T> ({ outages, traced }: Observation, query: CompiledQuery, run: (operation: 'read' | 'write') => Promise<T>): Promise<T> {
  const operation = isRead(query) ? 'read' : 'write'
  const outage = operation === 'read' ? outages.reads : outages.writes
  if (traced === undefined) return outage.track(run(operation))
  return tracer.startActiveSpan(`db.${operation}`, {
    kind: SpanKind.CLIENT,
    attributes: { 'db.system.name': traced, 'db.query.text': query.sql }
  }, async (span) => {
    try {
      return await outage.track(run(operation))
    } catch (error) {
      span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) })
      throw error
    } finally {
      span.end()
    }
  })
}

/** A dialect whose connections are taken per query and observed, so that a connection that cannot be had counts as an outage. */
export function observed (dialect: Dialect, observation: Observation): Dialect {
  async function execute<R> (connection: () => Promise<DatabaseConnection>, query: CompiledQuery) {
    return await observeQuery(observation, query, async () => await (await connection()).executeQuery<R>(query))
  }

  /** The driver's connections, each taken only when its first query runs. */
  function watchedDriver (driver: Driver): Driver {
    const own = new WeakMap<DatabaseConnection, DatabaseConnection>()
    const ownOf = async (watched: DatabaseConnection) => {
      let connection = own.get(watched)
      if (connection === undefined) {
        connection = await driver.acquireConnection()
        own.set(watched, connection)
      }
      return connection
    }
    return {
      init: async (options) => await driver.init(options),
      async acquireConnection () {
        const watched: DatabaseConnection = {
          executeQuery: async (query) => await execute(async () => await ownOf(watched), query),
          streamQuery: () => { throw new Error('rows are not streamed here') }
        }
        return watched
      },
      beginTransaction: async (watched, settings) => await driver.beginTransaction(await ownOf(watched), settings),
      commitTransaction: async (watched) => await driver.commitTransaction(await ownOf(watched)),
      rollbackTransaction: async (watched) => await driver.rollbackTransaction(await ownOf(watched)),
      async releaseConnection (watched, options) {
        const connection = own.get(watched)
        if (connection !== undefined) await driver.releaseConnection(connection, options)
      },
      destroy: async (options) => await driver.destroy(options)
    }
  }

  return {
    createAdapter: () => dialect.createAdapter(),
    createDriver: () => watchedDriver(dialect.createDriver()),
    createIntrospector: (db) => dialect.createIntrospector(db),
    createQueryCompiler: () => dialect.createQueryCompiler()
  }
}
