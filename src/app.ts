/**
 * The service, as the list of what it is made of, in order: the HTTP edge, errors, what every
 * request gets, the official plugins, storage, the API, operations, and pages. Building does not
 * listen: tests call `app.inject()` on it, and process/service.ts starts it.
 */
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import Fastify, { LogController, type FastifyInstance, type FastifyPluginCallback } from 'fastify'
import type { DestinationStream } from 'pino'
import type { Config } from './config/config.js'
import edge from './http/edge/transport.js'
import { sendsFiles } from './http/pages/file-limit.js'
import { serverOptions } from './http/edge/server-options.js'
import errors, { unknownPathsAtOnce } from './http/errors.js'
import exposure from './http/exposure.js'
import guards from './http/guards/protect.js'
import { loggerOptions } from './http/request/logging.js'
import metricsCollection, { ServiceMetrics } from './http/request/metrics.js'
import requestContext, { requestIdFrom } from './http/request/request-context.js'
import storage from './http/storage.js'
import cors from './http/request/cors.js'
import { pageSecurityHeaders } from './http/pages/helmet.js'
import staticFiles, { apiPathSegments } from './http/pages/static.js'
import swagger from './http/pages/swagger.js'
import swaggerUi from './http/pages/swagger-ui.js'
import health from './routes/health.js'
import metricsRoute from './routes/metrics.js'
import problems from './routes/problems.js'
import root from './routes/root.js'
import users from './users/index.js'
import events, { UserEvent, webhooksDocument } from './events/index.js'
import { ErrorSchema, ProblemSchema } from './http/schemas.js'
import { statusSchemas } from './routes/health.schemas.js'
import { problemSchemas } from './routes/problems.schemas.js'
import { greetingSchemas } from './routes/root.schemas.js'
import { userSchemas } from './users/user.schemas.js'
import { registerSchemas } from './http/request-validation.js'
import { schemaController } from './http/serializers.js'

export interface BuildOptions {
  /** Where log lines go; standard output when absent. */
  logStream?: DestinationStream
  /** Traces of requests and queries, when the environment asks for them: @fastify/otel's plugin, registered first. */
  tracing?: { plugin: FastifyPluginCallback }
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
  // The schemas routes refer to by `$id`, named once so that the document and generated clients share them.
  registerSchemas(app, [ErrorSchema, ProblemSchema, ...statusSchemas, ...greetingSchemas, ...problemSchemas, ...userSchemas, UserEvent])

  await app.register(edge, { maxConnections: config.maxConnections, bodyLimit: config.bodyLimit })
  if (options.tracing !== undefined) await app.register(options.tracing.plugin)
  await app.register(errors)
  // Files are served last, and not under the path of any route registered from here on.
  const apiSegments = apiPathSegments(app)
  // Made here and handed to what counts something, so that no plugin probes for another.
  const metrics = config.metrics ? new ServiceMetrics() : undefined
  if (metrics !== undefined) await app.register(metricsCollection, { metrics, droppedLogLines: options.droppedLogLines })
  await app.register(requestContext, { observe: metrics?.observe })
  await app.register(cors, { origin: config.corsOrigin })
  await app.register(unknownPathsAtOnce)
  const metricsOnApiPort = config.metrics && config.metricsPort === undefined
  // Some route asks for a token whatever AUTH says: production's /metrics.
  const tokensAlways = metricsOnApiPort && config.metricsAccess === 'token'
  await app.register(swagger, { bearer: config.auth !== 'off' || tokensAlways, signedBy: config.jwt.keys.kind, webhooks: webhooksDocument })
  await app.register(storage, { database: config.database, migrate: config.migrate, traced: options.tracing !== undefined })
  await app.register(exposure, { production: config.production, auth: config.auth, rateLimit: config.rateLimit, metricsOnApiPort, metricsAccess: config.metricsAccess })

  // Each API route declares its guards with app.protect (http/guards/protect.ts).
  await app.register(guards, {
    overload: config.overload,
    rateLimit: config.rateLimit,
    auth: config.auth,
    authScopes: config.authScopes,
    jwt: config.jwt,
    tokensAlways
  })
  await app.register(root)
  await app.register(users, { idempotencyKeyTtlMs: config.idempotencyKeyTtlMs, requireIfMatch: config.requireIfMatch, ownership: config.userOwnership })
  await app.register(events, { config: config.events, dialect: config.database.dialect, metrics: metrics?.registry })
  await app.register(health)
  await app.register(problems)
  if (metricsOnApiPort) await app.register(metricsRoute, { access: config.metricsAccess })
  // Pages for a browser, under helmet's headers and the bound on files sent at once.
  await app.register(async (pages) => {
    await pages.register(pageSecurityHeaders)
    await pages.register(sendsFiles)
    await pages.register(swaggerUi)
    await pages.register(staticFiles, { root: config.staticDir, apiSegments })
  })
  return app
}

/**
 * `/metrics` on a port of its own (`METRICS_PORT`), for a scraper on a private network: no token,
 * no rate limit, and nothing of the API.
 */
export async function buildMetricsApp (app: FastifyInstance): Promise<FastifyInstance> {
  const scrapes = Fastify({ loggerInstance: app.log.child({ port: 'metrics' }), logController: new LogController({ disableRequestLogging: true }) })
  scrapes.get('/metrics', async (_request, reply) => await reply.type(app.metricsRegistry.contentType).send(await app.metricsRegistry.metrics()))
  return scrapes
}
