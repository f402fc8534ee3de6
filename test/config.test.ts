import assert from 'node:assert/strict'
import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import { getHeapStatistics } from 'node:v8'
import { ConfigError, loadConfig } from '../src/config.js'
import { fromSource, runNode, serverUnderOpenFileLimit } from './process.js'

test('defaults: port 3000 on all interfaces, SQLite under data/, no auth, any origin', () => {
  const config = loadConfig({})
  assert.equal(config.port, 3000)
  assert.equal(config.host, '0.0.0.0')
  assert.deepEqual(config.database, { dialect: 'sqlite', filename: 'data/app.db' })
  assert.equal(config.auth, 'off')
  assert.equal(config.corsOrigin, true)
  assert.equal(config.logLevel, 'info')
  assert.equal(config.bodyLimit, 1048576)
  assert.equal(config.staticDir, 'public')
  assert.equal(config.production, false)
})

test('values are read from the environment and converted', () => {
  const config = loadConfig({
    PORT: '8080',
    HOST: '127.0.0.1',
    DATABASE_URL: 'postgres://app:secret@db.internal:5432/users',
    CORS_ORIGIN: 'https://a.example.com,https://b.example.com:8443',
    LOG_LEVEL: 'debug',
    BODY_LIMIT: '2048',
    STATIC_DIR: 'assets'
  })
  assert.equal(config.port, 8080)
  assert.equal(config.host, '127.0.0.1')
  assert.deepEqual(config.database, { dialect: 'postgres', connectionString: 'postgres://app:secret@db.internal:5432/users', poolSize: 10 })
  assert.deepEqual(loadConfig({ DATABASE_URL: 'postgres://db/users', DATABASE_POOL_SIZE: '25' }).database,
    { dialect: 'postgres', connectionString: 'postgres://db/users', poolSize: 25 })
  assert.deepEqual(config.corsOrigin, ['https://a.example.com', 'https://b.example.com:8443'])
  assert.equal(config.bodyLimit, 2048)
  assert.deepEqual(loadConfig({ DATABASE_URL: 'sqlite::memory:' }).database, { dialect: 'sqlite', filename: ':memory:' })
})

test('AUTH=writes or all needs JWT_SECRET, for with a generated one no client could get a token', () => {
  for (const mode of ['writes', 'all']) {
    assert.throws(() => loadConfig({ AUTH: mode }), new RegExp(`^ConfigError: JWT_SECRET is required when AUTH=${mode}$`))
    assert.equal(loadConfig({ AUTH: mode, JWT_SECRET: 'a-secret' }).auth, mode)
  }
})

test('in production JWT_SECRET must be at least 32 bytes', () => {
  assert.throws(() => loadConfig({ NODE_ENV: 'production', JWT_SECRET: 's'.repeat(31) }),
    /^ConfigError: JWT_SECRET must be at least 32 bytes when NODE_ENV=production$/)
  assert.equal(loadConfig({ NODE_ENV: 'production', JWT_SECRET: 'é'.repeat(16) }).jwt.secret, 'é'.repeat(16), 'bytes, not characters')
  assert.equal(loadConfig({ JWT_SECRET: 'short' }).jwt.secret, 'short', 'outside production a short secret is allowed')
})

test('an empty variable counts as unset', () => {
  assert.equal(loadConfig({ PORT: '' }).port, 3000)
})

