/**
 * The service, as the list of what it is made of, in order: the HTTP edge, errors, what every
 * request gets, the official plugins, storage, the API, operations, and pages. Building does not
 * listen: tests call `app.inject()` on it, and process/service.ts starts it.
 */
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import Fastify, { LogController, type FastifyInstance } from 'fastify'
import type { DestinationStream } from 'pino'
import type { Config } from './config/config.js'
import edge from './edge/index.js'
import { sendsFiles } from './edge/file-limit.js'
import { serverOptions } from './edge/server-options.js'
import auth from './plugins/app/auth.js'
import drain from './plugins/app/drain.js'
import errors from './plugins/app/errors.js'
import exposure from './plugins/app/exposure.js'
import { loggerOptions } from './plugins/app/logging.js'
import metricsCollection from './plugins/app/metrics.js'
import overload from './plugins/app/overload.js'
import requestContext, { requestIdFrom } from './plugins/app/request-context.js'
import storage from './plugins/app/storage.js'
import cors from './plugins/external/cors.js'
import { pageSecurityHeaders } from './plugins/external/helmet.js'
import jwt from './plugins/external/jwt.js'
import rateLimit from './plugins/external/rate-limit.js'
import staticFiles, { apiPathSegments } from './plugins/external/static.js'
import swagger from './plugins/external/swagger.js'
import swaggerUi from './plugins/external/swagger-ui.js'
import health from './routes/health.js'
import metrics from './routes/metrics.js'
import root from './routes/root.js'
import users from './routes/users/index.js'
import type { Tracing } from './process/tracing.js'
import { namedSchemas } from './routes/named-schemas.js'
import { registerSchemas } from './validation/request.js'
import { schemaController } from './validation/serializers.js'

export interface BuildOptions {
  /** Where log lines go; standard output when absent. */
  logStream?: DestinationStream
  /** Traces of requests and queries (process/tracing.ts), when the environment asks for them. */
  tracing?: Pick<Tracing, 'plugin'>
  /** How many log lines `logStream` has dropped, for the metrics. */
  droppedLogLines?: () => number
}

export async function buildApp (config: Config, options: BuildOptions = {}): Promise<FastifyInstance> {
  const app = Fastify({
    ...serverOptions(config),
    logger: loggerOptions(config.logLevel, { traced: options.tracing !== undefined, stream: options.logStream }),
    // One access-log line per request comes from request-context.ts instead of Fastify's two.
    logController: new LogController({ disableRequestLogging: true }),
    requestIdHeader: false,
    genReqId: requestIdFrom,
    schemaController
  }).withTypeProvider<TypeBoxTypeProvider>()
  registerSchemas(app, namedSchemas)

  await app.register(edge, { maxConnections: config.maxConnections, bodyLimit: config.bodyLimit })
  if (options.tracing !== undefined) await app.register(options.tracing.plugin)
  await app.register(errors)
  // Files are served last, and not under the path of any route registered from here on.
  const apiSegments = apiPathSegments(app)
  const tokenRules = { mode: config.auth, scopes: config.authScopes, maxLifetimeMs: config.jwt.maxLifetimeMs }
  await app.register(drain)
  if (config.metrics) await app.register(metricsCollection, { droppedLogLines: options.droppedLogLines })
  await app.register(requestContext)
  await app.register(cors, { origin: config.corsOrigin })
  await app.register(swagger, { auth: config.auth, signedBy: config.jwt.keys.kind })
  await app.register(storage, { database: config.database, traced: options.tracing !== undefined })
  await app.register(jwt, { jwt: config.jwt })
  await app.register(exposure, { production: config.production, auth: config.auth, rateLimit: config.rateLimit })

  // The API: shed, rate-limited and token-protected, in that order. Tokens are registered before
  // the limiter so that their 401 is declared with the limiter's headers; its hook runs first.
  await app.register(async (api) => {
    await api.register(overload, config.overload)
    await api.register(auth, tokenRules)
    if (config.rateLimit !== undefined) await api.register(rateLimit, config.rateLimit)
    await api.register(root)
    await api.register(users, { idempotencyKeyTtlMs: config.idempotencyKeyTtlMs, requireIfMatch: config.requireIfMatch })
  })
  await app.register(health)
  if (config.metrics) {
    // Follows AUTH like the API, but is neither shed nor rate-limited: scrapes matter most under load.
    await app.register(async (operations) => {
      await operations.register(auth, tokenRules)
      await operations.register(metrics)
    })
  }
  // Pages for a browser, under helmet's headers and the bound on files sent at once.
  await app.register(async (pages) => {
    await pages.register(pageSecurityHeaders)
    await pages.register(sendsFiles)
    await pages.register(swaggerUi)
    await pages.register(staticFiles, { root: config.staticDir, apiSegments })
  })
  return app
}
