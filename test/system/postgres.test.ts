import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import http from 'node:http'
import { describe, test, type TestContext } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import pg from 'pg'
import { Kysely, PostgresDialect } from 'kysely'
import { Migrator } from 'kysely/migration'
import { createDatabase } from '../../src/storage/database.js'
import { MIGRATION_LOCK_KEY, migrateToLatest, migrations as allMigrations } from '../../src/storage/migrate.js'
import { captureLogs, postJson, postJsonOver as post, postgresDatabase, postgresQuery, rawRequest, testApp, testDatabases, waitFor, type TestDatabase } from '../helpers.js'
import { behindPgBouncer, pgBouncerClients, pgBouncerWith } from '../pgbouncer.js'
import { runScript, serverUnderOpenFileLimit, startService } from '../process.js'
import { startTcpProxy } from '../tcp-proxy.js'

const postgres = testDatabases.find((database) => database.name === 'PostgreSQL')!
const password = 'pw-never-shown-42'

/** The test database's URL, reached through the given port and carrying a password to hide. */
function through (url: string, port: number): string {
  const via = new URL(url)
  via.port = String(port)
  via.password = password
  return via.href
}

/** How many connections the service holds to the test database at `url`. */
async function connectionsTo (database: TestDatabase, url: string): Promise<number> {
  if (database === behindPgBouncer) return pgBouncerClients(url)
  const [row] = await postgresQuery<{ count: string }>('select count(*) from pg_stat_activity where application_name = $1',
    [new URL(url).searchParams.get('application_name')])
  return Number(row?.count)
}