test('a bad value is refused with one line naming the variable', () => {
  const cases: Array<[Record<string, string>, RegExp]> = [
    [{ PORT: 'abc' }, /^PORT must be integer \(got "abc"\)$/],
    [{ PORT: '70000' }, /^PORT must be <= 65535/],
    [{ PORT: '-1' }, /^PORT must be >= 0/],
    [{ PORT: '80.5' }, /^PORT must be integer/],
    [{ DATABASE_URL: 'mysql://localhost/db' }, /^DATABASE_URL must be sqlite:<path>/],
    [{ DATABASE_URL: 'sqlite:' }, /^DATABASE_URL must be/],
    [{ DATABASE_URL: 'postgres://' }, /^DATABASE_URL must be/],
    [{ AUTH: 'sometimes' }, /^AUTH must be one of off, writes, all \(got "sometimes"\)$/],
    [{ LOG_LEVEL: 'loud' }, /^LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent/],
    [{ BODY_LIMIT: '0' }, /^BODY_LIMIT must be >= 1/],
    [{ DATABASE_POOL_SIZE: '0' }, /^DATABASE_POOL_SIZE must be >= 1/],
    [{ BODY_LIMIT: '1MB' }, /^BODY_LIMIT must be integer/],
    [{ CORS_ORIGIN: 'example.com' }, /^CORS_ORIGIN must be a comma-separated list of origins/],
    [{ CORS_ORIGIN: 'https://example.com/path' }, /^CORS_ORIGIN /],
    [{ TRUST_PROXY: 'yes' }, /^TRUST_PROXY must be off, a hop count from 1 to 99, or a comma-separated list of addresses and networks/],
    [{ TRUST_PROXY: '10.0.0.0/33' }, /^TRUST_PROXY must be/],
    [{ TRUST_PROXY: '0' }, /^TRUST_PROXY must be/]
  ]
  for (const [env, message] of cases) {
    assert.throws(() => loadConfig(env), (error: Error) => {
      assert.ok(error instanceof ConfigError)
      assert.match(error.message, message)
      assert.doesNotMatch(error.message, /\n/)
      return true
    }, JSON.stringify(env))
  }
})

test('SHUTDOWN_DRAIN_MS is 5000 in production and 0 elsewhere, unless set', () => {
  assert.equal(loadConfig({}).shutdownDrainMs, 0)
  assert.equal(loadConfig({ NODE_ENV: 'production', JWT_SECRET: 'x'.repeat(32) }).shutdownDrainMs, 5000)
  assert.equal(loadConfig({ NODE_ENV: 'production', JWT_SECRET: 'x'.repeat(32), SHUTDOWN_DRAIN_MS: '0' }).shutdownDrainMs, 0)
  assert.equal(loadConfig({ SHUTDOWN_DRAIN_MS: '250' }).shutdownDrainMs, 250)
})

test('TRUST_PROXY is off by default, or a hop count, or addresses and networks', () => {
  assert.equal(loadConfig({}).trustProxy, false)
  assert.equal(loadConfig({ TRUST_PROXY: '2' }).trustProxy, 2)
  assert.deepEqual(loadConfig({ TRUST_PROXY: '10.0.0.0/8, 127.0.0.1,::1' }).trustProxy, ['10.0.0.0/8', '127.0.0.1', '::1'])
})

test('a database URL is never echoed back, for it may hold a password', () => {
  assert.throws(() => loadConfig({ DATABASE_URL: 'mysql://root:hunter2@db/x' }), (error: Error) => !error.message.includes('hunter2'))
})

test('production requires JWT_SECRET; elsewhere a random per-process secret is generated', () => {
  assert.throws(() => loadConfig({ NODE_ENV: 'production' }), /^ConfigError: JWT_SECRET is required when NODE_ENV=production$/)
  assert.deepEqual(loadConfig({ NODE_ENV: 'production', JWT_SECRET: 's'.repeat(32) }).jwt, { secret: 's'.repeat(32), generated: false })

  const first = loadConfig({}).jwt
  const second = loadConfig({}).jwt
  assert.equal(first.generated, true)
  assert.ok(first.secret.length >= 32)
  assert.notEqual(first.secret, second.secret)
})

