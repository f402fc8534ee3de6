/**
 * A machine whose table of open files is full: no file or socket can be opened for a while
 * (ENFILE), injected into the service as a real process (test/injected-faults.ts), since
 * filling the real table would starve every other process on the machine too.
 */
import assert from 'node:assert/strict'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { postgresQuery, postJsonOver, rawRequest, temporaryFolder, testDatabases } from '../helpers.js'
import { injectedFaults, needsCompiler } from '../injected-faults.js'
import { startService } from '../process.js'

const [sqlite, postgres] = testDatabases as [typeof testDatabases[0], typeof testDatabases[0]]

describe('a machine whose table of open files is full', { skip: needsCompiler }, () => {
  test('the service lives through it, answers what needs no new file, 503 with Retry-After what does, and opens files again once it can', async (t) => {
    const faults = injectedFaults(t)
    const staticDir = temporaryFolder(t)
    writeFileSync(join(staticDir, 'index.html'), '<p>Hello</p>\n')
    const service = await startService(t, { DATABASE_URL: await sqlite.url(t), STATIC_DIR: staticDir, ...faults.env })
    const created = await postJsonOver(service.port, '/users', { name: 'Ada', email: 'ada@example.com' })
    assert.equal(created.statusCode, 201)

    faults.set('nofiles')
    // Overload protection samples once a second: let it sample twice while nothing opens.
    await sleep(2500)
    assert.equal((await rawRequest(service.port, { path: created.headers.location as string })).statusCode, 200)
    assert.equal((await postJsonOver(service.port, '/users', { name: 'Grace', email: 'grace@example.com' })).statusCode, 201,
      'SQLite keeps its files open')
    assert.equal((await rawRequest(service.port, { path: '/metrics' })).statusCode, 200)
    const page = await rawRequest(service.port, { path: '/index.html' })
    assert.equal(page.statusCode, 503)
    assert.equal(page.headers['retry-after'], '1')
    assert.deepEqual(JSON.parse(page.body), { error: 'No file can be opened now: try again shortly', code: 'no_file_descriptors' })
    assert.equal(service.child.exitCode, null)

    faults.set('ok')
    assert.equal((await rawRequest(service.port, { path: '/index.html' })).statusCode, 200)
  })

  test('on PostgreSQL, a request that needs a new pooled connection is answered 503 with Retry-After, never 500', { skip: postgres.skip }, async (t) => {
    const faults = injectedFaults(t)
    const url = await postgres.url(t)
    const service = await startService(t, { DATABASE_URL: url, ...faults.env })
    const created = await postJsonOver(service.port, '/users', { name: 'Ada', email: 'ada@example.com' })
    assert.equal(created.statusCode, 201)

    faults.set('nofiles')
    // The pool's open connections end, so that every lookup needs one the pool must open.
    await postgresQuery('select pg_terminate_backend(pid) from pg_stat_activity where application_name = $1',
      [new URL(url).searchParams.get('application_name')])
    const lookup = () => rawRequest(service.port, { path: created.headers.location as string })
    const answers = await Promise.all(Array.from({ length: 20 }, lookup))
    assert.deepEqual(answers.map((answer) => answer.statusCode), Array(20).fill(503))
    assert.deepEqual(JSON.parse(answers[0]!.body), { error: 'Database unavailable', code: 'database_unavailable' })
    assert.equal(answers[0]!.headers['retry-after'], '1')

    faults.set('ok')
    const again = await Promise.all(Array.from({ length: 20 }, lookup))
    assert.deepEqual(again.map((answer) => answer.statusCode), Array(20).fill(200))
  })
})
