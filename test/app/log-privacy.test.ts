/** Nothing of a person and no credential reaches a log line, whatever the request carries. */
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { once } from 'node:events'
import http from 'node:http'
import type net from 'node:net'
import { test } from 'node:test'
import { createSigner } from 'fast-jwt'
import { loggedUrl } from '../../src/http/request/logging.js'
import { captureLogs, testApp, testConfig, waitFor } from '../helpers.js'

const webhookSecret = `whsec_${randomBytes(32).toString('base64')}`

test('access lines mask every query value that could be personal or a credential, and keep those that say how a page was asked for', () => {
  assert.equal(loggedUrl('/users?email=ada%40example.com&limit=5'), '/users?email=***&limit=5')
  assert.equal(loggedUrl('/users?name=Ada&name_prefix=Ad&sort=-name&fields=id,email&count=exact'), '/users?name=***&name_prefix=***&sort=-name&fields=id,email&count=exact')
  assert.equal(loggedUrl('/users?after=12&offset=3'), '/users?after=12&offset=3')
  assert.equal(loggedUrl('/users?after=WyJuYW1lIiwiQWRhIiwxLCIiXQ&sort=name'), '/users?after=***&sort=name', 'a cursor holds the last sort key')
  assert.equal(loggedUrl('/events?ticket=abc&after=3'), '/events?ticket=***&after=3')
  assert.equal(loggedUrl('/users?%65mail=ada%40example.com&%ZZ=x&flag'), '/users?%65mail=***&%ZZ=***&flag', 'a name is compared decoded')
  assert.equal(loggedUrl('http://alice:hunter2@example.com/users?email=a'), 'http://example.com/users?email=***')
  assert.equal(loggedUrl('/users/1'), '/users/1')
})

test('a WEBHOOK_URLS entry with user:password@ is sent as Basic authentication, and no error names its password', () => {
  const config = testConfig({ WEBHOOK_URLS: 'https://hooks:p%40ss-word@example.com/in?x=1,https://example.org/plain', WEBHOOK_SECRET: webhookSecret })
  assert.deepEqual(config.events.webhooks?.urls, ['https://example.com/in?x=1', 'https://example.org/plain'])
  assert.deepEqual(config.events.webhooks?.authorization, { 'https://example.com/in?x=1': `Basic ${Buffer.from('hooks:p@ss-word').toString('base64')}` })
  assert.throws(() => testConfig({ WEBHOOK_URLS: 'ftp://hooks:hunter2@example.com/in', WEBHOOK_SECRET: webhookSecret }), (error: Error) => {
    assert.match(error.message, /WEBHOOK_URLS must be http or https URLs/)
    assert.ok(!error.message.includes('hunter2'), error.message)
    return true
  })
})

test('a run of reads, refusals, writes, erasure and webhook retries logs no address, name, ticket, token or password it used', async (t) => {
  const password = `pw-${randomBytes(8).toString('hex')}`
  const authorizations: Array<string | undefined> = []
  const endpoint = http.createServer((request, response) => {
    authorizations.push(request.headers.authorization)
    request.resume()
    // The first try is refused, so that a retry is logged.
    request.on('end', () => response.writeHead(authorizations.length === 1 ? 503 : 204).end())
  })
  endpoint.listen(0, '127.0.0.1')
  await once(endpoint, 'listening')
  t.after(() => { endpoint.closeAllConnections(); endpoint.close() })
  const hook = `http://hooks:${password}@127.0.0.1:${(endpoint.address() as net.AddressInfo).port}/in`

  const jwtSecret = 'a-log-privacy-secret-of-at-least-32-bytes'
  const token = createSigner({ key: jwtSecret, expiresIn: 60_000 })({ sub: 'alice' })
  const logs = captureLogs()
  const app = await testApp(t, {
    AUTH: 'writes', JWT_SECRET: jwtSecret, LOG_LEVEL: 'trace', WEBHOOK_URLS: hook, WEBHOOK_SECRET: webhookSecret, WEBHOOK_RETRY_BASE_MS: '10'
  }, logs.stream)
  await app.ready()
  const bearer = { authorization: `Bearer ${token}` }

  const created = await app.inject({ method: 'POST', url: '/users', payload: { name: 'Zelda Quux', email: 'zelda.quux@example.com' }, headers: bearer })
  assert.equal(created.statusCode, 201)
  const asked = [
    { url: '/users?email=zelda.quux%40example.com' },
    { url: '/users?email=zelda.quux@example.com&fields=id,email', headers: bearer },
    { url: '/users?name=Zelda%20Quux&limit=1' },
    { url: '/users?name_prefix=Zeld' },
    { url: '/users?email=zelda.quux-not-an-address' },
    { url: '/custom?name=Zelda&age=thirty' },
    { url: '/events?ticket=ticket-zelda-123', payloadAsStream: true }
  ]
  for (const request of asked) {
    const response = await app.inject(request)
    if (request.payloadAsStream === true) response.stream().destroy()
  }
  assert.equal((await app.inject({ method: 'DELETE', url: '/users/1', headers: bearer })).statusCode, 204)
  await waitFor(() => authorizations.length >= 3, 5000)
  assert.deepEqual(new Set(authorizations), new Set([`Basic ${Buffer.from(`hooks:${password}`).toString('base64')}`]), 'every try carries the credentials')
  await app.close()

  assert.ok(logs.lines.some((line) => line.msg === 'webhook event not taken: trying again later'), 'a retry was logged')
  // The stream of /events ends as the app closes, and its line may come a moment after.
  const accessLines = () => logs.lines.filter((line) => line.url !== undefined).length
  await waitFor(() => accessLines() >= asked.length + 2, 2000)
  assert.ok(accessLines() >= asked.length + 2, 'every request has its access line')
  const text = logs.lines.map((line) => JSON.stringify(line)).join('\n')
  for (const used of ['zelda', 'Zelda', 'Quux', 'Zeld', password, 'ticket-zelda', token, jwtSecret]) {
    assert.ok(!text.includes(used), `${used.slice(0, 16)} appears in the log`)
  }
})
