/** Shared test fixtures: an app on a fresh in-memory database, and a captured log. */
import { Writable } from 'node:stream'
import type { TestContext } from 'node:test'
import type { FastifyInstance } from 'fastify'
import { buildApp } from '../src/app.js'
import { loadConfig } from '../src/config.js'

export type Env = Record<string, string>

export function testConfig (env: Env = {}) {
  return loadConfig({ DATABASE_URL: 'sqlite::memory:', LOG_LEVEL: 'silent', ...env })
}

/** Builds the app on its own empty database and closes it when the test ends. */
export async function testApp (t: TestContext, env: Env = {}, logStream?: Writable): Promise<FastifyInstance> {
  const app = await buildApp(testConfig(env), logStream === undefined ? {} : { logStream })
  t.after(() => app.close())
  return app
}

/** A log destination that keeps every line it is given, parsed. */
export function captureLogs (): { stream: Writable, lines: Array<Record<string, any>> } {
  const lines: Array<Record<string, any>> = []
  const stream = new Writable({
    write (chunk, _encoding, callback) {
      for (const line of String(chunk).split('\n')) {
        if (line !== '') lines.push(JSON.parse(line))
      }
      callback()
    }
  })
  return { stream, lines }
}

export function postJson (app: FastifyInstance, url: string, body: unknown) {
  return app.inject({ method: 'POST', url, payload: JSON.stringify(body), headers: { 'content-type': 'application/json' } })
}
