import assert from 'node:assert/strict'
import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import { getHeapStatistics } from 'node:v8'
import { loadConfig } from '../../src/config/config.js'
import { fromSource, runNode, serverUnderOpenFileLimit } from '../process.js'

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
    const { loadConfig } = await import('./src/config/config.ts')
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
    const { loadConfig } = await import('./src/config/config.ts')
    console.log(JSON.stringify([getHeapStatistics().heap_size_limit, loadConfig({}).overload.maxHeapBytes].map((bytes) => Math.floor(bytes / 2 ** 20))))`], {})
  const [smallLimitMb, shedAtMb] = JSON.parse(shown.stdout)
  assert.equal(shedAtMb, Math.floor(smallLimitMb * 0.75), shown.stderr)
  const refused = await runNode([smallHeap, ...fromSource('server.ts')], { OVERLOAD_MAX_HEAP_MB: '1024' })
  assert.equal(refused.code, 1)
  assert.equal(refused.stderr, `Configuration error: OVERLOAD_MAX_HEAP_MB must be below the heap this process may have, ${smallLimitMb} MB ` +
    '(set by Node from the memory of the machine or container, or by --max-old-space-size), or it could never shed load; 0 turns it off (got 1024)\n')
})
