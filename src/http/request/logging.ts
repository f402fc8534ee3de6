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

/**
 * Query parameters whose values a log line shows: they say how a page was asked for and carry
 * nothing of a person. Every other value (an address, a name, a prefix, a cursor that holds a sort
 * key, a ticket) is written as `***`.
 */
const SHOWN_PARAMETERS = new Set(['limit', 'offset', 'sort', 'fields', 'count', 'created_after', 'created_before'])
const MASK = '***'

/** Decodes a query parameter's name; undefined when it is not valid percent-encoding. */
function parameterName (encoded: string): string | undefined {
  try {
    return decodeURIComponent(encoded.replaceAll('+', ' '))
  } catch {
    return undefined
  }
}

/**
 * A request target as log lines write it: its path, and its query with every value that could be
 * personal or a credential masked; an absolute-form target loses its user information too.
 */
export function loggedUrl (url: string): string {
  let target = url
  if (!target.startsWith('/') && URL.canParse(target)) {
    const parsed = new URL(target)
    if (parsed.username !== '' || parsed.password !== '') target = `${parsed.protocol}//${parsed.host}${parsed.pathname}${parsed.search}`
  }
  const start = target.indexOf('?')
  if (start === -1) return target
  const query = target.slice(start + 1).split('&').map((pair) => {
    const equals = pair.indexOf('=')
    if (equals === -1) return pair
    const name = parameterName(pair.slice(0, equals))
    const value = pair.slice(equals + 1)
    const shown = name !== undefined && (SHOWN_PARAMETERS.has(name) || (name === 'after' && /^[0-9]*$/.test(value)))
    return shown ? pair : `${pair.slice(0, equals)}=${MASK}`
  })
  return `${target.slice(0, start)}?${query.join('&')}`
}

export function loggerOptions (level: string, options: { traced: boolean, stream?: DestinationStream | undefined }) {
  return {
    level,
    redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
    ...(options.traced && { mixin: traceIds }),
    ...(options.stream && { stream: options.stream })
  }
}
