/**
 * Starts the service: reads the configuration, builds the app, listens, and shuts down
 * gracefully. On SIGTERM or SIGINT it stops accepting connections, lets requests in flight
 * finish (at most 10 s, then it exits 1), closes the database and exits 0.
 */
import { createRequire } from 'node:module'
import closeWithGrace from 'close-with-grace'
import { buildApp } from './app.js'
import { ConfigError, loadConfig, readEnvironment, type Config } from './config.js'
import { DatabaseStartupError } from './plugins/storage.js'

const SHUTDOWN_GRACE_MS = 10_000

function configOrExit (): Config {
  try {
    return loadConfig(readEnvironment())
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error
    process.stderr.write(`Configuration error: ${error.message}\n`)
    process.exit(1)
  }
}

/** A person at a terminal gets readable lines, if the dev dependency pino-pretty is installed. */
function wantsPrettyLogs (): boolean {
  if (process.stdout.isTTY !== true) return false
  try {
    createRequire(import.meta.url).resolve('pino-pretty')
    return true
  } catch {
    return false
  }
}

async function appOrExit (config: Config) {
  try {
    return await buildApp(config, { prettyLogs: wantsPrettyLogs() })
  } catch (error) {
    if (!(error instanceof DatabaseStartupError)) throw error
    process.stderr.write(`Start-up failed: ${error.message.replace(/\s+/g, ' ')}\n`)
    process.exit(1)
  }
}

const config = configOrExit()
const app = await appOrExit(config)

closeWithGrace({ delay: SHUTDOWN_GRACE_MS, logger: app.log }, async ({ signal, err }) => {
  if (err !== undefined) app.log.fatal({ err }, 'fatal error, shutting down')
  else app.log.info({ signal }, 'shutting down: finishing requests in flight')
  await app.close()
})

const address = await app.listen({ port: config.port, host: config.host })
app.log.info(`API documentation at ${address}/documentation`)
