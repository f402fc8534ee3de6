import assert from 'node:assert/strict'
import { Readable } from 'node:stream'
import { test } from 'node:test'
import { brotliCompressSync, gzipSync } from 'node:zlib'
import { Ajv2020 } from 'ajv/dist/2020.js'
import addFormats from 'ajv-formats'
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

test('an application error answers its code\'s status, message and headers from the catalogue; a client error of a plugin its own status and message', async (t) => {
  const app = await testApp(t)
  app.get('/stale', async () => { throw new AppError('precondition_failed') })
  app.get('/busy', async () => { throw new AppError('too_many_streams_for_client', { max: 3 }) })
  app.get('/teapot', async () => { throw Object.assign(new Error('I am a teapot'), { statusCode: 418 }) })
  assert.deepEqual((await app.inject('/stale')).json(), { error: 'The user has changed since the ETag in If-Match: read it again, then retry', code: 'precondition_failed' })
  const busy = await app.inject('/busy')
  assertJsonError(busy, 429, 'Too many event streams open for this client: at most 3 (EVENTS_MAX_READERS_PER_CLIENT). Close one, or retry later')
  assert.equal(busy.headers['retry-after'], '5')
  assertJsonError(await app.inject('/teapot'), 418, 'I am a teapot')
  assert.equal((await app.inject('/teapot')).json().code, 'bad_request')
})

test('an application error, an answer to the client, carries no stack trace; errors made after it still do', () => {
  const answer = new AppError('idempotency_key_in_use')
  assert.equal(answer.message, 'A request with this Idempotency-Key is still being answered: retry shortly')
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
    assert.deepEqual(Object.keys(response.json()), ['error', 'code'], url)
    assert.equal(response.json().code, 'invalid_url', url)
    assert.ok(response.headers['x-request-id'], url)
  }
})

test('a request that fails its schema hears every rule it fails in details, with its keyword and parameters, the first also as error, bounded in number', async (t) => {
  const app = await testApp(t)
  const body = await postJson(app, '/users/507f1f77bcf86cd799439011', { email: 'not-an-email', age: -1, role: 'admin' })
  assertJsonError(body, 400)
  const { error, code, details } = body.json()
  assert.equal(code, 'validation_failed')
  assert.deepEqual(new Set(details), new Set([
    { in: 'body', path: '', message: "must have required property 'name'", keyword: 'required', params: { missingProperty: 'name' } },
    { in: 'body', path: '', message: 'must NOT have additional property "role"', keyword: 'additionalProperties', params: { additionalProperty: 'role' } },
    { in: 'body', path: '/email', message: 'must match format "email"', keyword: 'format', params: { format: 'email' } },
    { in: 'body', path: '/age', message: 'must be >= 0', keyword: 'minimum', params: { comparison: '>=', limit: 0 } }
  ]))
  assert.equal(error, `body${details[0].path} ${details[0].message}`, 'error is the first of the details')

  const query = await app.inject('/users?limit=0&offset=-1')
  assert.deepEqual(query.json().details.map(({ path, message }: { path: string, message: string }) => ({ path, message })), [
    { path: '/limit', message: 'must be >= 1' },
    { path: '/offset', message: 'must be >= 0' }
  ])
  const params = await postJson(app, '/users/not-hex', { name: 'Ada', email: 'ada@example.com' })
  assert.deepEqual(params.json().details, [{ in: 'params', path: '/id', message: 'must match pattern "^[0-9a-fA-F]{24}$"', keyword: 'pattern', params: { pattern: '^[0-9a-fA-F]{24}$' } }])
  const header = await app.inject({ method: 'POST', url: '/users', payload: { name: 'Ada', email: 'ada@example.com' }, headers: { 'idempotency-key': 'x'.repeat(256) } })
  assert.deepEqual(header.json(), {
    error: 'headers/idempotency-key must NOT have more than 255 characters',
    code: 'validation_failed',
    details: [{ in: 'header', path: '/idempotency-key', message: 'must NOT have more than 255 characters', keyword: 'maxLength', params: { limit: 255 } }]
  })
  // Checked in Fastify's order, path, body, query, headers: only the first part that fails is listed.
  const bodyAndQuery = await app.inject({ method: 'POST', url: '/users/507f1f77bcf86cd799439011?limit=0', payload: { name: 'Ada' } })
  assert.deepEqual(bodyAndQuery.json().details.map(({ in: part, path }: { in: string, path: string }) => `${part} ${path}`), ['body '])

  const many = Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`extra${i}`, i]))
  const flood = await postJson(app, '/users/507f1f77bcf86cd799439011', { name: 'Ada', email: 'ada@example.com', ...many })
  assert.equal(flood.json().details.length, 20)

  const other = await app.inject({ method: 'POST', url: '/users', payload: '{', headers: { 'content-type': 'application/json' } })
  assert.deepEqual(Object.keys(other.json()), ['error', 'code'], 'errors other than a schema\'s have no details')
})