for (const database of [postgres, behindPgBouncer]) {
  describe(database.name, { skip: database.skip }, () => {
    test('three instances starting at once on an empty database all come up; the schema is migrated once', async (t) => {
      const env = { DATABASE_URL: await database.url(t) }
      const services = await Promise.all([1, 2, 3].map(() => startService(t, env)))
      for (const service of services) {
        assert.equal((await rawRequest(service.port, { path: '/ready' })).statusCode, 200)
      }
      const migrations = await postgresQuery('select name from kysely_migration', [], env.DATABASE_URL)
      assert.deepEqual(migrations.map((row) => row.name), Object.keys(allMigrations('postgres')))
    })

    test('two instances on one database: 100 concurrent creates get 100 distinct ids, and both list them all', async (t) => {
      const env = { DATABASE_URL: await database.url(t) }
      const [a, b] = await Promise.all([startService(t, env), startService(t, env)])
      const ports = [a.port, b.port]
      const responses = await Promise.all(Array.from({ length: 100 }, (_, i) =>
        post(ports[i % 2] as number, '/users', { name: `user${i}`, email: `user${i}@example.com` })))
      assert.deepEqual(new Set(responses.map((response) => response.statusCode)), new Set([201]))
      const ids = new Set(responses.map((response) => response.headers.location))
      assert.equal(ids.size, 100)

      for (const port of ports) {
        const list = await rawRequest(port, { path: '/users?limit=1000' })
        assert.equal(list.headers['x-total-count'], '100')
        const listed = JSON.parse(list.body).map((user: { id: number }) => `/users/${user.id}`)
        assert.deepEqual(new Set(listed), ids)
      }
    })

    test('a database outage: storage routes answer 503 promptly, /health stays 200, and the service recovers by itself', async (t) => {
      const url = new URL(await database.url(t))
      const proxy = await startTcpProxy(t, { host: url.hostname, port: Number(url.port || 5432) })
      const service = await startService(t, { DATABASE_URL: through(url.href, proxy.port), DATABASE_POOL_SIZE: '4' })
      assert.equal((await post(service.port, '/users', { name: 'Ada', email: 'ada@example.com' })).statusCode, 201)

      proxy.cut()
      const during = [
        () => rawRequest(service.port, { path: '/users' }),
        () => rawRequest(service.port, { path: '/users/1' }),
        () => post(service.port, '/users', { name: 'Grace', email: 'grace@example.com' }),
        () => rawRequest(service.port, { path: '/ready' })
      ]
      const answers = await Promise.all(during.map(async (request) => {
        const started = Date.now()
        const response = await request()
        return { response, seconds: (Date.now() - started) / 1000 }
      }))
      for (const { response, seconds } of answers) {
        assert.equal(response.statusCode, 503, response.body)
        assert.equal(typeof JSON.parse(response.body).error, 'string')
        assert.ok(seconds < 8, `answered after ${seconds} s: no hang past a few seconds`)
      }
      assert.deepEqual(JSON.parse((await rawRequest(service.port, { path: '/health' })).body), { status: 'ok' })
      assert.equal(service.child.exitCode, null, `the process stays up: ${service.stderr()}`)

      proxy.restore()
      let ready = 0
      for (let attempt = 0; attempt < 30 && ready !== 200; attempt++) {
        ready = (await rawRequest(service.port, { path: '/ready' })).statusCode
        if (ready !== 200) await sleep(500)
      }
      assert.equal(ready, 200, 'ready again once the database is back')
      assert.equal((await post(service.port, '/users', { name: 'Grace', email: 'grace@example.com' })).statusCode, 201)
      assert.equal((await rawRequest(service.port, { path: '/users' })).headers['x-total-count'], '2')

      const logs = service.stdout.join('\n')
      assert.match(logs, /database unavailable/)
      assert.doesNotMatch(logs, /"level":60/, 'no fatal error: a dropped connection never goes unhandled')
      assert.doesNotMatch(logs, new RegExp(password), 'no log line shows the password')
    })

    test('pooled connections whose far end vanished without a word (a failover, a host lost) fail one request each at most, then are replaced', async (t) => {
      const url = new URL(await database.url(t))
      const proxy = await startTcpProxy(t, { host: url.hostname, port: Number(url.port || 5432) })
      const service = await startService(t, { DATABASE_URL: through(url.href, proxy.port), DATABASE_POOL_SIZE: '4' })
      const lookups = async () => await Promise.all(Array.from({ length: 8 }, async () => {
        const started = Date.now()
        const { statusCode } = await rawRequest(service.port, { path: '/users/1' })
        return { statusCode, seconds: (Date.now() - started) / 1000 }
      }))
      assert.equal((await post(service.port, '/users', { name: 'Ada', email: 'ada@example.com' })).statusCode, 201)
      await lookups()

      proxy.freeze()
      // Each connection of the pool fails the request it is lent for (503 at the query timeout).
      for (const { statusCode } of await lookups()) assert.ok([200, 503].includes(statusCode), String(statusCode))
      // By then each was discarded, and new ones serve: no request waits for a dead one again.
      for (const { statusCode, seconds } of await lookups()) {
        assert.equal(statusCode, 200)
        assert.ok(seconds < 2, `answered after ${seconds} s`)
      }
      assert.equal((await rawRequest(service.port, { path: '/ready' })).statusCode, 200)
    })

    test('an unreachable database stops start-up within 15 s with one line naming DATABASE_URL, password hidden', async (t) => {
      const url = new URL(await database.url(t))
      const proxy = await startTcpProxy(t, { host: url.hostname, port: Number(url.port || 5432) })
      proxy.cut()
      const cases = [through(url.href, proxy.port), through(url.href, 1)]
      await Promise.all(cases.map(async (databaseUrl) => {
        const started = Date.now()
        const result = await runScript('server.ts', { DATABASE_URL: databaseUrl })
        assert.ok(Date.now() - started < 15_000)
        assert.equal(result.code, 1)
        const lines = result.stderr.trim().split('\n')
        assert.equal(lines.length, 1, result.stderr)
        assert.match(lines[0] as string, /^Start-up failed: cannot use DATABASE_URL postgres:\/\/postgres:\*\*\*@127\.0\.0\.1:\d+\/\w+/)
        assert.doesNotMatch(result.stdout + result.stderr, new RegExp(password))
      }))
    })

    test('a database that stops answering during start-up: one line within 8 s of opening, not Fastify\'s plugin timeout', async (t) => {
      const url = new URL(await database.url(t))
      const proxy = await startTcpProxy(t, { host: url.hostname, port: Number(url.port || 5432) }, 'kysely_migration')
      const started = Date.now()
      const result = await runScript('server.ts', { DATABASE_URL: through(url.href, proxy.port) })
      assert.ok(Date.now() - started < 15_000)
      assert.equal(result.code, 1)
      assert.match(result.stderr, /^Start-up failed: cannot use DATABASE_URL postgres:\/\/postgres:\*\*\*@127\.0\.0\.1:\d+\/\w+\S*: it did not open and migrate within 8 s \(it stopped answering, or a migration needs longer: run npm run migrate, which waits as long as it takes, then start\)\n$/)
    })

    test('DATABASE_POOL_SIZE bounds the connections of one instance', async (t) => {
      const url = await database.url(t)
      const app = await testApp(t, { DATABASE_URL: url, DATABASE_POOL_SIZE: '3' })
      const responses = await Promise.all(Array.from({ length: 30 }, () => app.inject('/users')))
      assert.ok(responses.every((response) => response.statusCode === 200))
      assert.equal(await connectionsTo(database, url), 3)
    })

    test('TLS options in the URL are honoured: sslmode=require refuses a server without TLS', async (t) => {
      const [setting] = await postgresQuery<{ ssl: string }>('show ssl')
      if (setting?.ssl === 'on') return t.skip('this PostgreSQL server has TLS on')
      const url = new URL(await database.url(t))
      url.searchParams.set('sslmode', 'require')
      const result = await runScript('server.ts', { DATABASE_URL: url.href })
      assert.equal(result.code, 1)
      assert.match(result.stderr, /^Start-up failed: cannot use DATABASE_URL .*sslmode=require.*: The server does not support SSL connections$/m)
    })
  })
}

