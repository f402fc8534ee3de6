/**
 * A child span for every query, in its request's trace: the SQL with placeholders, never values,
 * and whether it failed.
 */
import { SpanKind, SpanStatusCode, trace } from '@opentelemetry/api'
import type { CompiledQuery } from 'kysely'
import type { QueryRunner } from './queries.js'

const tracer = trace.getTracer('user-records-service/db')

export function withQuerySpans (runner: QueryRunner, system: 'sqlite' | 'postgresql'): QueryRunner {
  const inSpan = async <T>(operation: 'read' | 'write', queries: CompiledQuery[], run: () => Promise<T>): Promise<T> =>
    await tracer.startActiveSpan(`db.${operation}`, {
      kind: SpanKind.CLIENT,
      attributes: { 'db.system.name': system, 'db.query.text': queries.map((query) => query.sql).join(';\n') }
    }, async (span) => {
      try {
        return await run()
      } catch (error) {
        span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) })
        throw error
      } finally {
        span.end()
      }
    })
  return {
    ...runner,
    read: async (query) => await inSpan('read', [query], async () => await runner.read(query)),
    readTogether: async (first, second) => await inSpan('read', [first, second], async () => await runner.readTogether(first, second)),
    write: async (query) => await inSpan('write', [query], async () => await runner.write(query))
  }
}
