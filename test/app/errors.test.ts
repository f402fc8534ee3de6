import assert from 'node:assert/strict'
import { Readable } from 'node:stream'
import { test } from 'node:test'
import { brotliCompressSync, gzipSync } from 'node:zlib'
import { AppError } from '../../src/http/errors.js'
import { captureLogs, postJson, testApp } from '../helpers.js'

function assertJsonError (response: { statusCode: number, headers: Record<string, unknown>, json: () => unknown }, statusCode: number, error?: string) {
  assert.equal(response.statusCode, statusCode)
  assert.match(String(response.headers['content-type']), /^application\/json/)
  const body = response.json() as { error: unknown }
  assert.equal(typeof body.error, 'string')
  if (error !== undefined) assert.equal(body.error, error)
}

test('an unknown route answers 404 Route not found, whatever the method', async (t) => {
  const app = await testApp(t)
  for (const method of ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const) {
    assertJsonError(await app.inject({ method, url: '/no/such/route' }), 404, 'Route not found')
  }
  assertJsonError(await app.inject({ method: 'PUT', url: '/users/1' }), 404, 'Route not found')
  for (const method of ['QUERY', 'PROPFIND'] as const) {
    assertJsonError(await app.inject({ method, url: '/health' }), 404, 'Route not found')
    assertJsonError(await app.inject({ method, url: '/users', headers: { 'content-type': 'text/plain' }, payload: 'x' }), 404, 'Route not found')
  }
})

test('malformed JSON and an empty JSON body are 400 saying the body is not valid JSON', async (t) => {
  const app = await testApp(t)
  for (const payload of ['{"name": "Ada",', '{name: "Ada"}', 'nul', '']) {
    const response = await app.inject({ method: 'POST', url: '/users', payload, headers: { 'content-type': 'application/json' } })
    assertJsonError(response, 400)
    assert.match(response.json().error, /^Body is not valid JSON/, JSON.stringify(payload))
  }
})

test('a body over BODY_LIMIT is 413, whether it says its length or comes in chunks without one', async (t) => {
  const app = await testApp(t, { BODY_LIMIT: '100' })
  const response = await postJson(app, '/users', { name: 'x'.repeat(200), email: 'ada@example.com' })
  assertJsonError(response, 413, 'Request body is too large')
  const chunks = ['{"name":"', 'x'.repeat(60), 'x'.repeat(60), '","email":"ada@example.com"}'].map((chunk) => Buffer.from(chunk))
  const chunked = await app.inject({ method: 'POST', url: '/users', payload: Readable.from(chunks), headers: { 'content-type': 'application/json' } })
  assertJsonError(chunked, 413, 'Request body is too large')
})

test('a body that is not application/json is 415, text/plain included', async (t) => {
  const app = await testApp(t)
  for (const contentType of ['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/xml']) {
    const response = await app.inject({ method: 'POST', url: '/users', payload: 'name=Ada', headers: { 'content-type': contentType } })
    assertJsonError(response, 415)
    assert.match(response.json().error, /^Unsupported Media Type/)
  }
  const charset = await app.inject({
    method: 'POST',
    url: '/users',
    payload: '{"name":"Ada","email":"ada@example.com"}',
    headers: { 'content-type': 'application/json; charset=utf-8' }
  })
  assert.equal(charset.statusCode, 201, 'a charset parameter is fine')
})

test('a compressed body (Content-Encoding) is 415 with Accept-Encoding: identity, and nothing is stored', async (t) => {
  const app = await testApp(t)
  const json = '{"name":"Ada","email":"ada@example.com"}'
  const bodies = [
    { encoding: 'gzip', payload: gzipSync(json) },
    { encoding: 'br', payload: brotliCompressSync(json) },
    // The bytes are plain JSON, but the header says otherwise: not taken as JSON either.
    { encoding: 'GZIP', payload: json },
    { encoding: 'identity, gzip', payload: json }
  ]
  for (const { encoding, payload } of bodies) {
    for (const url of ['/users', '/users/507f1f77bcf86cd799439011']) {
      const response = await app.inject({ method: 'POST', url, payload, headers: { 'content-type': 'application/json', 'content-encoding': encoding } })
      assertJsonError(response, 415, 'Unsupported Media Type: send the body uncompressed, without Content-Encoding')
      assert.equal(response.headers['accept-encoding'], 'identity', encoding)
    }
  }
  assert.equal((await app.inject('/users')).headers['x-total-count'], '0')
  const identity = await app.inject({ method: 'POST', url: '/users', payload: json, headers: { 'content-type': 'application/json', 'content-encoding': 'identity' } })
  assert.equal(identity.statusCode, 201, 'identity is no coding at all')
})

test('a POST without a body is 400: the body must be an object', async (t) => {
  const app = await testApp(t)
  assertJsonError(await app.inject({ method: 'POST', url: '/users' }), 400, 'body must be object')
})

test('a body nested deeper than 1000 arrays and objects is 400 before it is parsed; 1000 levels are taken', async (t) => {
  const app = await testApp(t)
  const nested = (depth: number) => `{"name":"Ada","email":"ada@example.com","extra":${'['.repeat(depth - 1)}${']'.repeat(depth - 1)}}`
  const post = async (payload: string) => await app.inject({ method: 'POST', url: '/users', payload, headers: { 'content-type': 'application/json' } })
  assert.equal((await post(nested(1000))).statusCode, 201)
  assertJsonError(await post(nested(1001)), 400, 'Body is nested deeper than 1000 arrays and objects')
  assertJsonError(await post(nested(200_000)), 400, 'Body is nested deeper than 1000 arrays and objects')
  const brackets = `{"name":"Ada","email":"ada@example.com","extra":"${'['.repeat(5000)}"}`
  assert.equal((await post(brackets)).statusCode, 201, 'brackets inside a string do not count')
  assert.equal((await app.inject('/users')).headers['x-total-count'], '2')
})

