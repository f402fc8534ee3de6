/**
 * A disk whose sync is slow or fails, or that turns read-only, and a machine whose file table
 * is full, injected into the service as a real process: a small library loaded with LD_PRELOAD
 * (test/fixtures/disk-faults.c) makes each sync of SQLite's write-ahead log wait or fail, each
 * write of its files fail with EROFS, or each open of a file fail with ENFILE, as the control
 * file says. It needs a C compiler, which CI installs.
 */
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { describe, test, type TestContext } from 'node:test'
import { fileURLToPath } from 'node:url'
import { postJsonOver, rawRequest, temporaryFolder } from './helpers.js'
import { installed, signalGroup, startService, type RunningService } from './process.js'

const needsCompiler = installed('cc') ? false : 'needs a C compiler (cc) to build the disk fault injector (CI installs gcc)'

interface FaultyDisk {
  env: Record<string, string>
  /** What each later sync of the WAL does (go on, fail with EIO, or wait first), or refuse writes, or opens. */
  set: (mode: 'ok' | 'fail' | `slow ${number}` | 'readonly' | 'nofiles') => void
  /** The syncs of the WAL so far: when each began and ended, and whether it succeeded. */
  syncs: () => Sync[]
}

interface Sync { began: number, ended: number, ok: boolean }

function faultyDisk (t: TestContext): FaultyDisk {
  const folder = temporaryFolder(t)
  const library = join(folder, 'disk-faults.so')
  execFileSync('cc', ['-shared', '-fPIC', '-O2', '-o', library, fileURLToPath(new URL('fixtures/disk-faults.c', import.meta.url)), '-ldl'])
  const control = join(folder, 'control')
  const log = join(folder, 'syncs')
  writeFileSync(control, 'ok')
  writeFileSync(log, '')
  return {
    env: { LD_PRELOAD: library, DISK_FAULT_CONTROL: control, DISK_FAULT_LOG: log },
    set: (mode) => writeFileSync(control, mode),
    syncs: () => readFileSync(log, 'utf8').split('\n').filter(Boolean).map((line) => {
      const [began, ended, outcome] = line.split(' ')
      return { began: Number(began), ended: Number(ended), ok: outcome === 'ok' }
    })
  }
}

const user = (name: string) => ({ name, email: `${name.toLowerCase()}@example.com` })

async function names (service: RunningService): Promise<string[]> {
  const response = await rawRequest(service.port, { path: '/users?limit=1000' })
  assert.equal(response.statusCode, 200)
  return JSON.parse(response.body).map((row: { name: string }) => row.name)
}

