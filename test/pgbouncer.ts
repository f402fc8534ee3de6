/**
 * PgBouncer (Debian's package) in transaction pooling mode in front of the test server, for
 * tests that must hold behind a connection pooler: one per test file, started on first use.
 * Each test gets a database of its own, which PgBouncer maps by name to the server's (PgBouncer
 * 1.18, Debian 12's, does not pass on the `options` parameter that the direct tests use to
 * give each test a schema).
 */
import { spawn } from 'node:child_process'
import { chmodSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { TestContext } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { postgresDatabase, postgresQuery, type TestDatabase } from './helpers.js'
import { freePort, installed } from './process.js'

const skip = process.env.TEST_DATABASE_URL === undefined
  ? 'TEST_DATABASE_URL is not set'
  : installed('pgbouncer') ? false : 'pgbouncer is not installed (CI installs Debian\'s package)'

async function accepting (port: number): Promise<boolean> {
  try {
    await postgresQuery('select 1', [], `postgres://postgres@127.0.0.1:${port}/postgres`)
    return true
  } catch {
    return false
  }
}

/** Starts PgBouncer, with `settings` over the defaults, and resolves with its port once it accepts connections. */
async function startPgBouncer (settings: Record<string, string>): Promise<number> {
  const server = new URL(process.env.TEST_DATABASE_URL as string)
  const folder = mkdtempSync(join(tmpdir(), 'service-pgbouncer-'))
  // PgBouncer will not run as root: as root it is started as the postgres user, which must
  // be able to read its configuration.
  chmodSync(folder, 0o755)
  const port = await freePort()
  writeFileSync(join(folder, 'users.txt'), `"${server.username || 'postgres'}" ""\n`)
  const configuration = {
    listen_addr: '127.0.0.1',
    listen_port: String(port),
    unix_socket_dir: '',
    auth_type: 'trust',
    admin_users: server.username || 'postgres',
    auth_file: join(folder, 'users.txt'),
    pool_mode: 'transaction',
    max_client_conn: '1000',
    default_pool_size: '20',
    ...settings
  }
  writeFileSync(join(folder, 'pgbouncer.ini'), [
    '[databases]',
    `* = host=${server.hostname} port=${server.port || 5432}`,
    '[pgbouncer]',
    ...Object.entries(configuration).map(([name, value]) => `${name} = ${value}`)
  ].join('\n') + '\n')
  const asRoot = process.getuid?.() === 0
  const log = join(folder, 'pgbouncer.log')
  const bouncer = spawn('pgbouncer', [...(asRoot ? ['-u', 'postgres'] : []), join(folder, 'pgbouncer.ini')], { stdio: ['ignore', 'ignore', openSync(log, 'w')] })
  bouncer.unref()
  // Stopped when the test file's process ends: the tests of the file share it.
  process.on('exit', () => {
    bouncer.kill('SIGKILL')
    rmSync(folder, { recursive: true, force: true })
  })
  for (let attempt = 0; attempt < 100; attempt++) {
    if (bouncer.exitCode !== null) break
    if (await accepting(port)) return port
    await sleep(50)
  }
  throw new Error(`PgBouncer did not start: ${readFileSync(log, 'utf8')}`)
}

/**
 * PostgreSQL behind a PgBouncer of its own, with `settings` over the defaults, started on first
 * use: a fresh database for each test.
 */
export function pgBouncerWith (settings: Record<string, string>): TestDatabase {
  let started: Promise<number> | undefined
  return {
    name: 'PostgreSQL behind PgBouncer',
    skip,
    url: async (t: TestContext) => {
      const port = await (started ??= startPgBouncer(settings))
      const { name } = await postgresDatabase(t, 'bouncer')
      return `postgres://postgres@127.0.0.1:${port}/${name}`
    }
  }
}

/** PostgreSQL behind PgBouncer in transaction pooling mode: a fresh database for each test. */
export const behindPgBouncer = pgBouncerWith({})

/** How many client connections PgBouncer holds for the database named in `url`. */
export async function pgBouncerClients (url: string): Promise<number> {
  const database = new URL(url)
  const name = database.pathname.slice(1)
  database.pathname = '/pgbouncer'
  const clients = await postgresQuery<{ database: string }>('show clients', [], database.href)
  return clients.filter((client) => client.database === name).length
}
