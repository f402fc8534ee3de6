/**
 * Assembles the service from its parts, in order: cross-cutting plugins, the application's own
 * (storage, auth), then routes. Building does not listen: tests call `app.inject()` on it.
 */
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import Fastify, { LogController, type FastifyInstance } from 'fastify'
import { trace } from '@opentelemetry/api'
import type { DestinationStream } from 'pino'
import type { Config } from './config.js'
import { answerClientError, answerExpectAndConnect, ErrorSchema, registerErrorHandlers, replyWithFrameworkError } from './errors.js'
import auth, { requireTokensPlugin } from './plugins/auth.js'
import connectionLimit from './plugins/connection-limit.js'
import cors from './plugins/cors.js'
import docs, { docsPage } from './plugins/docs.js'
import fileLimit from './plugins/file-limit.js'
import jsonBody from './plugins/json-body.js'
import metricsCollection from './plugins/metrics.js'
import overload from './plugins/overload.js'
import pipelining from './plugins/pipelining.js'
import rateLimit from './plugins/rate-limit.js'
import requestHooks, { requestIdFrom } from './plugins/request-hooks.js'
import securityHeaders, { pageSecurityHeaders } from './plugins/security-headers.js'
import staticFiles, { apiPathSegments } from './plugins/static-files.js'
import storage from './plugins/storage.js'
import health from './routes/health.js'
import { statusSchemas } from './routes/health.schemas.js'
import metrics from './routes/metrics.js'
import root from './routes/root.js'
import { greetingSchemas } from './routes/root.schemas.js'
import users from './routes/users.js'
import { userSchemas } from './routes/users.schemas.js'
import type { Tracing } from './tracing.js'
import { createValidatorCompiler, formatSchemaError } from './validation.js'

// Node 24.12 and later take this option; Node 22, whose types these are, ignores it.
declare module 'node:http' {
  interface ServerOptions {
    optimizeEmptyRequests?: boolean
  }
}

export interface BuildOptions {
  /** Where log lines go; standard output when absent. */
  logStream?: DestinationStream
  /** Traces of requests and queries (`src/tracing.ts`), when the environment asks for them. */
  tracing?: Pick<Tracing, 'plugin'>
  /** How many log lines `logStream` has dropped, for the metrics. */
  droppedLogLines?: () => number
}

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

function loggerOptions (config: Config, options: BuildOptions) {
  return {
    level: config.logLevel,
    redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
    ...(options.tracing !== undefined && { mixin: traceIds }),
    ...(options.logStream && { stream: options.logStream })
  }
}

const trustNearest = (hops: number) => (_address: string, hop: number) => hop < hops

export async function buildApp (config: Config, options: BuildOptions = {}): Promise<FastifyInstance> {
  const app = Fastify({
    logger: loggerOptions(config, options),
    // One access-log line per request comes from request-hooks.ts instead of Fastify's two.
    logController: new LogController({ disableRequestLogging: true }),
    requestIdHeader: false,
    genReqId: requestIdFrom,
    bodyLimit: config.bodyLimit,
    schemaErrorFormatter: formatSchemaError,
    frameworkErrors: replyWithFrameworkError,
    clientErrorHandler: answerClientError,
    // Slow clients get the time limits below; a request without Host is refused in JSON by
    // request-hooks.ts. A bodiless request arrives as an ended stream, so its client leaving shows
    // on `reply.raw`'s 'close' (docs/decisions/0016-optimize-empty-requests.md).
    http: { headersTimeout: config.timeouts.headersMs, connectionsCheckingInterval: 1000, requireHostHeader: false, optimizeEmptyRequests: true },
    requestTimeout: config.timeouts.requestMs,
    keepAliveTimeout: config.timeouts.keepAliveMs,
    // Off by default: then X-Forwarded-For is ignored, so no client can name itself another.
    // A hop count trusts that many proxies nearest the service, whatever their addresses.
    trustProxy: typeof config.trustProxy === 'number' ? trustNearest(config.trustProxy) : config.trustProxy
  }).withTypeProvider<TypeBoxTypeProvider>()
  answerExpectAndConnect(app)

  // Named schemas, referred to by `$id` from the routes' schemas (route-schemas.ts).
  const namedSchemas = [ErrorSchema, ...statusSchemas, ...greetingSchemas, ...userSchemas]
  for (const schema of namedSchemas) app.addSchema(schema)
  app.setValidatorCompiler(createValidatorCompiler(namedSchemas))
  // First, so that every request a connection has sent is counted as it arrives: one with
  // none unanswered may be closed to make room for new connections.
  await app.register(connectionLimit, { maxConnections: config.maxConnections })
  // Next, so that a request pipelined behind another has nothing else begun while it waits.
  await app.register(pipelining)
  // Next, so that every route and hook is instrumented.
  if (options.tracing !== undefined) await app.register(options.tracing.plugin)
  registerErrorHandlers(app)
  // Files are served last, and not under the path of any route registered from here on.
  const apiSegments = apiPathSegments(app)

  await app.register(jsonBody, { bodyLimit: config.bodyLimit })
  await app.register(requestHooks)
  await app.register(securityHeaders)
  await app.register(cors, { origin: config.corsOrigin })
  await app.register(docs, { auth: config.auth })
  await app.register(storage, { database: config.database, traced: options.tracing !== undefined })
  if (config.metrics) await app.register(metricsCollection, { droppedLogLines: options.droppedLogLines })
  await app.register(auth, { jwt: config.jwt })

  // The API: shed, rate-limited and token-protected, in that order. Tokens are registered before
  // the limiter so that their 401 is declared with the limiter's headers; the limiter's hook still
  // runs first.
  await app.register(async (api) => {
    await api.register(overload, config.overload)
    await api.register(requireTokensPlugin, { mode: config.auth })
    if (config.rateLimit !== undefined) await api.register(rateLimit, config.rateLimit)
    await api.register(root)
    await api.register(users, { idempotencyKeyTtlMs: config.idempotencyKeyTtlMs })
  })
  await app.register(health)
  if (config.metrics) {
    // Follows AUTH like the API, but is neither shed nor rate-limited: scrapes matter most under load.
    await app.register(async (operations) => {
      await operations.register(requireTokensPlugin, { mode: config.auth })
      await operations.register(metrics)
    })
  }
  // Pages for a browser, under helmet's headers and a bound on the files sent at once: the
  // docs page, and files last.
  await app.register(async (pages) => {
    await pages.register(pageSecurityHeaders)
    await pages.register(fileLimit)
    await pages.register(docsPage)
    await pages.register(staticFiles, { root: config.staticDir, apiSegments })
  })

  return app
}
