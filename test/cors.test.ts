import assert from 'node:assert/strict'
import { test } from 'node:test'
import { listeningApp, rawRequest } from './helpers.js'

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

test('CORS lets browsers read the headers the API documents: Location, X-Total-Count, Link, ETag, X-Request-Id, Retry-After and the rate limits', async (t) => {
  const { port } = await listeningApp(t)
  const response = await rawRequest(port, { path: '/users', headers: { origin } })
  const exposed = String(response.headers['access-control-expose-headers'])
  for (const header of ['Location', 'X-Total-Count', 'Link', 'ETag', 'X-Request-Id', 'WWW-Authenticate', 'Retry-After', 'RateLimit-Remaining']) {
    assert.match(exposed, new RegExp(`\\b${header}\\b`))
  }
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
