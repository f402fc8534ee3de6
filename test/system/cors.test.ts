import assert from 'node:assert/strict'
import { test } from 'node:test'
import { listeningApp, rawRequest } from '../helpers.js'

const origin = 'https://app.example.com'

test('CORS reflects any requesting origin, with Vary: Origin, on answers and errors alike', async (t) => {
  const { port } = await listeningApp(t)
  for (const path of ['/', '/users', '/no/such/route', '/custom?age=abc']) {
    const response = await rawRequest(port, { path, headers: { origin } })
    assert.equal(response.headers['access-control-allow-origin'], origin, path)
    assert.match(String(response.headers.vary), /Origin/, path)
  }
  const other = await rawRequest(port, { path: '/', headers: { origin: 'http://localhost:8080' } })
  assert.equal(other.headers['access-control-allow-origin'], 'http://localhost:8080')
})

/** Response headers a browser lets any script read without being told (the Fetch standard's safelist). */
const SAFELISTED = new Set(['cache-control', 'content-language', 'content-length', 'content-type', 'expires', 'last-modified', 'pragma'])

test('CORS lets browsers read every header the API document declares on an answer (Location, Idempotent-Replayed, ETag, the rate limits…)', async (t) => {
  // Tokens and rate limits on, so that the document declares their headers too.
  const { port } = await listeningApp(t, { AUTH: 'writes', JWT_SECRET: 'a-test-secret-that-is-long-enough-for-hs256', RATE_LIMIT_MAX: '100' })
  const document = JSON.parse((await rawRequest(port, { path: '/documentation/json' })).body)
  const declared = new Set<string>()
  for (const operations of Object.values<Record<string, any>>(document.paths)) {
    for (const operation of Object.values<any>(operations)) {
      for (const answer of Object.values<any>(operation.responses)) {
        for (const header of Object.keys(answer.headers ?? {})) declared.add(header.toLowerCase())
      }
    }
  }
  assert.ok(declared.has('idempotent-replayed') && declared.has('ratelimit-remaining'), [...declared].join(', '))

  const response = await rawRequest(port, { path: '/users', headers: { origin } })
  const exposed = new Set(String(response.headers['access-control-expose-headers']).split(', ').map((header) => header.toLowerCase()))
  // Accept-Encoding is a request header by name: a 415's message says the same for scripts.
  assert.deepEqual([...declared].filter((header) => !SAFELISTED.has(header) && !exposed.has(header)), ['accept-encoding'], 'declared, yet hidden from scripts')
  assert.ok(!exposed.has('accept-encoding'), 'only response headers are exposed')
})

test('a preflight answers 204 allowing the requested method and headers', async (t) => {
  const { port } = await listeningApp(t)
  const response = await rawRequest(port, {
    method: 'OPTIONS',
    path: '/users',
    headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'Content-Type, Authorization' }
  })
  assert.equal(response.statusCode, 204)
  assert.equal(response.body, '')
  assert.equal(response.headers['access-control-allow-origin'], origin)
  assert.match(String(response.headers['access-control-allow-methods']), /POST/)
  assert.equal(response.headers['access-control-allow-headers'], 'Content-Type, Authorization')
})

test('a preflight for PATCH or DELETE with If-Match allows both, so that a page can change and erase users', async (t) => {
  const { port } = await listeningApp(t)
  for (const method of ['PATCH', 'DELETE']) {
    const response = await rawRequest(port, {
      method: 'OPTIONS',
      path: '/users/1',
      headers: { origin, 'access-control-request-method': method, 'access-control-request-headers': 'If-Match, Content-Type' }
    })
    assert.equal(response.statusCode, 204)
    assert.ok(String(response.headers['access-control-allow-methods']).split(',').map((one) => one.trim()).includes(method), String(response.headers['access-control-allow-methods']))
    assert.equal(response.headers['access-control-allow-headers'], 'If-Match, Content-Type')
  }
})

test('an OPTIONS request that is not a preflight gets no plain-text error', async (t) => {
  const { port } = await listeningApp(t)
  const response = await rawRequest(port, { method: 'OPTIONS', path: '/users' })
  assert.equal(response.statusCode, 204)
  assert.equal(response.body, '')
})

test('CORS_ORIGIN restricts the allowed origins', async (t) => {
  const { port } = await listeningApp(t, { CORS_ORIGIN: 'https://a.example.com, https://b.example.com' })
  const allowed = await rawRequest(port, { path: '/', headers: { origin: 'https://b.example.com' } })
  assert.equal(allowed.headers['access-control-allow-origin'], 'https://b.example.com')
  const refused = await rawRequest(port, { path: '/', headers: { origin: 'https://evil.example.com' } })
  assert.equal(refused.headers['access-control-allow-origin'], undefined)
  assert.equal(refused.statusCode, 200, 'the server still answers; the browser withholds it')
})
