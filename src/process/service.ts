/**
 * Starts the service and shuts it down gracefully: on SIGTERM it drains for SHUTDOWN_DRAIN_MS, then
 * (at once on SIGINT) stops accepting connections, lets requests finish, closes the database and
 * exits.
 */
import { createRequire } from 'node:module'
import { setTimeout as sleep } from 'node:timers/promises'
import closeWithGrace from 'close-with-grace'
import type { DestinationStream } from 'pino'
import { buildApp, buildMetricsApp, type BuildOptions } from '../app.js'
import { ConfigError, loadConfig, readEnvironment, SHUTDOWN_GRACE_MS, type Config } from '../config/config.js'
import { standardOutput } from './log-output.js'
import { DatabaseStartupError } from '../http/storage.js'

function configOrExit (): Config {
  try {
    return loadConfig(readEnvironment())
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error
    process.stderr.write(`Configuration error: ${error.message}\n`)
    process.exit(1)
  }
}

/**
 * A terminal gets readable lines when pino-pretty is installed, formatted in the main thread, since
 * pino's transports would load worker files from pino's own folder.
 */
function prettyLogStream (): DestinationStream | undefined {
  if (process.stdout.isTTY !== true) return undefined
  let pretty: typeof import('pino-pretty')
  try {
    pretty = createRequire(import.meta.url)('pino-pretty')
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'MODULE_NOT_FOUND') return undefined
    throw error
  }
  return pretty.build({ translateTime: 'HH:MM:ss.l', ignore: 'pid,hostname' })
}

async function appOrExit (config: Config, options: BuildOptions) {
  try {
    return await buildApp(config, options)
  } catch (error) {
    if (!(error instanceof DatabaseStartupError)) throw error
    process.stderr.write(`Start-up failed: ${error.message.replace(/\s+/g, ' ')}\n`)
    process.exit(1)
  }
}

const config = configOrExit()
// Loaded only when the environment asks for traces, so that without them nothing of
// OpenTelemetry's SDK runs.
const tracing = config.tracing === undefined ? undefined : (await import('./tracing.js')).startTracing(config.tracing.serviceName)
const pretty = prettyLogStream()
const output = pretty === undefined ? standardOutput() : undefined
const app = await appOrExit(config, { logStream: output?.stream ?? pretty, tracing, droppedLogLines: output?.droppedLines })
const metricsApp = config.metricsPort === undefined ? undefined : await buildMetricsApp(app)
output?.reportDropsTo(app.log)
tracing?.reportFailuresTo(app.log)

closeWithGrace({ delay: config.shutdownDrainMs + SHUTDOWN_GRACE_MS, logger: app.log }, async ({ signal, err }) => {
  if (err !== undefined) {
    app.log.fatal({ err }, 'fatal error, shutting down')
  } else if (signal === 'SIGTERM' && config.shutdownDrainMs > 0) {
    app.log.info({ signal, drainMs: config.shutdownDrainMs }, 'draining: /ready answers 503, requests are still answered')
    app.startDraining()
    await sleep(config.shutdownDrainMs)
  }
  if (err === undefined) app.log.info({ signal }, 'shutting down: finishing requests in flight')
  await app.close()
  await metricsApp?.close()
  await tracing?.shutdown()
})

/** Why the service cannot listen where PORT and HOST say, for the errors an operator can mend. */
const LISTEN_FAILURES: Record<string, string> = {
  EADDRINUSE: 'another process holds that port (set PORT to a free one)',
  EACCES: 'not permitted (ports below 1024 need privileges: set PORT to 1024 or above)',
  EADDRNOTAVAIL: 'HOST is not an address of this machine',
  ENOTFOUND: 'HOST could not be resolved to an address',
  EAI_AGAIN: 'HOST could not be resolved to an address'
}

async function listenOrExit (server: typeof app, port: number, name: string): Promise<string> {
  try {
    return await server.listen({ port, host: config.host })
  } catch (error) {
    const reason = LISTEN_FAILURES[(error as NodeJS.ErrnoException).code ?? '']
    if (reason === undefined) throw error
    process.stderr.write(`Start-up failed: cannot listen on ${config.host} port ${port}: ${reason.replace('PORT', name)}\n`)
    await app.close()
    await metricsApp?.close()
    process.exit(1)
  }
}

if (metricsApp !== undefined) app.log.info(`metrics at ${await listenOrExit(metricsApp, config.metricsPort!, 'METRICS_PORT')}/metrics`)
const address = await listenOrExit(app, config.port, 'PORT')
app.log.info(`API documentation at ${address}/documentation`)
