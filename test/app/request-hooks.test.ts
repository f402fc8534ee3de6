import assert from 'node:assert/strict'
import { test } from 'node:test'
import { captureLogs, postJson, testApp } from '../helpers.js'

test('a safe incoming X-Request-Id is returned as is; without one, a fresh id is made', async (t) => {
  const app = await testApp(t)
  const given = await app.inject({ url: '/', headers: { 'x-request-id': 'abc-123_x.y' } })
  assert.equal(given.headers['x-request-id'], 'abc-123_x.y')

  const first = (await app.inject('/')).headers['x-request-id']
  const second = (await app.inject('/')).headers['x-request-id']
  assert.match(String(first), /^[0-9a-f-]{36}$/)
  assert.notEqual(first, second)
})

test('an X-Request-Id that is too long or has unsafe characters is replaced', async (t) => {
  const app = await testApp(t)
  for (const unsafe of ['x'.repeat(129), 'a b', 'line\\nbreak', '{"level":60}', 'é']) {
    const response = await app.inject({ url: '/', headers: { 'x-request-id': unsafe } })
    assert.match(String(response.headers['x-request-id']), /^[0-9a-f-]{36}$/, unsafe)
  }
  const longest = 'x'.repeat(128)
  assert.equal((await app.inject({ url: '/', headers: { 'x-request-id': longest } })).headers['x-request-id'], longest)
})

test('errors and unknown routes carry the request id too', async (t) => {
  const app = await testApp(t)
  const notFound = await app.inject({ url: '/nowhere', headers: { 'x-request-id': 'lost-1' } })
  assert.equal(notFound.headers['x-request-id'], 'lost-1')
  const invalid = await postJson(app, '/users', {})
  assert.ok(invalid.headers['x-request-id'])
})

test('each request writes one structured log line with method, route, status and response time', async (t) => {
  const logs = captureLogs()
  const app = await testApp(t, { LOG_LEVEL: 'info' }, logs.stream)
  await app.inject({ url: '/users/42?limit=1&x=1', headers: { 'x-request-id': 'req-1' } })
  await postJson(app, '/users', { name: 'Ada', email: 'ada@example.com' })

  const requests = logs.lines.filter((line) => line.msg === 'request completed')
  assert.equal(requests.length, 2)
  const [lookup, create] = requests
  assert.equal(lookup?.reqId, 'req-1')
  assert.equal(lookup?.method, 'GET')
  assert.equal(lookup?.url, '/users/42?limit=1&x=***', 'a query value that could be personal is masked')
  assert.equal(lookup?.route, '/users/:id', 'the route pattern, not only the raw URL')
  assert.equal(lookup?.statusCode, 404)
  assert.equal(typeof lookup?.responseTime, 'number')
  assert.equal(create?.statusCode, 201)
  assert.equal(logs.lines.filter((line) => line.reqId === 'req-1').length, 1, 'one line per request, not two')
})

test('the log line of an error answer says what the client was told; a success\'s has no error', async (t) => {
  const logs = captureLogs()
  const app = await testApp(t, { LOG_LEVEL: 'info' }, logs.stream)
  await postJson(app, '/users', { name: 'Ada', email: 'not-an-address' })
  await app.inject('/users/42')
  await app.inject('/nowhere')
  await app.inject({ method: 'POST', url: '/users', headers: { 'content-type': 'application/json' }, payload: '{"name":' })
  await app.inject('/')

  const errors = logs.lines.filter((line) => line.msg === 'request completed').map((line) => [line.statusCode, line.error])
  assert.deepEqual(errors, [
    [400, 'body/email must match format "email"'],
    [404, 'User not found'],
    [404, 'Route not found'],
    [400, 'Body is not valid JSON'],
    [200, undefined]
  ])
})

test('LOG_LEVEL=warn silences the access log', async (t) => {
  const logs = captureLogs()
  const app = await testApp(t, { LOG_LEVEL: 'warn' }, logs.stream)
  await app.inject('/')
  assert.equal(logs.lines.filter((line) => line.msg === 'request completed').length, 0)
})