describe('PostgreSQL refusing work for a while', { skip: postgres.skip }, () => {
  /**
   * A schema owned by a role of its own, and its URL: the test changes the role's settings,
   * which every connection the role opens takes, and no other test sees them.
   */
  async function schemaOfItsOwnRole (t: TestContext) {
    const name = `test_${randomBytes(6).toString('hex')}`
    await postgresQuery(`create role ${name} login`)
    await postgresQuery(`create schema ${name} authorization ${name}`)
    t.after(async () => {
      await postgresQuery(`drop schema ${name} cascade`)
      await postgresQuery(`drop role ${name}`)
    })
    const url = new URL(process.env.TEST_DATABASE_URL as string)
    url.username = name
    url.searchParams.set('options', `-c search_path=${name}`)
    return {
      url: url.href,
      schema: name,
      /** Changes the role's settings and ends its connections, so that the pool's next ones take them. */
      async set (...settings: string[]) {
        for (const setting of settings) await postgresQuery(`alter role ${name} ${setting}`)
        await postgresQuery('select pg_terminate_backend(pid) from pg_stat_activity where usename = $1', [name])
        await sleep(100)
      }
    }
  }

  /**
   * A session of the test's own, to hold a table's lock. Called before schemaOfItsOwnRole, so
   * that it ends first, whatever happens, and dropping the schema never waits for its lock. In
   * a database of the test's own (`url`), dropping the database ends it, should the test stop
   * before it does.
   */
  async function lockHolder (t: TestContext, url = process.env.TEST_DATABASE_URL): Promise<pg.Client> {
    const holder = new pg.Client({ connectionString: url })
    holder.on('error', () => {})
    await holder.connect()
    t.after(() => holder.end())
    return holder
  }

  function assertRefused (response: { statusCode: number, body: string, headers: Record<string, unknown>, json: () => unknown }) {
    assert.equal(response.statusCode, 503, response.body)
    assert.deepEqual(response.json(), { error: 'Database unavailable', code: 'database_unavailable' })
    assert.equal(response.headers['retry-after'], '1')
  }

  test('a server that closes idle connections (idle_session_timeout) costs no request, and logs no warning for it', async (t) => {
    const role = await schemaOfItsOwnRole(t)
    await role.set("set idle_session_timeout = '300ms'")
    const logs = captureLogs()
    const app = await testApp(t, { DATABASE_URL: role.url, LOG_LEVEL: 'info', JWT_SECRET: 'a-test-secret-that-is-long-enough-for-hs256' }, logs.stream)
    for (let round = 0; round < 3; round++) {
      assert.equal((await app.inject('/users')).statusCode, 200)
      await sleep(600)
    }
    // A busy process: the server's closing arrives, but the pool lends the connection before it reads it.
    const busyUntil = performance.now() + 600
    while (performance.now() < busyUntil);
    assert.equal((await app.inject('/users')).statusCode, 200, 'a connection closed unread costs no request')
    assert.deepEqual(logs.lines.filter((line) => line.level >= 40).map((line) => line.msg), [])
    const closed = () => logs.lines.filter((line) => line.msg.startsWith('the database closed idle connections (idle_session_timeout)'))
    await waitFor(() => closed().length > 0, 2000)
    assert.ok(closed().length > 0, 'a line says why the connections went')
  })

  test('a server that ends every connection at once (a restart, a failover) is one warning for the pool, not one per connection, and costs no request once it is back', async (t) => {
    const role = await schemaOfItsOwnRole(t)
    const logs = captureLogs()
    const app = await testApp(t, { DATABASE_URL: role.url, LOG_LEVEL: 'info', DATABASE_POOL_SIZE: '4' }, logs.stream)
    for (const response of await Promise.all(Array.from({ length: 8 }, () => app.inject('/users')))) assert.equal(response.statusCode, 200)
    // What a restart does to each session: "terminating connection due to administrator command".
    await postgresQuery('select pg_terminate_backend(pid) from pg_stat_activity where usename = $1', [role.schema])
    const lost = () => logs.lines.filter((line) => /connection/.test(line.msg))
    await waitFor(() => lost().length > 0, 3000)
    await sleep(1200)
    assert.deepEqual(lost().map((line) => [line.level, line.msg, line.connections, line.err?.code]),
      [[40, 'database connections lost; new ones open when needed', 4, '57P01']])
    assert.equal((await app.inject('/users')).statusCode, 200)
  })

  test('a read-only server, a lock or statement timeout: 503 with Retry-After, never 500; under a read-only server reads go on, /ready says 503, and the outage of writes is one log line', async (t) => {
    const holder = await lockHolder(t)
    const role = await schemaOfItsOwnRole(t)
    const logs = captureLogs()
    const app = await testApp(t, { DATABASE_URL: role.url, LOG_LEVEL: 'info' }, logs.stream)
    const create = () => postJson(app, '/users', { name: 'Grace', email: 'grace@example.com' })
    const outage = () => logs.lines.filter((line) => /^database (unavailable|available again)/.test(line.msg))
      .map((line) => `${line.operations} ${line.msg}`)
    assert.equal((await postJson(app, '/users', { name: 'Ada', email: 'ada@example.com' })).statusCode, 201)

    // A standby, or a primary set read-only for maintenance: writes are refused, reads go on.
    await role.set('set default_transaction_read_only = on')
    for (let i = 0; i < 3; i++) {
      assertRefused(await create())
      assert.equal((await app.inject('/ready')).statusCode, 503, 'not ready while writes fail: its probe fails too')
      assert.equal((await app.inject('/users/1')).json().name, 'Ada')
    }
    assert.deepEqual(outage(), ['writes database unavailable: cannot execute INSERT in a read-only transaction'],
      'one line for three refused writes: the reads between them end no outage of writes')

    // Another session holds the table's lock (a migration, an ALTER TABLE) past the role's
    // lock_timeout, then past its statement_timeout.
    await holder.query(`begin; lock table ${role.schema}.users in access exclusive mode`)
    await role.set('reset default_transaction_read_only', 'set lock_timeout = 200')
    assertRefused(await app.inject('/users/1'))
    assertRefused(await create())
    await role.set('reset lock_timeout', 'set statement_timeout = 200')
    assertRefused(await app.inject('/users/1'))
    assertRefused(await app.inject('/users'))
    assert.equal(outage()[1], 'reads database unavailable: canceling statement due to lock timeout')

    await holder.query('rollback')
    await role.set('reset statement_timeout')
    assert.equal((await create()).statusCode, 201)
    assert.equal((await app.inject('/ready')).statusCode, 200)
    assert.equal((await app.inject('/users')).headers['x-total-count'], '2', 'no refused write was stored')
    assert.deepEqual(outage().slice(-2), ['writes database available again', 'reads database available again'])
    assert.equal(logs.lines.filter((line) => line.level >= 50 && !/^database unavailable/.test(line.msg)).length, 0, 'no error logged but the outages')
  })

  test('connections opened to a server that took no writes, kept after it takes them again (a stale address after a failover): each fails one write at most, then is replaced', async (t) => {
    const role = await schemaOfItsOwnRole(t)
    const app = await testApp(t, { DATABASE_URL: role.url, DATABASE_POOL_SIZE: '3' })
    const create = (i: number) => postJson(app, '/users', { name: 'Ada', email: `ada${i}@example.com` })
    // Three connections open while writes are refused, held by three writes at once.
    await role.set('set default_transaction_read_only = on')
    for (const response of await Promise.all([0, 1, 2].map(create))) assert.equal(response.statusCode, 503)
    // New connections would take writes now; those the pool opened before would not.
    await postgresQuery(`alter role ${role.schema} reset default_transaction_read_only`)
    const statuses: number[] = []
    for (let i = 3; i < 9; i++) statuses.push((await create(i)).statusCode)
    assert.deepEqual(statuses, [201, 201, 201, 201, 201, 201], 'each refused write closed its connection, and new ones were opened')
  })

  test('a table locked for longer than the service waits: 503 before the client\'s timeout, and the server ends the waiting statements, so the service\'s server processes never outnumber its pool', async (t) => {
    const holder = await lockHolder(t)
    const role = await schemaOfItsOwnRole(t)
    const app = await testApp(t, { DATABASE_URL: role.url, DATABASE_POOL_SIZE: '4' })
    assert.equal((await app.inject('/users/1')).statusCode, 404)
    await holder.query(`begin; lock table ${role.schema}.users in access exclusive mode`)
    for (let round = 0; round < 2; round++) {
      const started = Date.now()
      for (const response of await Promise.all(Array.from({ length: 4 }, () => app.inject('/users/1')))) assertRefused(response)
      assert.ok(Date.now() - started < 5000, `answered after ${Date.now() - started} ms`)
    }
    const [row] = await postgresQuery<{ count: string }>('select count(*) from pg_stat_activity where usename = $1', [role.schema])
    assert.ok(Number(row?.count) <= 4, `${row?.count} server processes for a pool of 4`)
    await holder.query('rollback')
    assert.equal((await app.inject('/users/1')).statusCode, 404, 'the same connections serve once the lock is gone')
  })

  /** Three rounds of 20 concurrent lookups of a user not stored: each is answered 404. */
  async function lookUpInRounds (app: Awaited<ReturnType<typeof testApp>>, message: string): Promise<void> {
    for (let round = 0; round < 3; round++) {
      const answers = await Promise.all(Array.from({ length: 20 }, async () => (await app.inject('/users/1')).statusCode))
      assert.deepEqual(answers, Array(20).fill(404), message)
    }
  }

  test('a server that lets the instance fewer connections than its pool (other instances hold the rest): requests wait for the connections it has, none fails, and one line says so', async (t) => {
    const role = await schemaOfItsOwnRole(t)
    const logs = captureLogs()
    const app = await testApp(t, { DATABASE_URL: role.url, LOG_LEVEL: 'info', DATABASE_POOL_SIZE: '10', JWT_SECRET: 'a-test-secret-that-is-long-enough-for-hs256' }, logs.stream)
    // What max_connections does once other instances hold all it allows but two.
    await role.set('connection limit 2')
    await lookUpInRounds(app, 'before: about half answered 503')
    await sleep(1000) // the line is written a second after the first refusal
    const refused = `The database refuses this instance more connections (too many connections for role "${role.schema}"): it goes on with the 2 it has, and requests wait for one of them; the instances' DATABASE_POOL_SIZE together is more than it allows`
    assert.deepEqual(logs.lines.filter((line) => line.level >= 40 && !line.msg.startsWith('database connections lost')).map((line) => line.msg), [refused],
      'one warning, no outage, not a line for each refused request that follows an answered one')
    const [open] = await postgresQuery<{ count: string }>('select count(*) from pg_stat_activity where usename = $1', [role.schema])
    assert.equal(open?.count, '2')
  })

  test('PgBouncer letting the instance fewer client connections than its pool (max_client_conn): requests wait for the connections it has, none fails, and one line says so', { skip: behindPgBouncer.skip }, async (t) => {
    const url = await pgBouncerWith({ max_client_conn: '3' }).url(t)
    const logs = captureLogs()
    const app = await testApp(t, { DATABASE_URL: url, LOG_LEVEL: 'info', DATABASE_POOL_SIZE: '10', JWT_SECRET: 'a-test-secret-that-is-long-enough-for-hs256' }, logs.stream)
    await lookUpInRounds(app, 'before: most answered 503')
    await sleep(1000) // the line is written a second after the first refusal
    assert.deepEqual(logs.lines.filter((line) => line.level >= 40).map((line) => line.msg),
      ['The database refuses this instance more connections (no more connections allowed (max_client_conn)): it goes on with the 3 it has, and requests wait for one of them; the instances\' DATABASE_POOL_SIZE together is more than it allows'])
  })

  test('client connections leave the pool its open files: under a low open-file limit with a large pool, a flood of clients is answered or refused, never a 500, and the process lives on', { skip: behindPgBouncer.skip }, async (t) => {
    // PgBouncer takes every connection a pool of 150 asks for, where the server allows 100.
    const url = await behindPgBouncer.url(t)
    const { nodeArgs, command } = serverUnderOpenFileLimit(400)
    const service = await startService(t, { DATABASE_URL: url, DATABASE_POOL_SIZE: '150' }, undefined, nodeArgs, command)
    assert.equal((await post(service.port, '/users', { name: 'Ada', email: 'ada@example.com' })).statusCode, 201)

    // More clients at once than connections are let in, each asking again as soon as it is answered.
    const outcomes = new Map<number | string, number>()
    const agent = new http.Agent({ keepAlive: true, maxSockets: 272 })
    t.after(() => agent.destroy())
    const until = Date.now() + 4000
    await Promise.all(Array.from({ length: 272 }, async () => {
      while (Date.now() < until) {
        const outcome = await new Promise<number | string>((resolve) => {
          http.get({ host: '127.0.0.1', port: service.port, path: '/users/1', agent }, (response) => {
            response.resume()
            response.on('end', () => resolve(response.statusCode ?? 0))
          }).on('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? 'error'))
        })
        outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1)
        if (typeof outcome === 'string') await sleep(10) // refused: MAX_CONNECTIONS are open
      }
    }))
    const answers = Object.fromEntries(outcomes)
    assert.equal(service.child.exitCode, null, `the process lives on through EMFILE: ${JSON.stringify(answers)}`)
    assert.ok((outcomes.get(200) ?? 0) > 0, JSON.stringify(answers))
    assert.equal(outcomes.get(500), undefined, `no 500 when a new pooled connection fails with EMFILE: ${JSON.stringify(answers)}`)
    assert.deepEqual(service.stdout.filter((line) => line.includes('EMFILE')), [])
  })

  test('a login the server refuses while the service runs (a role disabled), or a database dropped: 503 with Retry-After, never 500, and it recovers', async (t) => {
    const role = await schemaOfItsOwnRole(t)
    const logs = captureLogs()
    const app = await testApp(t, { DATABASE_URL: role.url, LOG_LEVEL: 'info' }, logs.stream)
    assert.equal((await postJson(app, '/users', { name: 'Ada', email: 'ada@example.com' })).statusCode, 201)

    await role.set('nologin')
    assertRefused(await app.inject('/users/1'))
    assertRefused(await postJson(app, '/users', { name: 'Grace', email: 'grace@example.com' }))
    assert.equal((await app.inject('/ready')).statusCode, 503)
    assert.equal((await app.inject('/health')).statusCode, 200)
    const refusal = `database unavailable: role "${role.schema}" is not permitted to log in`
    assert.deepEqual(logs.lines.filter((line) => line.level >= 50).map((line) => `${line.operations} ${line.msg}`).sort(),
      [`reads ${refusal}`, `writes ${refusal}`], 'one line for reads and one for writes, no 500 logged')

    await role.set('login')
    assert.equal((await app.inject('/users/1')).statusCode, 200)
    assert.equal((await postJson(app, '/users', { name: 'Grace', email: 'grace@example.com' })).statusCode, 201)

    // A database of its own, dropped under the service.
    const { name, url } = await postgresDatabase(t)
    const dropped = await testApp(t, { DATABASE_URL: url })
    assert.equal((await postJson(dropped, '/users', { name: 'Ada', email: 'ada@example.com' })).statusCode, 201)
    await postgresQuery(`drop database ${name} with (force)`)
    assertRefused(await dropped.inject('/users/1'))
    assertRefused(await postJson(dropped, '/users', { name: 'Grace', email: 'grace@example.com' }))
  })

  test('the migration lock held by another process: start-up waits for it, and past 4 s stops with one line', async (t) => {
    // A database of its own: the lock is the whole database's, and other tests start services meanwhile.
    const name = `test_${randomBytes(6).toString('hex')}`
    await postgresQuery(`create database ${name}`)
    const url = new URL(process.env.TEST_DATABASE_URL as string)
    url.pathname = `/${name}`
    const holder = new pg.Client({ connectionString: url.href })
    await holder.connect()
    t.after(async () => {
      await holder.end()
      await postgresQuery(`drop database ${name} with (force)`)
    })
    const takeLock = () => holder.query(`begin; select pg_advisory_xact_lock(${MIGRATION_LOCK_KEY})`)

    await takeLock()
    const released = sleep(1500).then(() => holder.query('commit'))
    const service = await startService(t, { DATABASE_URL: url.href })
    await released
    assert.equal((await rawRequest(service.port, { path: '/ready' })).statusCode, 200, 'started once the lock was released')

    await takeLock()
    const started = Date.now()
    const result = await runScript('server.ts', { DATABASE_URL: url.href })
    const seconds = (Date.now() - started) / 1000
    await holder.query('rollback')
    assert.equal(result.code, 1)
    assert.equal(result.stderr, `Start-up failed: cannot use DATABASE_URL ${url.href}: another process has held the migration lock for 4 s ` +
      '(an instance or npm run migrate migrating this database): start again once it is done\n')
    // Its 4 s, plus however long a busy machine takes to start a process: it stops, and does not hang.
    assert.ok(seconds > 4 && seconds < 20, `stopped after ${seconds} s`)
  })

  test('a role that may use only its own schema of a shared database starts, migrates and serves, whatever other schemas it may not read', async (t) => {
    const role = await schemaOfItsOwnRole(t)
    const other = `test_${randomBytes(6).toString('hex')}`
    await postgresQuery(`create schema ${other}`)
    t.after(() => postgresQuery(`drop schema ${other} cascade`))
    await postgresQuery(`create table ${other}.accounts (id serial primary key)`)
    const app = await testApp(t, { DATABASE_URL: role.url })
    assert.equal((await postJson(app, '/users', { name: 'Ada', email: 'ada@example.com' })).statusCode, 201)
    assert.equal((await app.inject('/users/1')).statusCode, 200)
  })

  test('a schema or table another process drops while the migrator lists every schema\'s tables: the migration tries again and completes', async (t) => {
    const { url } = await postgresDatabase(t)
    // PostgreSQL's answers when the listing meets a schema, then a table, dropped meanwhile.
    const dropped = ['3F000', '42P01']
    const listings: string[] = []
    const pool = new pg.Pool({ connectionString: url, max: 1 })
    pool.on('connect', (client) => {
      const query = client.query.bind(client) as (text: string, values?: unknown[]) => Promise<unknown>
      Object.assign(client, {
        query: async (text: string, values?: unknown[]) => {
          if (typeof text === 'string' && text.includes('pg_attribute')) {
            const code = dropped[listings.length]
            listings.push(code ?? 'listed')
            if (code !== undefined) throw Object.assign(new Error('dropped while listed'), { code })
          }
          return await query(text, values)
        }
      })
    })
    const db = new Kysely<any>({ dialect: new PostgresDialect({ pool }) })
    // Closed before the database is dropped, which ends its connections.
    const outcome = await migrateToLatest(db, 'postgres').finally(() => db.destroy())
    assert.deepEqual(outcome.applied, Object.keys(allMigrations('postgres')))
    assert.deepEqual(listings.slice(0, 3), ['3F000', '42P01', 'listed'])
  })

  test('a migration that needs longer than start-up gives it: start-up stops with one line saying so, and npm run migrate runs it to the end', async (t) => {
    // A database of its own: the event trigger, and the migration lock, are the whole database's.
    const { url } = await postgresDatabase(t)
    // One migration's statement takes 6 s, as building an index on a large table can.
    await postgresQuery(`create function slow_user_counts() returns event_trigger language plpgsql as $$ begin
      if exists (select from pg_event_trigger_ddl_commands() where object_identity = 'public.user_counts') then perform pg_sleep(6); end if;
    end $$`, [], url)
    await postgresQuery("create event trigger slow_user_counts on ddl_command_end when tag in ('CREATE TABLE') execute function slow_user_counts()", [], url)

    const startup = await runScript('server.ts', { DATABASE_URL: url })
    assert.equal(startup.code, 1)
    assert.equal(startup.stderr, `Start-up failed: cannot use DATABASE_URL ${url}: canceling statement due to statement timeout ` +
      '(a migration needs longer: run npm run migrate, which waits as long as it takes, then start)\n')

    const migrate = await runScript('cli/migrate.ts', { DATABASE_URL: url })
    assert.deepEqual([migrate.code, migrate.stdout, migrate.stderr], [0, `Applied: ${Object.keys(allMigrations('postgres')).join(', ')}\n`, ''])
    const service = await startService(t, { DATABASE_URL: url })
    assert.equal((await rawRequest(service.port, { path: '/ready' })).statusCode, 200)
  })

  test('npm run migrate waits at most 4 s for a table another session holds, rather than queue every query of that table behind it', async (t) => {
    const { url } = await postgresDatabase(t)
    // The database as the first migration left it; the next one counts its users.
    const { db } = await createDatabase({ dialect: 'postgres', connectionString: url, poolSize: 1 })
    await new Migrator({ db, provider: { getMigrations: async () => allMigrations('postgres') } }).migrateTo('2026-11-22-create-users')
    await db.destroy()
    const holder = await lockHolder(t, url)
    await holder.query('begin; lock table users in access exclusive mode')
    const released = sleep(12_000).then(async () => await holder.query('rollback'))

    const started = Date.now()
    const migrate = await runScript('cli/migrate.ts', { DATABASE_URL: url })
    const seconds = (Date.now() - started) / 1000
    assert.deepEqual([migrate.code, migrate.stderr], [1, 'Migration failed: error: canceling statement due to lock timeout\n'])
    assert.ok(seconds < 10, `gave up after ${seconds} s`)
    await released
    assert.equal((await runScript('cli/migrate.ts', { DATABASE_URL: url })).code, 0, 'and migrates once the table is free')
  })
})
