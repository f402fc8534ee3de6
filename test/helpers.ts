/** Shared test fixtures: an app on a fresh in-memory database, and a captured log. */
import assert from 'node:assert/strict'
import http from 'node:http'
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

export interface RawResponse {
  statusCode: number
  headers: Record<string, string | string[] | undefined>
  body: string
}

/** A request over real HTTP with the path sent exactly as given (fetch would normalise it). */
export function rawRequest (
  port: number,
  options: { method?: string, path: string, headers?: Record<string, string>, body?: string }
): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const request = http.request({ host: '127.0.0.1', port, method: options.method ?? 'GET', path: options.path, headers: options.headers }, (response) => {
      let body = ''
      response.setEncoding('utf8')
      response.on('data', (chunk: string) => { body += chunk })
      response.on('end', () => resolve({ statusCode: response.statusCode ?? 0, headers: response.headers, body }))
    })
    request.on('error', reject)
    request.end(options.body)
  })
}

/** Builds the app and listens on a free loopback port. */
export async function listeningApp (t: TestContext, env: Env = {}): Promise<{ app: FastifyInstance, port: number }> {
  const app = await testApp(t, env)
  await app.listen({ host: '127.0.0.1', port: 0 })
  const address = app.server.address()
  assert.ok(address !== null && typeof address === 'object')
  return { app, port: address.port }
}