test('a client whose Accept prefers application/problem+json gets RFC 9457 problem details, as the document declares them; a tie, */* or none keeps JSON', async (t) => {
  const app = await testApp(t)
  const document = (await app.inject('/documentation/json')).json()
  const ajv = new Ajv2020({ strict: false })
  addFormats.default(ajv)
  ajv.addSchema(document, 'document')
  const problemOf = (path: string, method: string, status: number) =>
    ajv.compile({ $ref: `document#/paths/${path.replaceAll('/', '~1')}/${method}/responses/${status}/content/application~1problem+json/schema` })

  const missing = await app.inject({ url: '/users/42', headers: { accept: 'application/problem+json' } })
  assert.equal(missing.statusCode, 404)
  assert.match(String(missing.headers['content-type']), /^application\/problem\+json/)
  const body = missing.json()
  assert.deepEqual(body, {
    type: '/problems/user_not_found',
    title: 'User not found',
    status: 404,
    detail: 'User not found',
    instance: '/users/42',
    request_id: missing.headers['x-request-id'],
    error: 'User not found',
    code: 'user_not_found'
  })
  const validate = problemOf('/users/{id}', 'get', 404)
  assert.ok(validate(body), JSON.stringify(validate.errors))

  const invalid = await app.inject({
    method: 'POST',
    url: '/users/507f1f77bcf86cd799439011?limit=1',
    payload: { email: 'nope' },
    headers: { accept: 'application/json;q=0.5, application/problem+json' }
  })
  assert.equal(invalid.statusCode, 400)
  const problem = invalid.json()
  assert.equal(problem.title, 'The request fails its schema', 'a title the same for every answer with this code')
  assert.equal(problem.detail, problem.error)
  assert.equal(problem.instance, '/users/507f1f77bcf86cd799439011', 'the path, without its query')
  assert.ok(problem.details.length > 0)
  assert.ok(problemOf('/users/{id}', 'post', 400)(invalid.json()))
  const described = (await app.inject(problem.type)).json()
  assert.deepEqual(described, { code: 'validation_failed', status: 400, title: 'The request fails its schema', retryable: false }, 'the type leads to the code\'s description')

  for (const accept of [undefined, '*/*', 'application/json', 'application/problem+json, application/json', 'application/*;q=0.9, application/problem+json;q=0.9', 'text/html']) {
    const answer = await app.inject({ url: '/users/42', headers: accept === undefined ? {} : { accept } })
    assert.match(String(answer.headers['content-type']), /^application\/json/, String(accept))
    assert.deepEqual(answer.json(), { error: 'User not found', code: 'user_not_found' }, String(accept))
  }
  for (const accept of ['application/problem+json', 'application/problem+json;q=0.9, */*;q=0.8', 'application/json;q=0, application/problem+json;q=0.1']) {
    const answer = await app.inject({ url: '/no/such/route', headers: { accept } })
    assert.match(String(answer.headers['content-type']), /^application\/problem\+json/, accept)
  }
})

test('a query value or name whose escapes do not decode to UTF-8 is 400 naming the parameter, on any route; a literal % sent as %25 is text', async (t) => {
  const app = await testApp(t)
  for (const [url, parameter] of [['/users?name=%FF', 'name'], ['/users?name_prefix=%ED%A0%80', 'name_prefix'], ['/users?limit=5&email=a%', 'email'], ['/health?%FF=1', '%FF']]) {
    const response = await app.inject(url!)
    assertJsonError(response, 400, `querystring/${parameter} must be percent-encoded UTF-8`)
    assert.deepEqual(response.json().details, [{ in: 'query', path: `/${parameter}`, message: 'must be percent-encoded UTF-8', keyword: 'encoding', params: { encoding: 'UTF-8' } }], url)
  }
  await postJson(app, '/users', { name: '%FF', email: 'pct@example.com' })
  assert.deepEqual((await app.inject('/users?name=%25FF')).json().map((user: { name: string }) => user.name), ['%FF'])
  assert.equal((await app.inject('/users?name=%C3%89mile')).statusCode, 200)
})
