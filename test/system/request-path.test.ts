/**
 * The path of one request through the source, as docs/layout.md draws it: read from V8's coverage
 * of the main thread while a `GET /users/{id}` is answered over a socket.
 */
import assert from 'node:assert/strict'
import { EventEmitter, once } from 'node:events'
import { Session } from 'node:inspector/promises'
import { relative } from 'node:path'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { testApp } from '../helpers.js'
import { repositoryRoot } from '../process.js'

/** The files of src/ whose code ran while `request` was answered. */
async function filesRunBy (request: () => Promise<unknown>): Promise<string[]> {
  const session = new Session()
  session.connect()
  try {
    await session.post('Profiler.enable')
    await session.post('Profiler.startPreciseCoverage', { callCount: true, detailed: false })
    // Taking the coverage sets its counts back to zero.
    await session.post('Profiler.takePreciseCoverage')
    await request()
    const { result } = await session.post('Profiler.takePreciseCoverage')
    return result
      .filter(({ url, functions }) => url.startsWith('file:') && functions.some(({ ranges }) => ranges[0]!.count > 0))
      .map(({ url }) => relative(repositoryRoot, fileURLToPath(url)))
      .filter((path) => path.startsWith('src/'))
      .sort()
  } finally {
    await session.post('Profiler.stopPreciseCoverage')
    session.disconnect()
  }
}

test('a GET of one user runs code in the twelve main-thread files docs/layout.md lists', async (t) => {
  const app = await testApp(t)
  // The metrics and the access line are written once the answer has gone: the request is over then.
  const answered = new EventEmitter()
  app.addHook('onResponse', (_request, _reply, done) => {
    done()
    answered.emit('answered')
  })
  const address = await app.listen({ port: 0, host: '127.0.0.1' })
  const created = await fetch(`${address}/users`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'Ada', email: 'ada@example.com' })
  })
  const location = created.headers.get('location')!
  const get = async () => {
    const over = once(answered, 'answered')
    const response = await fetch(`${address}${location}`)
    assert.equal(response.status, 200)
    await response.text()
    await over
  }
  // The first requests compile what every later one runs.
  for (let i = 0; i < 10; i++) await get()

  assert.deepEqual(await filesRunBy(get), [
    'src/http/conditional-get.ts',
    'src/http/edge/bodies.ts',
    'src/http/edge/transport.ts',
    'src/http/errors.ts',
    'src/http/guards/overload.ts',
    'src/http/request/metrics.ts',
    'src/http/request/request-context.ts',
    'src/storage/observed-queries.ts',
    'src/storage/sqlite.ts',
    'src/users/find.ts',
    'src/users/repository.ts',
    'src/users/user-id.ts'
  ])
})
