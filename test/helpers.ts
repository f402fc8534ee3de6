/** Shared test fixtures: an app on a fresh in-memory database, and a captured log. */
import assert from 'node:assert/strict'
import http from 'node:http'
import { randomBytes } from 'node:crypto'
import { once } from 'node:events'
import { mkdtempSync, rmSync } from 'node:fs'
import net from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import { setTimeout as sleep } from 'node:timers/promises'
import type { TestContext } from 'node:test'
import type { FastifyInstance } from 'fastify'
import pg from 'pg'
import { buildApp } from '../src/app.js'
import { loadConfig } from '../src/config/config.js'

export type Env = Record<string, string>

/**
 * The configuration of an in-process test: an in-memory database, no log, and no load shedding,
 * which a busy machine could set off in any test (a test of shedding turns it on).
 */
export function testConfig (env: Env = {}) {
  return loadConfig({ DATABASE_URL: 'sqlite::memory:', LOG_LEVEL: 'silent', OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: '0', OVERLOAD_MAX_HEAP_MB: '0', ...env })
}

/** Builds the app on its own empty database and closes it when the test ends. */
export async function testApp (t: TestContext, env: Env = {}, logStream?: Writable): Promise<FastifyInstance> {
  const app = await buildApp(testConfig(env), logStream === undefined ? {} : { logStream })
  t.after(() => app.close())
  return app
}

/** Builds the app on a fresh database of the given backend. */
export async function testAppOn (t: TestContext, database: TestDatabase, env: Env = {}, logStream?: Writable): Promise<FastifyInstance> {
  return await testApp(t, { DATABASE_URL: await database.url(t), ...env }, logStream)
}

/** A folder of the test's own, removed when it ends. */
export function temporaryFolder (t: TestContext): string {
  const folder = mkdtempSync(join(tmpdir(), 'service-test-'))
  t.after(() => rmSync(folder, { recursive: true, force: true }))
  return folder
}

const postgresUrl = process.env.TEST_DATABASE_URL

export interface TestDatabase {
  name: 'SQLite' | 'PostgreSQL' | 'PostgreSQL behind PgBouncer'
  /** Why this backend's tests are skipped, or false when they run. */
  skip: string | false
  /** A fresh, empty database for one test, usable by several processes at once. */
  url: (t: TestContext) => Promise<string>
}

/**
 * Every test that touches storage runs once per backend. PostgreSQL runs when
 * TEST_DATABASE_URL is set; each test gets a schema of its own, dropped when it ends.
 */
export const testDatabases: TestDatabase[] = [
  { name: 'SQLite', skip: false, url: async (t) => `sqlite:${join(temporaryFolder(t), 'app.db')}` },
  {
    name: 'PostgreSQL',
    skip: postgresUrl === undefined ? 'TEST_DATABASE_URL is not set' : false,
    url: (t) => postgresSchema(t, postgresUrl as string)
  }
]

/** A database of its own on the test server, dropped (if still there) when the test ends. */
export async function postgresDatabase (t: TestContext, prefix = 'test'): Promise<{ name: string, url: string }> {
  const name = `${prefix}_${randomBytes(6).toString('hex')}`
  await postgresQuery(`create database ${name}`)
  t.after(() => postgresQuery(`drop database if exists ${name} with (force)`))
  const url = new URL(postgresUrl as string)
  url.pathname = `/${name}`
  return { name, url: url.href }
}

/** Runs an admin statement (create or drop a schema, read pg_stat_activity) on the test server. */
export async function postgresQuery<Row extends pg.QueryResultRow = pg.QueryResultRow> (text: string, values: unknown[] = [], url = postgresUrl): Promise<Row[]> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    return (await client.query<Row>(text, values)).rows
  } finally {
    await client.end()
  }
}