test('MAX_CONNECTIONS defaults to the open-file limit less 128 and, on PostgreSQL, the pool; one that would leave no open file is refused', { skip: existsSync('/proc/self/limits') ? false : 'no /proc/self/limits here' }, async () => {
  const soft = /^Max open files\s+(\d+)/m.exec(readFileSync('/proc/self/limits', 'utf8'))?.[1]
  const limit = soft === undefined ? Infinity : Number(soft)
  assert.equal(loadConfig({}).maxConnections, limit - 128)
  assert.equal(loadConfig({ DATABASE_URL: 'postgres://app@db.internal/users', DATABASE_POOL_SIZE: '50' }).maxConnections, limit - 128 - 50,
    'each pooled connection takes an open file too')
  assert.equal(loadConfig({ MAX_CONNECTIONS: '500' }).maxConnections, 500)
  assert.throws(() => loadConfig({ MAX_CONNECTIONS: '0' }), /^ConfigError: MAX_CONNECTIONS must be >= 1/)
  if (limit !== Infinity) {
    assert.throws(() => loadConfig({ MAX_CONNECTIONS: String(limit) }), {
      message: `MAX_CONNECTIONS must be at most ${limit - 128}: the open-file limit is ${limit}, less 128 kept for the process (raise the limit, or lower MAX_CONNECTIONS) (got ${limit})`
    })
  }

  const limited = serverUnderOpenFileLimit(200)
  const refused = await runNode(limited.nodeArgs, { DATABASE_URL: 'postgres://app@db.invalid/users', DATABASE_POOL_SIZE: '100' }, limited.command)
  assert.equal(refused.code, 1)
  assert.equal(refused.stderr, 'Configuration error: No open file is left for client connections: the open-file limit is 200, ' +
    'less 128 kept for the process and 100 for DATABASE_POOL_SIZE (raise the limit, or lower DATABASE_POOL_SIZE)\n')
})

/** Where a process can be put in a memory control group of its own: as root, with cgroup v1's memory controller. */
const memoryCgroups = '/sys/fs/cgroup/memory'
const canLimitMemory = process.getuid?.() === 0 && existsSync(join(memoryCgroups, 'cgroup.procs'))
  ? false
  : 'needs root and the memory controller of cgroup v1 (CI has both)'

test('in a 512 MB container, MAX_CONNECTIONS defaults to 4,096: one per 128 kB of the memory it may have', { skip: canLimitMemory }, async (t) => {
  const group = join(memoryCgroups, `config-test-${process.pid}`)
  mkdirSync(group)
  t.after(() => { rmdirSync(group) })
  writeFileSync(join(group, 'memory.limit_in_bytes'), String(512 * 2 ** 20))
  const shown = await runNode(['-c', `echo $$ > ${group}/cgroup.procs && exec "$0" "$@"`, process.execPath, '--import', 'tsx', '--input-type=module', '-e', `
    const { loadConfig } = await import('./src/config.ts')
    console.log(loadConfig({}).maxConnections)`], {}, 'sh')
  assert.equal(shown.stdout, '4096\n', shown.stderr)
})

test('OVERLOAD_MAX_HEAP_MB defaults to three quarters of the heap V8 allows, at most 1 GB; one the heap can never reach is refused', async () => {
  const limitMb = Math.floor(getHeapStatistics().heap_size_limit / 2 ** 20)
  assert.equal(loadConfig({}).overload.maxHeapBytes, Math.min(1024, Math.floor(limitMb * 0.75)) * 2 ** 20)
  assert.equal(loadConfig({ OVERLOAD_MAX_HEAP_MB: '0' }).overload.maxHeapBytes, 0, '0 turns it off')

  // A small heap, as Node gives a process in a 512 MB container (268 MB there).
  const smallHeap = '--max-old-space-size=200'
  const shown = await runNode([smallHeap, '--import', 'tsx', '--input-type=module', '-e', `
    const { getHeapStatistics } = await import('node:v8')
    const { loadConfig } = await import('./src/config.ts')
    console.log(JSON.stringify([getHeapStatistics().heap_size_limit, loadConfig({}).overload.maxHeapBytes].map((bytes) => Math.floor(bytes / 2 ** 20))))`], {})
  const [smallLimitMb, shedAtMb] = JSON.parse(shown.stdout)
  assert.equal(shedAtMb, Math.floor(smallLimitMb * 0.75), shown.stderr)
  const refused = await runNode([smallHeap, ...fromSource('server.ts')], { OVERLOAD_MAX_HEAP_MB: '1024' })
  assert.equal(refused.code, 1)
  assert.equal(refused.stderr, `Configuration error: OVERLOAD_MAX_HEAP_MB must be below the heap this process may have, ${smallLimitMb} MB ` +
    '(set by Node from the memory of the machine or container, or by --max-old-space-size), or it could never shed load; 0 turns it off (got 1024)\n')
})
