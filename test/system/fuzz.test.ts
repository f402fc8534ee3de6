import assert from 'node:assert/strict'
import http from 'node:http'
import { test } from 'node:test'
import fc from 'fast-check'
import type { InjectOptions } from 'fastify'
import { rawConnection, testApp } from '../helpers.js'
import { startService } from '../process.js'

const printable = fc.string({ unit: fc.integer({ min: 0x20, max: 0x7e }).map((code) => String.fromCharCode(code)), maxLength: 40 })
const anyText = fc.oneof(printable, fc.string({ unit: 'grapheme', maxLength: 40 }), fc.string({ unit: 'binary', maxLength: 20 }), fc.constant('x'.repeat(5000)))
const hex24 = fc.string({ unit: fc.constantFrom(...'0123456789abcdefABCDEF'), minLength: 24, maxLength: 24 })

const pathValue = fc.oneof(
  hex24, printable, anyText, fc.constantFrom('1', '0', '-1', '01', '1e3', '99999999999999999999', '%', '%00', '%2e%2e', '..%2f..%2fetc%2fpasswd', '__proto__', 'constructor')
).map((value) => /%/.test(value) ? value : encodeURIComponent(value))

const path = fc.oneof(
  fc.constantFrom('/', '/custom', '/users', '/health', '/ready', '/index.html', '/documentation/json', '/nowhere', '/users/'),
  pathValue.map((id) => `/users/${id}`),
  fc.webPath().map((generated) => generated.startsWith('/') ? generated : `/${generated}`)
)

const query = fc.dictionary(fc.constantFrom('name', 'age', 'limit', 'offset', '__proto__', 'constructor', 'x'), fc.oneof(
  fc.integer().map(String), fc.constantFrom('abc', '1e400', '-1', '3.5', '', '[]', '{"a":1}'), anyText
), { maxKeys: 4 }).map((entries) => {
  const pairs = Object.entries(entries).map(([key, value]) => `${key}=${encodeURIComponent(value)}`)
  return pairs.length === 0 ? '' : `?${pairs.join('&')}`
})

const headers = fc.record({
  'content-type': fc.constantFrom('application/json', 'application/json; charset=utf-8', 'text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data', 'application/xml', ''),
  'x-request-id': printable,
  authorization: fc.oneof(printable, printable.map((token) => `Bearer ${token}`)),
  origin: fc.constantFrom('https://a.example.com', 'null', 'http://localhost:3000'),
  accept: fc.constantFrom('application/json', '*/*', 'text/html'),
  'if-none-match': fc.oneof(fc.constantFrom('*', 'W/"x"', '"a", "b"'), printable),
  'content-encoding': fc.constantFrom('gzip', 'identity', 'br, gzip', '')
}, { requiredKeys: [] })

const deeplyNested = fc.integer({ min: 50, max: 2000 }).map((depth) => '['.repeat(depth) + ']'.repeat(depth))
const user = fc.record({ name: fc.anything(), email: fc.oneof(fc.anything(), fc.emailAddress()), age: fc.anything() }, { requiredKeys: [] })

const body = fc.oneof(
  fc.constant(undefined),
  fc.jsonValue({ maxDepth: 6 }).map((value) => JSON.stringify(value)),
  user.map((value) => JSON.stringify(value)),
  fc.constantFrom(
    '{"name":"Ada","email":"ada@example.com","__proto__":{"polluted":true}}',
    '{"name":"Ada","email":"ada@example.com","constructor":{"prototype":{"polluted":true}}}',
    '{"name":"Ada","email":"ada@example.com","age":1e400}',
    '{"name":"Ada","email":"ada@example.com","age":123456789012345678901234567890}',
    '{"name": "Ada", "email": "ada@example.com"', '', 'null', '"just a string"', '{"name":"\\ud800","email":"a@b.co"}'
  ),
  deeplyNested,
  fc.uint8Array({ maxLength: 64 }).map((bytes) => Buffer.concat([Buffer.from('{"name":"'), Buffer.from(bytes), Buffer.from('","email":"a@b.co"}')]))
)

const anyRequest = fc.record({
  method: fc.constantFrom('GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS'),
  path,
  query,
  headers,
  body
})

/** Half the runs: a JSON body to a route that reads one, where most of the parsing happens. */
const jsonPost = fc.record({
  method: fc.constant('POST'),
  path: fc.oneof(fc.constant('/users'), hex24.map((id) => `/users/${id}`)),
  query,
  headers: headers.map((chosen) => ({ ...chosen, 'content-type': 'application/json' })),
  body: fc.oneof(body, user.map((value) => JSON.stringify({ name: 'Ada', email: 'ada@example.com', ...value })))
})

const request = fc.oneof(anyRequest, jsonPost)

