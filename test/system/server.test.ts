import assert from 'node:assert/strict'
import { existsSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { once } from 'node:events'
import http from 'node:http'
import { createServer, type AddressInfo } from 'node:net'
import { join } from 'node:path'
import { finished } from 'node:stream/promises'
import { after, describe, test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { sql } from 'kysely'
import { bundle } from '../../scripts/build.js'
import { createDatabase } from '../../src/storage/database.js'
import { migrations } from '../../src/storage/migrate.js'
import { postgresQuery, postJsonOver, rawRequest, temporaryFolder, testConfig, testDatabases, waitFor } from '../helpers.js'
import { behindPgBouncer } from '../pgbouncer.js'
import { freePort, fromSource, installed, repositoryRoot, runNode, runScript, signalGroup, startService } from '../process.js'

/**
 * The single file `npm start` runs, bundled afresh from the sources, once for this file's
 * tests. It is written inside dist/ so that its dependencies left outside the bundle are
 * found in node_modules, as they are for dist/server.js.
 */
const bundleFolder = join(repositoryRoot, 'dist', `test-bundle-${process.pid}`)
after(() => rmSync(bundleFolder, { recursive: true, force: true }))
let bundled: Promise<void> | undefined
/** The bundled form of `src/process/server.ts` or `src/process/cli/migrate.ts`. */
const bundledEntry = async (name: 'server' | 'cli/migrate') => {
  await (bundled ??= bundle({ entryPoints: ['src/process/server.ts', 'src/process/cli/migrate.ts'], outdir: bundleFolder }))
  return join(bundleFolder, `${name}.js`)
}
const bundledServer = async () => await bundledEntry('server')

test('start-up prints the listening address and the docs URL in its first lines', async (t) => {
  const folder = temporaryFolder(t)
  const service = await startService(t, { DATABASE_URL: `sqlite:${join(folder, 'data', 'app.db')}` })
  const firstLines = service.stdout.slice(0, 4).join('\n')
  assert.match(firstLines, new RegExp(`Server listening at http://127\\.0\\.0\\.1:${service.port}`))
  assert.match(firstLines, new RegExp(`API documentation at http://127\\.0\\.0\\.1:${service.port}/documentation`))
  assert.ok(existsSync(join(folder, 'data', 'app.db')), 'the database file and its folder are created')
  assert.equal((await rawRequest(service.port, { path: '/health' })).statusCode, 200)
})

test('the bundled server runs with V8\'s allocation-site pretenuring off, so that no burst of connections can leave a process with slow collections for good', async (t) => {
  const trace = '--trace-pretenuring-statistics'
  const allocating = await runNode([trace, '-e', 'const kept = []; for (let i = 0; i < 1e6; i++) kept.push({ i })'], {})
  assert.match(allocating.stdout, /pretenuring:/, 'this Node prints its pretenuring decisions, so their absence below means something')

  const folder = temporaryFolder(t)
  const service = await startService(t, { DATABASE_URL: `sqlite:${join(folder, 'app.db')}` }, repositoryRoot, [trace, await bundledServer()])
  assert.equal((await rawRequest(service.port, { path: '/health' })).statusCode, 200)
  service.child.kill('SIGINT')
  assert.deepEqual(await service.exited, { code: 0, signal: null })
  await finished(service.child.stdout!) // V8 writes its trace through a buffer flushed at exit
  assert.deepEqual(service.stdout.filter((line) => line.includes('pretenuring:')), [])
})

const redisUrl = process.env.TEST_REDIS_URL
test('the bundled server loads what only a configuration uses, Redis\'s client and the tracing SDK, from their chunks', { skip: redisUrl === undefined ? 'TEST_REDIS_URL is not set' : false }, async (t) => {
  // A database of Redis's own, so that these counters meet no other test's.
  const redis = new URL(redisUrl!)
  redis.pathname = '/7'
  const service = await startService(t, {
    DATABASE_URL: `sqlite:${join(temporaryFolder(t), 'app.db')}`,
    REDIS_URL: redis.href,
    RATE_LIMIT_MAX: '100',
    OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9'
  }, repositoryRoot, [await bundledServer()])
  const listed = await rawRequest(service.port, { path: '/users' })
  assert.deepEqual([listed.statusCode, listed.headers['ratelimit-limit']], [200, '100'])
  const accessLine = () => service.stdout.find((line) => line.includes('"url":"/users"'))
  await waitFor(() => accessLine() !== undefined, 2000)
  assert.match(JSON.parse(accessLine()!).trace_id, /^[0-9a-f]{32}$/)
})

test('SIGTERM drains: /ready answers 503 at once, other requests are still answered with Connection: close, then it exits 0', async (t) => {
  const folder = temporaryFolder(t)
  const service = await startService(t, { DATABASE_URL: `sqlite:${join(folder, 'app.db')}`, SHUTDOWN_DRAIN_MS: '1500' })
  assert.equal((await rawRequest(service.port, { path: '/ready' })).statusCode, 200)
  const signalled = Date.now()
  service.child.kill('SIGTERM')
  await sleep(200)
  const ready = await rawRequest(service.port, { path: '/ready' })
  assert.deepEqual([ready.statusCode, JSON.parse(ready.body)], [503, { error: 'Shutting down', code: 'shutting_down' }])
  const health = await rawRequest(service.port, { path: '/health' })
  assert.deepEqual([health.statusCode, health.headers.connection], [200, 'close'])
  assert.equal((await postJsonOver(service.port, '/users', { name: 'Ada', email: 'ada@example.com' })).statusCode, 201)
  assert.deepEqual(await service.exited, { code: 0, signal: null })
  const ms = Date.now() - signalled
  assert.ok(ms >= 1500 && ms < 4500, `exited ${ms} ms after SIGTERM`)
})

test('METRICS_PORT serves /metrics on its own port, without a token, and the API\'s port has none; SIGTERM closes both', async (t) => {
  const metricsPort = await freePort()
  const service = await startService(t, { DATABASE_URL: 'sqlite::memory:', METRICS_PORT: String(metricsPort), AUTH: 'all', JWT_SECRET: 'a-test-secret-that-is-long-enough-for-hs256' })
  assert.ok(service.stdout.some((line) => JSON.parse(line).msg === `metrics at http://127.0.0.1:${metricsPort}/metrics`))
  const scrape = await rawRequest(metricsPort, { path: '/metrics' })
  assert.equal(scrape.statusCode, 200)
  assert.match(scrape.body, /^process_max_fds \d+$/m)
  assert.equal((await rawRequest(service.port, { path: '/metrics' })).statusCode, 404)
  signalGroup(service.child, 'SIGTERM')
  assert.deepEqual(await service.exited, { code: 0, signal: null })
})

test('SIGINT (Ctrl-C) does not drain: the process closes at once', async (t) => {
  const service = await startService(t, { DATABASE_URL: 'sqlite::memory:', SHUTDOWN_DRAIN_MS: '5000' })
  const signalled = Date.now()
  service.child.kill('SIGINT')
  assert.deepEqual(await service.exited, { code: 0, signal: null })
  assert.ok(Date.now() - signalled < 2000, `exited ${Date.now() - signalled} ms after SIGINT`)
})

test('a heap snapshot asked for with a signal the service leaves alone (SIGURG) is written, and the service goes on answering; SIGUSR2 stops it as SIGINT does', async (t) => {
  const folder = temporaryFolder(t)
  const service = await startService(t, { DATABASE_URL: 'sqlite::memory:', SHUTDOWN_DRAIN_MS: '5000' }, repositoryRoot, [
    '--heapsnapshot-signal=SIGURG', `--diagnostic-dir=${folder}`, ...fromSource('server.ts')
  ])
  const snapshots = () => readdirSync(folder).filter((name) => name.endsWith('.heapsnapshot'))
  service.child.kill('SIGURG')
  await waitFor(() => snapshots().length > 0, 10_000)
  // The snapshot is written on the event loop: the next answer comes once it is complete.
  assert.equal((await rawRequest(service.port, { path: '/health' })).statusCode, 200)
  assert.equal(snapshots().length, 1)
  assert.ok(statSync(join(folder, snapshots()[0] as string)).size > 0)

  const signalled = Date.now()
  service.child.kill('SIGUSR2')
  assert.deepEqual(await service.exited, { code: 0, signal: null })
  assert.ok(Date.now() - signalled < 2000, `exited ${Date.now() - signalled} ms after SIGUSR2`)
})

test('a bad setting stops start-up with one line naming the variable, and a non-zero exit', async () => {
  const cases: Array<[Record<string, string>, RegExp]> = [
    [{ PORT: 'abc' }, /PORT must be integer/],
    [{ DATABASE_URL: 'oracle://db' }, /DATABASE_URL must be/],
    [{ AUTH: 'maybe' }, /AUTH must be one of off, writes, all/],
    [{ BODY_LIMIT: '-5' }, /BODY_LIMIT must be >= 1/],
    [{ NODE_ENV: 'production' }, /JWT_SECRET \(or JWT_ISSUER, JWT_JWKS_URL or JWT_PUBLIC_KEY\) is required when NODE_ENV=production/]
  ]
  await Promise.all(cases.map(async ([env, message]) => {
    const result = await runScript('server.ts', { DATABASE_URL: 'sqlite::memory:', ...env })
    assert.equal(result.code, 1, JSON.stringify(env))
    assert.equal(result.stdout, '', 'it never half-starts')
    const lines = result.stderr.trim().split('\n')
    assert.equal(lines.length, 1, result.stderr)
    assert.match(lines[0] as string, /^Configuration error: /)
    assert.match(lines[0] as string, message)
  }))
})

test('a port in use, or a HOST that is not this machine\'s, stops start-up with one line naming it, and a non-zero exit', async (t) => {
  const holder = createServer().listen(0, '127.0.0.1')
  await once(holder, 'listening')
  t.after(() => { holder.close() })
  const heldPort = String((holder.address() as AddressInfo).port)
  const cases: Array<[Record<string, string>, string]> = [
    [{ HOST: '127.0.0.1', PORT: heldPort }, `cannot listen on 127.0.0.1 port ${heldPort}: another process holds that port (set PORT to a free one)`],
    // 192.0.2.0/24 is reserved for documentation (RFC 5737): no machine has it.
    [{ HOST: '192.0.2.1', PORT: '3000' }, 'cannot listen on 192.0.2.1 port 3000: HOST is not an address of this machine'],
    [{ HOST: 'no-such-host.invalid', PORT: '3000' }, 'cannot listen on no-such-host.invalid port 3000: HOST could not be resolved to an address']
  ]
  await Promise.all(cases.map(async ([env, message]) => {
    const result = await runScript('server.ts', { DATABASE_URL: 'sqlite::memory:', LOG_LEVEL: 'error', ...env })
    assert.equal(result.code, 1, JSON.stringify(env))
    assert.equal(result.stderr, `Start-up failed: ${message}\n`)
  }))
})

// Linux's; elsewhere (macOS) any process may listen on any port.
const UNPRIVILEGED_PORT_START = '/proc/sys/net/ipv4/ip_unprivileged_port_start'
const lowestUnprivilegedPort = existsSync(UNPRIVILEGED_PORT_START) ? Number(readFileSync(UNPRIVILEGED_PORT_START, 'utf8')) : 0
const asRoot = process.getuid?.() === 0
const cannotTryPort80 = lowestUnprivilegedPort <= 80
  ? 'this machine lets any process listen on port 80'
  : asRoot && !installed('setpriv') ? 'needs setpriv (util-linux) to run without the privilege as root' : false

test('a port below 1024 without the privilege it needs stops start-up with one line saying so', { skip: cannotTryPort80 }, async () => {
  const env = { DATABASE_URL: 'sqlite::memory:', LOG_LEVEL: 'error', PORT: '80' }
  const service = fromSource('server.ts')
  // Root may listen on any port: drop that one privilege for the service (and what it runs).
  const result = asRoot
    ? await runNode(['--bounding-set', '-net_bind_service', process.execPath, ...service], env, 'setpriv')
    : await runNode(service, env)
  assert.equal(result.code, 1)
  assert.equal(result.stderr, 'Start-up failed: cannot listen on 127.0.0.1 port 80: not permitted (ports below 1024 need privileges: set PORT to 1024 or above)\n')
})

test('a reader of the log that stops reading costs log lines, never the service: it answers, drops past a bound, says how many (a log line, a metric), and exits on SIGTERM', async (t) => {
  const service = await startService(t, { DATABASE_URL: 'sqlite::memory:', LOG_LEVEL: 'info' })
  // An access-log line of about 8 kB each: the output's pipe and the lines held in memory
  // (4 MiB) are full after about 520 of them. The log masks values, so the name is long.
  const url = `http://127.0.0.1:${service.port}/users?limit=1&padding${'x'.repeat(8000)}=1`
  const getMany = async (count: number) => {
    const statuses: number[] = []
    let started = 0
    const next = async () => {
      while (started < count) {
        started++
        const response = await fetch(url)
        await response.arrayBuffer()
        statuses.push(response.status)
      }
    }
    await Promise.all(Array.from({ length: 10 }, next))
    return statuses
  }
  const accessLines = () => service.stdout.filter((line) => line.includes('"msg":"request completed"') && line.includes('paddingxxx')).length

  service.child.stdout!.pause()
  assert.deepEqual(new Set(await getMany(1000)), new Set([200]), 'every request answered while nothing reads the log')
  service.child.stdout!.resume()
  await fetch(`http://127.0.0.1:${service.port}/health`)
  let report: { droppedLines: number } | undefined
  for (let waited = 0; report === undefined && waited < 5000; waited += 50) {
    await sleep(50)
    const line = service.stdout.find((line) => line.includes('log lines dropped'))
    if (line !== undefined) report = JSON.parse(line)
  }
  assert.ok(report !== undefined, 'the drop is reported once the log is read again')
  assert.ok(report.droppedLines > 0)
  assert.equal(accessLines() + report.droppedLines, 1000, 'each request either logged or counted as dropped')
  const droppedMetric = async () => Number((await (await fetch(`http://127.0.0.1:${service.port}/metrics`)).text()).match(/^log_lines_dropped_total (\d+)$/m)?.[1])
  assert.equal(await droppedMetric(), report.droppedLines, 'the metric counts the same drops')

  // Shutting down while nothing reads the log: the lines still waiting are given up.
  service.child.stdout!.pause()
  await getMany(1000)
  assert.ok(await droppedMetric() > report.droppedLines, 'the metric says so while no log line can')
  signalGroup(service.child, 'SIGTERM')
  const exit = await Promise.race([service.exited, sleep(15_000, 'still running')])
  assert.deepEqual(exit, { code: 0, signal: null })
})

test('a reader of the log that goes away (EPIPE) costs log lines, never the service: it answers, and exits on SIGTERM', async (t) => {
  const service = await startService(t, { DATABASE_URL: 'sqlite::memory:', LOG_LEVEL: 'info' })
  service.child.stdout!.destroy()
  for (let i = 0; i < 20; i++) assert.equal((await fetch(`http://127.0.0.1:${service.port}/users`)).status, 200)
  signalGroup(service.child, 'SIGTERM')
  const exit = await Promise.race([service.exited, sleep(15_000, 'still running')])
  assert.deepEqual(exit, { code: 0, signal: null })
})

test('settings are read from .env in the working directory; the environment wins over it', async (t) => {
  const folder = temporaryFolder(t)
  writeFileSync(join(folder, '.env'), 'DATABASE_URL=sqlite:from-dotenv.db\nLOG_LEVEL=info\nBODY_LIMIT=64\n')
  const service = await startService(t, { BODY_LIMIT: '1000' }, folder)
  assert.ok(existsSync(join(folder, 'from-dotenv.db')))
  const response = await postJsonOver(service.port, '/users', { name: 'x'.repeat(100), email: 'ada@example.com' })
  assert.equal(response.statusCode, 201, 'BODY_LIMIT from the environment (1000), not from .env (64)')
})

test('started from another folder, relative paths are from that folder, and the log says where: the database by its absolute path with the migrations applied, and a missing STATIC_DIR in one warning', async (t) => {
  const folder = temporaryFolder(t)
  const linesOf = (service: { stdout: string[] }) => service.stdout.map((line) => JSON.parse(line))
  const first = await startService(t, { DATABASE_URL: 'sqlite:data/app.db' }, folder)
  const opened = linesOf(first).find((line) => line.msg === 'database open')
  assert.deepEqual([opened?.level, opened?.database, opened?.migrationsApplied], [30, `sqlite:${join(folder, 'data', 'app.db')}`, Object.keys(migrations('sqlite'))])
  const missing = linesOf(first).filter((line) => line.staticDir !== undefined)
  assert.deepEqual(missing.map((line) => [line.level, line.staticDir]), [[40, join(folder, 'public')]])
  assert.match(missing[0].msg, /^STATIC_DIR is not a folder: no static files are served/)
  const page = await rawRequest(first.port, { path: '/index.html' })
  assert.deepEqual([page.statusCode, JSON.parse(page.body)], [404, { error: 'Route not found', code: 'route_not_found' }])
  signalGroup(first.child, 'SIGTERM')
  await first.exited

  const second = await startService(t, { DATABASE_URL: 'sqlite:data/app.db' }, folder)
  assert.deepEqual(linesOf(second).find((line) => line.msg === 'database open')?.migrationsApplied, [], 'nothing to apply the second time')
})

for (const database of [...testDatabases, behindPgBouncer]) {
  describe(`on ${database.name}`, { skip: database.skip }, () => {
    test('SIGTERM lets a request in flight finish, closes the database and exits 0', async (t) => {
      const url = await database.url(t)
      const service = await startService(t, { DATABASE_URL: url })

      // A client that keeps its connection open after the answer must not hold the shutdown.
      const agent = new http.Agent({ keepAlive: true })
      t.after(() => agent.destroy())
      const body = JSON.stringify({ name: 'Ada', email: 'ada@example.com' })
      const answer = new Promise<{ statusCode: number, body: string }>((resolve, reject) => {
        const request = http.request({ agent, host: '127.0.0.1', port: service.port, method: 'POST', path: '/users', headers: { 'content-type': 'application/json', 'content-length': body.length } }, (response) => {
          let text = ''
          response.on('data', (chunk) => { text += chunk })
          response.on('end', () => resolve({ statusCode: response.statusCode ?? 0, body: text }))
        })
        request.on('error', reject)
        // Half the body now, the signal, then the rest: the request is in flight when SIGTERM lands.
        request.write(body.slice(0, 10))
        setTimeout(() => {
          service.child.kill('SIGTERM')
          setTimeout(() => request.end(body.slice(10)), 300)
        }, 200)
      })

      const response = await answer
      assert.equal(response.statusCode, 201)
      assert.equal(response.body, body)
      assert.deepEqual(await service.exited, { code: 0, signal: null })
      assert.ok(service.stdout.some((line) => line.includes('shutting down')))
      assert.equal(await openConnections(url), 0, 'the database was closed')
    })

    test('a 201 is durable: SIGKILL right after it loses nothing', async (t) => {
      const env = { DATABASE_URL: await database.url(t) }
      const first = await startService(t, env)
      const created = []
      for (let i = 0; i < 20; i++) {
        const response = await postJsonOver(first.port, '/users', { name: `user${i}`, email: `user${i}@example.com` })
        assert.equal(response.statusCode, 201)
        created.push(response.headers.location)
      }
      first.child.kill('SIGKILL')
      assert.equal((await first.exited).signal, 'SIGKILL')

      const second = await startService(t, env)
      const list = await rawRequest(second.port, { path: '/users' })
      assert.equal(list.headers['x-total-count'], '20')
      assert.deepEqual(JSON.parse(list.body).map((user: { id: number }) => `/users/${user.id}`), created)
    })

    test('the bundled server that npm start runs serves the API and the docs, and stops on SIGTERM', async (t) => {
      const service = await startService(t, { DATABASE_URL: await database.url(t) }, repositoryRoot, [await bundledServer()])
      assert.equal((await rawRequest(service.port, { path: '/health' })).statusCode, 200)
      const created = await postJsonOver(service.port, '/users', { name: 'Ada', email: 'ada@example.com' })
      assert.equal(created.statusCode, 201)
      const found = await rawRequest(service.port, { path: created.headers.location as string })
      assert.equal(JSON.parse(found.body).name, 'Ada')
      assert.match((await rawRequest(service.port, { path: '/documentation/' })).body, /swagger/i)
      assert.equal((await rawRequest(service.port, { path: '/documentation/static/swagger-ui.css' })).statusCode, 200)
      assert.match((await rawRequest(service.port, { path: '/documentation/yaml' })).body, /^openapi: 3\.1\.0$/m)
      assert.equal((await rawRequest(service.port, { path: '/index.html' })).statusCode, 200)
      service.child.kill('SIGTERM')
      assert.deepEqual(await service.exited, { code: 0, signal: null })
    })

    test('20 times over, two instances, or an instance and npm run migrate, start at the same moment on a new database: all come up, the schema is migrated once', async (t) => {
      const [server, migrate] = [await bundledEntry('server'), await bundledEntry('cli/migrate')]
      for (let pair = 0; pair < 20; pair++) {
        const env = { DATABASE_URL: await database.url(t) }
        const [service, other] = await Promise.all([
          startService(t, env, repositoryRoot, [server]),
          pair % 2 === 0 ? startService(t, env, repositoryRoot, [server]) : runNode([migrate], env)
        ])
        assert.equal((await rawRequest(service.port, { path: '/ready' })).statusCode, 200, `pair ${pair}`)
        if ('code' in other) assert.equal(other.code, 0, `pair ${pair}: ${other.stderr}`)
        else assert.equal((await rawRequest(other.port, { path: '/ready' })).statusCode, 200, `pair ${pair}`)
        for (const running of 'port' in other ? [service, other] : [service]) signalGroup(running.child, 'SIGKILL')
        const check = await runNode([migrate], env)
        assert.match(check.stdout, /^Schema is up to date\.$/m, `pair ${pair}: ${check.stderr}`)
      }
    })

    test('npm run migrate creates the schema, then finds it up to date; it asks for no token secret, in production either', async (t) => {
      const env = { DATABASE_URL: await database.url(t), NODE_ENV: 'production' }
      const first = await runScript('cli/migrate.ts', env)
      assert.equal(first.code, 0, first.stderr)
      assert.equal(first.stdout, `Applied: ${Object.keys(migrations('sqlite')).join(', ')}\n`)
      const second = await runScript('cli/migrate.ts', env)
      assert.equal(second.code, 0, second.stderr)
      assert.match(second.stdout, /^Schema is up to date\.$/m)
    })

    test('with MIGRATE=off, start-up on a database not yet migrated stops with one line saying to run npm run migrate; after it, the service starts and applies nothing', async (t) => {
      const env = { DATABASE_URL: await database.url(t), MIGRATE: 'off' }
      const refused = await runScript('server.ts', env)
      assert.equal(refused.code, 1)
      assert.match(refused.stderr, /^Start-up failed: cannot use DATABASE_URL .*: MIGRATE is off and the database has not run 2026-11-22-create-users, .*: run `npm run migrate` with this version first, or start it with MIGRATE=on\n$/)
      assert.equal((await runScript('cli/migrate.ts', env)).code, 0)
      const service = await startService(t, env)
      assert.equal((await rawRequest(service.port, { path: '/ready' })).statusCode, 200)
      assert.deepEqual(service.stdout.map((line) => JSON.parse(line)).find((line) => line.msg === 'database open')?.migrationsApplied, [])
    })

    test('a database that a newer version migrated further (this one rolled back to, or started during a rolling update) serves; one lacking a migration this version needs is refused', async (t) => {
      const env = { DATABASE_URL: await database.url(t) }
      assert.equal((await runScript('cli/migrate.ts', env)).code, 0)
      const { db } = await createDatabase(testConfig(env).database)
      t.after(() => db.destroy())
      await sql`insert into kysely_migration (name, timestamp) values ('2099-01-01-of-a-newer-version', '2099-01-01T00:00:00.000Z')`.execute(db)

      const service = await startService(t, env)
      assert.equal((await postJsonOver(service.port, '/users', { name: 'Ada', email: 'ada@example.com' })).statusCode, 201)
      const warning = service.stdout.map((line) => JSON.parse(line)).find((line) => line.msg.startsWith('the database was migrated by a newer version'))
      assert.deepEqual(warning?.migrations, ['2099-01-01-of-a-newer-version'])
      const migrate = await runScript('cli/migrate.ts', env)
      assert.equal(migrate.code, 0, migrate.stderr)
      assert.match(migrate.stdout, /^Nothing to apply: a newer version of the service has migrated the database further \(2099-01-01-of-a-newer-version\)\.$/m)

      const needed = Object.keys(migrations('sqlite')).at(-1)!
      await sql`delete from kysely_migration where name = ${needed}`.execute(db)
      const refused = await runScript('cli/migrate.ts', env)
      assert.equal(refused.code, 1)
      assert.match(refused.stderr, new RegExp(`^Migration failed: .*does not know \\(2099-01-01-of-a-newer-version\\) but not ${needed}, which it needs`, 'm'))
    })
  })
}

test('npm run migrate refuses a bad DATABASE_URL with one line', async () => {
  const bad = await runScript('cli/migrate.ts', { DATABASE_URL: 'nope' })
  assert.equal(bad.code, 1)
  assert.match(bad.stderr, /^Configuration error: DATABASE_URL must be/)
})

/**
 * Connections the service left open: on SQLite, a WAL file that a clean close would have
 * checkpointed and removed; on PostgreSQL, sessions under the test schema's application name.
 */
async function openConnections (url: string): Promise<number> {
  if (url.startsWith('sqlite:')) return existsSync(`${url.slice('sqlite:'.length)}-wal`) ? 1 : 0
  const applicationName = new URL(url).searchParams.get('application_name')
  const [row] = await postgresQuery<{ count: string }>('select count(*) from pg_stat_activity where application_name = $1', [applicationName])
  return Number(row?.count)
}
