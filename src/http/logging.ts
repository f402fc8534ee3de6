/** The logger's options: level, redaction, and the trace a line is written in. */
import { trace } from '@opentelemetry/api'
import type { DestinationStream } from 'pino'

/** The ids of the trace a log line is written in, so that logs and traces can be joined. */
function traceIds (): object {
  const span = trace.getActiveSpan()
  if (span === undefined) return {}
  const { traceId, spanId } = span.spanContext()
  return { trace_id: traceId, span_id: spanId }
}

/**
 * Credentials never reach a log line: they are replaced at the top of a logged object and under
 * `err`, where a driver's error brings its settings. No path begins with a wildcard
 * (docs/decisions/0014-redaction-paths.md).
 */
const CREDENTIALS = ['authorization', 'token', 'password', 'connectionString']
const REDACTED_PATHS = [
  'req.headers.authorization', 'req.headers.cookie', 'headers.authorization', 'headers.cookie', 'err.headers.authorization',
  ...CREDENTIALS, ...CREDENTIALS.map((name) => `err.${name}`)
]

export function loggerOptions (level: string, options: { traced: boolean, stream?: DestinationStream | undefined }) {
  return {
    level,
    redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
    ...(options.traced && { mixin: traceIds }),
    ...(options.stream && { stream: options.stream })
  }
}
