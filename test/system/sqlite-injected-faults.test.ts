/**
 * A disk whose sync is slow or fails, or that turns read-only, injected into the service as a
 * real process (test/injected-faults.ts): each sync of SQLite's write-ahead log waits or
 * fails, or each write of its files fails with EROFS, as the test says.
 */
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { describe, test } from 'node:test'
import { postJsonOver, rawRequest, temporaryFolder } from '../helpers.js'
import { injectedFaults, needsCompiler } from '../injected-faults.js'
import { signalGroup, startService, type RunningService } from '../process.js'

const user = (name: string) => ({ name, email: `${name.toLowerCase()}@example.com` })

async function names (service: RunningService): Promise<string[]> {
  const response = await rawRequest(service.port, { path: '/users?limit=1000' })
  assert.equal(response.statusCode, 200)
  return JSON.parse(response.body).map((row: { name: string }) => row.name)
}

describe('SQLite on a disk whose sync fails or stalls, or that turns read-only', { skip: needsCompiler }, () => {
  test('a failed sync: every write it covered answers 503, none is ever seen, not even after a crash; /ready says 503 until writes work again', async (t) => {
    const disk = injectedFaults(t)
    const filename = join(temporaryFolder(t), 'app.db')
    const service = await startService(t, { DATABASE_URL: `sqlite:${filename}`, ...disk.env })
    assert.equal((await postJsonOver(service.port, '/users', user('Ada'))).statusCode, 201)

    disk.set('fail')
    const refused = await Promise.all(Array.from({ length: 20 }, (_, i) => postJsonOver(service.port, '/users', user(`Lost${i}`))))
    assert.deepEqual(refused.map((response) => response.statusCode), Array(20).fill(503))
    assert.deepEqual(JSON.parse(refused[0]!.body), { error: 'Database unavailable', code: 'database_unavailable' })
    assert.equal(refused[0]!.headers['retry-after'], '1')
    assert.deepEqual(await names(service), ['Ada'], 'no reader sees a row whose sync failed')
    assert.equal((await rawRequest(service.port, { path: '/ready' })).statusCode, 503, 'not ready while syncs fail')

    disk.set('ok')
    const recoveredAt = performance.now()
    let ready = 0
    while (ready !== 200 && performance.now() - recoveredAt < 1000) ready = (await rawRequest(service.port, { path: '/ready' })).statusCode
    assert.equal(ready, 200, 'ready again within a second, by its own probe, before any client writes')
    assert.equal((await postJsonOver(service.port, '/users', user('Grace'))).statusCode, 201)
    assert.deepEqual(await names(service), ['Ada', 'Grace'])
    const logged = service.stdout.filter((line) => /"msg":"database unavailable/.test(line))
    assert.equal(logged.length, 1, 'one line for the episode, not one a request')

    signalGroup(service.child, 'SIGKILL')
    await service.exited
    const restarted = await startService(t, { DATABASE_URL: `sqlite:${filename}` })
    assert.deepEqual(await names(restarted), ['Ada', 'Grace'], 'recovery after a crash brings back none of the refused rows')
  })

  test('a filesystem gone read-only under the running service: writes and /ready answer 503, reads go on, and all works again once it is writable', async (t) => {
    const disk = injectedFaults(t)
    const service = await startService(t, { DATABASE_URL: `sqlite:${join(temporaryFolder(t), 'app.db')}`, ...disk.env })
    assert.equal((await postJsonOver(service.port, '/users', user('Ada'))).statusCode, 201)

    disk.set('readonly')
    const refused = await Promise.all(Array.from({ length: 5 }, (_, i) => postJsonOver(service.port, '/users', user(`Lost${i}`))))
    assert.deepEqual(refused.map((response) => response.statusCode), Array(5).fill(503))
    assert.deepEqual(await names(service), ['Ada'], 'a failed write never breaks later reads')
    assert.equal((await rawRequest(service.port, { path: '/ready' })).statusCode, 503, 'not ready while writes fail')

    disk.set('ok')
    assert.equal((await rawRequest(service.port, { path: '/ready' })).statusCode, 200, 'ready again by its own probe')
    assert.equal((await postJsonOver(service.port, '/users', user('Grace'))).statusCode, 201)
    assert.deepEqual(await names(service), ['Ada', 'Grace'])
  })

  test('a slow sync: concurrent writes share syncs, and each 201 comes after a sync that began after its request', async (t) => {
    const disk = injectedFaults(t)
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