test('a JSON body with a __proto__ key, or constructor.prototype, is refused as not allowed and pollutes nothing', async (t) => {
  const app = await testApp(t)
  const forbidden = 'Body has a "__proto__" key, or a "constructor" key holding "prototype", which is not allowed'
  for (const [url, extra] of [['/users', '"__proto__":{"polluted":true}'], ['/users/507f1f77bcf86cd799439011', '"constructor":{"prototype":{"polluted":true}}']]) {
    const payload = `{"name":"Ada","email":"ada@example.com",${extra}}`
    const response = await app.inject({ method: 'POST', url, payload, headers: { 'content-type': 'application/json' } })
    assertJsonError(response, 400, forbidden)
  }
  assert.equal(({} as Record<string, unknown>).polluted, undefined)
  assert.equal((await app.inject('/users')).json().length, 0, 'nothing was stored')
})

test('an application error answers its own status and message, 400 by default', async (t) => {
  const app = await testApp(t)
  app.get('/teapot', async () => { throw new AppError('I am a teapot', 418) })
  app.get('/refused', async () => { throw new AppError('Not today') })
  assertJsonError(await app.inject('/teapot'), 418, 'I am a teapot')
  assertJsonError(await app.inject('/refused'), 400, 'Not today')
})

test('an application error, an answer to the client, carries no stack trace; errors made after it still do', () => {
  const answer = new AppError('Not today', 409)
  assert.equal(answer.message, 'Not today')
  assert.doesNotMatch(String(answer.stack), /\n\s+at /)
  assert.match(String(new Error('a fault').stack), /a fault\n\s+at /)
})

test('an unexpected error is 500 Internal Server Error, logged with its stack and request id, never sent', async (t) => {
  const logs = captureLogs()
  const app = await testApp(t, { LOG_LEVEL: 'info' }, logs.stream)
  app.get('/boom', async () => { throw new Error('database password is hunter2') })

  const response = await app.inject({ url: '/boom', headers: { 'x-request-id': 'trace-me-42' } })
  assertJsonError(response, 500, 'Internal Server Error')
  assert.doesNotMatch(response.body, /hunter2/)

  const logged = logs.lines.find((line) => line.msg === 'unhandled error')
  assert.ok(logged, 'the error is logged')
  assert.equal(logged.level, 50)
  assert.equal(logged.reqId, 'trace-me-42')
  assert.match(logged.err.stack, /database password is hunter2\n\s+at /)
})

test('a URL that cannot be decoded is a JSON 400 with a request id, not a 500', async (t) => {
  const app = await testApp(t)
  for (const url of ['/%', '/users/%', '/users/%E0%A4%A']) {
    const response = await app.inject(url)
    assertJsonError(response, 400)
    assert.deepEqual(Object.keys(response.json()), ['error'], url)
    assert.ok(response.headers['x-request-id'], url)
  }
})

test('a request that fails its schema hears every rule it fails in details, the first also as error, bounded in number', async (t) => {
  const app = await testApp(t)
  const body = await postJson(app, '/users/507f1f77bcf86cd799439011', { email: 'not-an-email', age: -1, role: 'admin' })
  assertJsonError(body, 400)
  const { error, details } = body.json()
  assert.deepEqual(new Set(details), new Set([
    { in: 'body', path: '', message: "must have required property 'name'" },
    { in: 'body', path: '', message: 'must NOT have additional property "role"' },
    { in: 'body', path: '/email', message: 'must match format "email"' },
    { in: 'body', path: '/age', message: 'must be >= 0' }
  ]))
  assert.equal(error, `body${details[0].path} ${details[0].message}`, 'error is the first of the details')

  const query = await app.inject('/users?limit=0&offset=-1')
  assert.deepEqual(query.json().details, [
    { in: 'query', path: '/limit', message: 'must be >= 1' },
    { in: 'query', path: '/offset', message: 'must be >= 0' }
  ])
  const params = await postJson(app, '/users/not-hex', { name: 'Ada', email: 'ada@example.com' })
  assert.deepEqual(params.json().details, [{ in: 'params', path: '/id', message: 'must match pattern "^[0-9a-fA-F]{24}$"' }])
  const header = await app.inject({ method: 'POST', url: '/users', payload: { name: 'Ada', email: 'ada@example.com' }, headers: { 'idempotency-key': 'x'.repeat(256) } })
  assert.deepEqual(header.json(), {
    error: 'headers/idempotency-key must NOT have more than 255 characters',
    details: [{ in: 'header', path: '/idempotency-key', message: 'must NOT have more than 255 characters' }]
  })
  // Checked in Fastify's order, path, body, query, headers: only the first part that fails is listed.
  const bodyAndQuery = await app.inject({ method: 'POST', url: '/users/507f1f77bcf86cd799439011?limit=0', payload: { name: 'Ada' } })
  assert.deepEqual(bodyAndQuery.json().details, [{ in: 'body', path: '', message: "must have required property 'email'" }])

  const many = Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`extra${i}`, i]))
  const flood = await postJson(app, '/users/507f1f77bcf86cd799439011', { name: 'Ada', email: 'ada@example.com', ...many })
  assert.equal(flood.json().details.length, 20)

  const other = await app.inject({ method: 'POST', url: '/users', payload: '{', headers: { 'content-type': 'application/json' } })
  assert.deepEqual(Object.keys(other.json()), ['error'], 'errors other than a schema\'s have no details')
})