test('random requests against every route never get a 5xx, every error is JSON, nothing is polluted', async (t) => {
  const app = await testApp(t, { RATE_LIMIT_MAX: '100000' })
  const prototypeBefore = Object.getOwnPropertyNames(Object.prototype).sort()

  await fc.assert(fc.asyncProperty(request, async ({ method, path, query, headers, body }) => {
    const options: InjectOptions = { method, url: path + query, headers: Object.fromEntries(Object.entries(headers).filter(([, value]) => value !== '')) }
    if (body !== undefined) options.payload = body
    const response = await app.inject(options)
    assert.ok(response.statusCode < 500, `${method} ${path}${query} answered ${response.statusCode}: ${response.body.slice(0, 200)}`)
    if (response.statusCode >= 400 && method !== 'HEAD') {
      assert.match(String(response.headers['content-type']), /^application\/json/)
      assert.equal(typeof response.json().error, 'string')
    }
  }), { seed: 20261122, numRuns: 3000 })

  assert.deepEqual(Object.getOwnPropertyNames(Object.prototype).sort(), prototypeBefore)
  assert.equal(({} as Record<string, unknown>).polluted, undefined)
  assert.equal((await app.inject('/health')).statusCode, 200, 'the service still answers')
})

/**
 * What reaches a real socket before Fastify does: Node's parser, its answers of its own (a
 * CONNECT, an unmet Expect, a missing Host), upgrades and framing.
 */
const rawRequest = fc.record({
  method: fc.constantFrom(...http.METHODS, 'FOO', 'get'),
  target: fc.oneof(path, fc.constantFrom('*', 'http://example.com/users', 'example.com:443', '//users', '/users/../health')),
  version: fc.constantFrom('1.1', '1.0'),
  host: fc.boolean(),
  headers: fc.subarray([
    'Expect: 100-continue', 'Expect: something-else', 'Upgrade: websocket\r\nConnection: Upgrade',
    'Upgrade: h2c\r\nConnection: Upgrade, HTTP2-Settings\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA',
    'Transfer-Encoding: chunked', 'Transfer-Encoding: gzip, chunked', 'Content-Length: 2', 'Content-Length: 1, 2',
    'Content-Type: application/json', 'Content-Encoding: gzip', 'Origin: http://a.example.com',
    'Access-Control-Request-Method: POST', 'Host: second.example.com', `X-Request-Id: ${'a'.repeat(200)}`
  ]),
  body: fc.constantFrom('', '{}', '0\r\n\r\n', '2\r\n{}\r\n0\r\n\r\n', '{"name":"Ada","email":"ada@example.com"}')
})

/**
 * Sends `request` on a connection of its own and resolves with all the bytes that came back
 * once the service closes it (every request asks it to). The connection is not half-closed
 * after the request: Node's server takes a client's FIN for its leaving, and drops what it
 * had yet to answer (docs/limits.md).
 */
async function exchange (port: number, request: string): Promise<string> {
  const { socket, closed } = await rawConnection(port)
  socket.write(request)
  const gaveUp = setTimeout(() => socket.destroy(), 10_000)
  const received = await closed
  clearTimeout(gaveUp)
  return received
}

test('random requests over a real socket, malformed or not, each get an answer: never a 5xx, every error JSON', async (t) => {
  // Requests whose body never arrives in full wait for the request timeout's 408, so they go
  // 50 at a time.
  const service = await startService(t, { DATABASE_URL: 'sqlite::memory:', HEADERS_TIMEOUT_MS: '1000', REQUEST_TIMEOUT_MS: '1000' })
  const requests = fc.sample(rawRequest, { seed: 20261125, numRuns: 600 }).map(({ method, target, version, host, headers, body }) => ({
    method,
    text: `${[`${method} ${target} HTTP/${version}`, ...(host ? ['Host: localhost'] : []), ...headers, 'Connection: close'].join('\r\n')}\r\n\r\n${body}`
  }))
  const problems: string[] = []
  for (let first = 0; first < requests.length; first += 50) {
    await Promise.all(requests.slice(first, first + 50).map(async ({ method, text }) => {
      const received = await exchange(service.port, text)
      const statuses = [...received.matchAll(/^HTTP\/1\.1 (\d{3}) /gm)].map((match) => Number(match[1]))
      const status = statuses.filter((code) => code !== 100).at(-1)
      const problem = status === undefined
        ? 'no answer'
        : status >= 500
          ? `${status}`
          : status >= 400 && method !== 'HEAD' && !/\r\ncontent-type: application\/json; charset=utf-8\r\n[\s\S]*\r\n\r\n\{"error":"[^"]+"/i.test(received)
            ? `${status} without a JSON error`
            : undefined
      if (problem !== undefined) problems.push(`${problem}: ${JSON.stringify(text)} => ${JSON.stringify(received.slice(0, 300))}`)
    }))
  }
  assert.deepEqual(problems, [])
  assert.equal((await exchange(service.port, 'GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n')).split('\r\n')[0], 'HTTP/1.1 200 OK')
})
