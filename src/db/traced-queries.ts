/**
 * A child span for every query, in the trace of the request that runs it (when tracing is
 * on, `src/tracing.ts`): its SQL (with placeholders, never values), the database, and whether
 * it failed.
 */
import { SpanKind, SpanStatusCode, trace } from '@opentelemetry/api'
import type { CompiledQuery } from 'kysely'
import type { QueryRunner } from './queries.js'

const tracer = trace.getTracer('user-records-service/db')

export function withQuerySpans (runner: QueryRunner, system: 'sqlite' | 'postgresql'): QueryRunner {
  const traced = (operation: 'read' | 'write', run: QueryRunner['read']): QueryRunner['read'] =>
    async <Row>(query: CompiledQuery<Row>) => await tracer.startActiveSpan(`db.${operation}`, {
      kind: SpanKind.CLIENT,
      attributes: { 'db.system.name': system, 'db.query.text': query.sql }
    }, async (span) => {
      try {
        return await run(query)
      } catch (error) {
        span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) })
        throw error
      } finally {
        span.end()
      }
    })
  return { ...runner, read: traced('read', runner.read), write: traced('write', runner.write) }
}