async function postgresSchema (t: TestContext, serverUrl: string): Promise<string> {
  const schema = `test_${randomBytes(6).toString('hex')}`
  await postgresQuery(`create schema ${schema}`)
  t.after(() => postgresQuery(`drop schema ${schema} cascade`))
  const url = new URL(serverUrl)
  url.searchParams.set('options', `-c search_path=${schema}`)
  // Lets a test find this schema's connections in pg_stat_activity.
  url.searchParams.set('application_name', schema)
  return url.href
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

/** Waits until `done()` holds, or `withinMs` has passed, checking every `everyMs`. */
export async function waitFor (done: () => boolean, withinMs: number, everyMs = 50): Promise<void> {
  for (let waited = 0; waited < withinMs && !done(); waited += everyMs) await sleep(everyMs)
}

/** GET `url` again every `everyMs` until it answers `status` or `withinMs` has passed; the last answer. */
export async function getUntil (app: FastifyInstance, url: string, status: number, withinMs: number, everyMs = 25) {
  let response = await app.inject(url)
  for (let waited = 0; waited < withinMs && response.statusCode !== status; waited += everyMs) {
    await sleep(everyMs)
    response = await app.inject(url)
  }
  return response
}

/**
 * Asks again, every 100 ms for up to `withinMs`, while the answer is 503: a bound or overload
 * protection that gives way a moment after the load that set it off has gone.
 */
export async function askWhileUnavailable (ask: () => Promise<RawResponse>, withinMs = 5000): Promise<RawResponse> {
  const until = Date.now() + withinMs
  for (;;) {
    const response = await ask()
    if (response.statusCode !== 503 || Date.now() >= until) return response
    await sleep(100)
  }
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
  options: { method?: string, path: string, headers?: Record<string, string>, body?: string, agent?: http.Agent }
): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const { method = 'GET', path, headers, agent } = options
    const request = http.request({ host: '127.0.0.1', port, method, path, headers, ...(agent !== undefined && { agent }) }, (response) => {
      let body = ''
      response.setEncoding('utf8')
      response.on('data', (chunk: string) => { body += chunk })
      response.on('end', () => resolve({ statusCode: response.statusCode ?? 0, headers: response.headers, body }))
    })
    request.on('error', (error) => {
      error.message = `${options.method ?? 'GET'} ${options.path}: ${error.message}`
      reject(error)
    })
    request.end(options.body)
  })
}

/** A JSON POST over real HTTP. */
export function postJsonOver (port: number, path: string, body: unknown): Promise<RawResponse> {
  return rawRequest(port, { method: 'POST', path, body: JSON.stringify(body), headers: { 'content-type': 'application/json' } })
}

/** Builds the app and listens on a free loopback port. */
export async function listeningApp (t: TestContext, env: Env = {}, logStream?: Writable): Promise<{ app: FastifyInstance, port: number }> {
  const app = await testApp(t, env, logStream)
  await app.listen({ host: '127.0.0.1', port: 0 })
  const address = app.server.address()
  assert.ok(address !== null && typeof address === 'object')
  return { app, port: address.port }
}

/**
 * Opens a raw connection and collects whatever the server sends until the connection closes,
 * by the server or reset (`reset`: a write or read failed, as when the server closes while
 * the client still sends).
 */
export async function rawConnection (port: number) {
  const socket = net.connect(port, '127.0.0.1')
  await once(socket, 'connect')
  let received = ''
  let reset = false
  socket.setEncoding('utf8')
  socket.on('data', (chunk: string) => { received += chunk })
  socket.on('error', () => { reset = true })
  const closed = new Promise<string>((resolve) => { socket.once('close', () => { resolve(received) }) })
  return { socket, closed, received: () => received, wasReset: () => reset }
}

/** helmet's headers that govern what a page may do, and mean nothing on JSON. */
export const PAGE_ONLY_HEADERS = ['cross-origin-opener-policy', 'origin-agent-cluster', 'referrer-policy', 'x-dns-prefetch-control',
  'x-permitted-cross-domain-policies']

/** The OpenAPI document the service serves with these settings. */
export async function openApiDocument (t: TestContext, env: Env = {}) {
  const app = await testApp(t, env)
  const response = await app.inject('/documentation/json')
  assert.equal(response.statusCode, 200)
  return response.json()
}