describe('SQLite on a disk whose sync fails or stalls, or that turns read-only', { skip: needsCompiler }, () => {
  test('a failed sync: every write it covered answers 503, none of them is ever seen, not even after a crash, and writes work again', async (t) => {
    const disk = faultyDisk(t)
    const filename = join(temporaryFolder(t), 'app.db')
    const service = await startService(t, { DATABASE_URL: `sqlite:${filename}`, ...disk.env })
    assert.equal((await postJsonOver(service.port, '/users', user('Ada'))).statusCode, 201)

    disk.set('fail')
    const refused = await Promise.all(Array.from({ length: 20 }, (_, i) => postJsonOver(service.port, '/users', user(`Lost${i}`))))
    assert.deepEqual(refused.map((response) => response.statusCode), Array(20).fill(503))
    assert.deepEqual(JSON.parse(refused[0]!.body), { error: 'Database unavailable' })
    assert.equal(refused[0]!.headers['retry-after'], '1')
    assert.deepEqual(await names(service), ['Ada'], 'no reader sees a row whose sync failed')

    disk.set('ok')
    assert.equal((await postJsonOver(service.port, '/users', user('Grace'))).statusCode, 201)
    assert.deepEqual(await names(service), ['Ada', 'Grace'])
    const logged = service.stdout.filter((line) => /"msg":"database unavailable/.test(line))
    assert.equal(logged.length, 1, 'one line for the episode, not one a request')

    signalGroup(service.child, 'SIGKILL')
    await service.exited
    const restarted = await startService(t, { DATABASE_URL: `sqlite:${filename}` })
    assert.deepEqual(await names(restarted), ['Ada', 'Grace'], 'recovery after a crash brings back none of the refused rows')
  })

  test('a filesystem gone read-only under the running service: writes answer 503, reads go on, and writes work again once it is writable', async (t) => {
    const disk = faultyDisk(t)
    const service = await startService(t, { DATABASE_URL: `sqlite:${join(temporaryFolder(t), 'app.db')}`, ...disk.env })
    assert.equal((await postJsonOver(service.port, '/users', user('Ada'))).statusCode, 201)

    disk.set('readonly')
    const refused = await Promise.all(Array.from({ length: 5 }, (_, i) => postJsonOver(service.port, '/users', user(`Lost${i}`))))
    assert.deepEqual(refused.map((response) => response.statusCode), Array(5).fill(503))
    assert.deepEqual(await names(service), ['Ada'], 'a failed write never breaks later reads')

    disk.set('ok')
    assert.equal((await postJsonOver(service.port, '/users', user('Grace'))).statusCode, 201)
    assert.deepEqual(await names(service), ['Ada', 'Grace'])
  })

  test('a slow sync: concurrent writes share syncs, and each 201 comes after a sync that began after its request', async (t) => {
    const disk = faultyDisk(t)
    const service = await startService(t, { DATABASE_URL: `sqlite:${join(temporaryFolder(t), 'app.db')}`, ...disk.env })
    disk.set('slow 200')
    const syncedBefore = disk.syncs().length
    const now = () => performance.timeOrigin + performance.now()
    const started = now()
    const writes = await Promise.all(Array.from({ length: 50 }, async (_, i) => {
      const sent = now()
      const response = await postJsonOver(service.port, '/users', user(`Slow${i}`))
      return { sent, answered: now(), status: response.statusCode, location: response.headers.location as string }
    }))
    const ms = now() - started
    const syncs = disk.syncs().slice(syncedBefore)
    assert.deepEqual(writes.map(({ status }) => status), Array(50).fill(201))
    for (const write of writes) {
      // Its row was written after its request was sent, so the sync that made it durable
      // began after that, and ended before the answer.
      assert.ok(syncs.some((sync) => sync.ok && sync.began > write.sent && sync.ended < write.answered),
        `${write.location} was answered 201 without a sync of the WAL between its request and its answer`)
      assert.equal((await rawRequest(service.port, { path: write.location })).statusCode, 200)
    }
    assert.ok(syncs.length < 50 / 4, `50 writes took ${syncs.length} syncs of 200 ms`)
    t.diagnostic(`slow sync (200 ms): 50 concurrent writes in ${ms.toFixed(0)} ms, ${syncs.length} syncs of the WAL`)
  })
})

describe('a machine whose table of open files is full', { skip: needsCompiler }, () => {
  test('the service lives through it, answering all that needs no new file, and opens files again once it can', async (t) => {
    const disk = faultyDisk(t)
    const service = await startService(t, { DATABASE_URL: `sqlite:${join(temporaryFolder(t), 'app.db')}`, ...disk.env })
    assert.equal((await postJsonOver(service.port, '/users', user('Ada'))).statusCode, 201)

    disk.set('nofiles')
    // Overload protection samples once a second: let it sample twice while nothing opens.
    await sleep(2500)
    assert.deepEqual(await names(service), ['Ada'])
    assert.equal((await postJsonOver(service.port, '/users', user('Grace'))).statusCode, 201, 'SQLite keeps its files open')
    assert.equal((await rawRequest(service.port, { path: '/metrics' })).statusCode, 200)
    assert.equal(service.child.exitCode, null)

    disk.set('ok')
    assert.equal((await postJsonOver(service.port, '/users', user('Linus'))).statusCode, 201)
    assert.deepEqual(await names(service), ['Ada', 'Grace', 'Linus'])
  })
})
