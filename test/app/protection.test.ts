import assert from 'node:assert/strict'
import { PassThrough } from 'node:stream'
import { test } from 'node:test'
import { createSigner } from 'fast-jwt'
import { API_SECURITY_HEADERS } from '../../src/http/request/security-headers.js'
import { PAGE_ONLY_HEADERS, captureLogs, getUntil, postJson, testApp } from '../helpers.js'

test('rate limiting is off by default', async (t) => {
  const app = await testApp(t)
  for (let i = 0; i < 50; i++) assert.equal((await app.inject('/')).statusCode, 200)
  assert.equal((await app.inject('/')).headers['ratelimit-limit'], undefined)
})

test('RATE_LIMIT_MAX limits each client address: 429 with Retry-After and RateLimit headers', async (t) => {
  const app = await testApp(t, { RATE_LIMIT_MAX: '3', RATE_LIMIT_WINDOW: '1m' })
  const from = (remoteAddress: string, url = '/') => app.inject({ url, remoteAddress })
  for (let i = 1; i <= 3; i++) {
    const allowed = await from('10.0.0.1')
    assert.equal(allowed.statusCode, 200)
    assert.equal(allowed.headers['ratelimit-limit'], '3')
    assert.equal(allowed.headers['ratelimit-remaining'], String(3 - i))
  }
  const limited = await from('10.0.0.1', '/users')
  assert.equal(limited.statusCode, 429)
  assert.deepEqual(Object.keys(limited.json()), ['error', 'code'])
  assert.equal(limited.json().code, 'rate_limited')
  assert.match(limited.json().error, /^Rate limit exceeded: retry in/)
  assert.ok(Number(limited.headers['retry-after']) > 0 && Number(limited.headers['retry-after']) <= 60)
  assert.equal(limited.headers['ratelimit-remaining'], '0')
  assert.ok(limited.headers['ratelimit-reset'])

  assert.equal((await from('10.0.0.2')).statusCode, 200, 'another client has its own budget')
  for (const url of ['/health', '/ready', '/documentation/json', '/index.html']) {
    assert.equal((await from('10.0.0.1', url)).statusCode, 200, `${url} is exempt`)
  }
})

test('the rate limit counts callers without a token too: with AUTH=all, 401s until the budget is spent, then 429', async (t) => {
  const app = await testApp(t, { AUTH: 'all', JWT_SECRET: 'a-test-secret-that-is-long-enough-for-hs256', RATE_LIMIT_MAX: '2' })
  const statuses = []
  for (let i = 0; i < 6; i++) statuses.push((await app.inject('/users')).statusCode)
  assert.deepEqual(statuses, [401, 401, 429, 429, 429, 429])
})

test('an unknown path is answered 404 as it arrives: its body is never read, no token is asked for, no limit counts it', async (t) => {
  const app = await testApp(t, { AUTH: 'all', JWT_SECRET: 'a-test-secret-that-is-long-enough-for-hs256', RATE_LIMIT_MAX: '1' })
  for (let i = 0; i < 3; i++) {
    // A body that never ends: a request that waited for it would never be answered.
    const body = new PassThrough()
    body.write('[[[[')
    const answer = await app.inject({ method: 'POST', url: '/nonexistent', headers: { 'content-type': 'application/json', origin: 'https://app.example' }, payload: body })
    assert.equal(answer.statusCode, 404)
    assert.deepEqual(answer.json(), { error: 'Route not found', code: 'route_not_found' })
    assert.ok(answer.headers['x-request-id'])
    assert.equal(answer.headers['access-control-allow-origin'], 'https://app.example', 'a page can read it')
    body.destroy()
  }
  assert.equal((await app.inject('/users')).statusCode, 401, 'the unknown paths spent none of the budget')
})

test('a rate window is written like 30s, 1m or 1h', async (t) => {
  await assert.rejects(testApp(t, { RATE_LIMIT_MAX: '3', RATE_LIMIT_WINDOW: 'a minute' }),
    /^ConfigError: RATE_LIMIT_WINDOW must be a duration such as 30s, 15m, 1h or 7d \(got "a minute"\)$/)
})

test('under overload API routes shed with 503 and Retry-After, health stays up, and it recovers by itself', async (t) => {
  const app = await testApp(t, { OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: '20' })
  assert.equal((await app.inject('/users')).statusCode, 200)

  // Overload as a burst of CPU-bound work makes it: the loop busy 50 ms between turns, so
  // that every 10 ms sample of the second overload protection looks at is about 50 ms late.
  // Not one long freeze: one that begins a few milliseconds before the second closes can go
  // unrecorded (docs/limits.md, Overload), and then nothing is shed.
  const busy = (ms: number) => { const until = Date.now() + ms; while (Date.now() < until); }
  const underLoad = async <T>(request: () => Promise<T>): Promise<T> => { busy(50); return await request() }
  const until = Date.now() + 5000
  let shed
  do shed = await underLoad(() => app.inject('/users'))
  while (shed.statusCode !== 503 && Date.now() < until)
  assert.equal(shed.statusCode, 503)
  assert.deepEqual(shed.json(), { error: 'Service overloaded: try again shortly', code: 'service_overloaded' })
  assert.equal(shed.headers['retry-after'], '1')
  assert.equal((await underLoad(() => postJson(app, '/users', { name: 'Ada', email: 'ada@example.com' }))).statusCode, 503)
  assert.equal((await underLoad(() => app.inject('/health'))).statusCode, 200, 'liveness is never shed')

  const recovered = await getUntil(app, '/users', 200, 4000, 100)
  assert.equal(recovered.statusCode, 200, 'recovers once the event loop is free again')
})

test('JSON answers carry an API\'s security headers, errors included, and none of those only a page needs', async (t) => {
  const app = await testApp(t)
  const answers = [
    await app.inject('/'),
    await app.inject('/users/999'),
    await app.inject('/no/such/route'),
    await app.inject('/custom?age=x'),
    await postJson(app, `/users/${'a'.repeat(24)}`, { name: 'Ada', email: 'not-an-email' }),
    await app.inject({ method: 'OPTIONS', url: '/users', headers: { origin: 'https://example.com', 'access-control-request-method': 'POST' } }),
    await app.inject('/health')
  ]
  assert.deepEqual(answers.map((answer) => answer.statusCode), [200, 404, 404, 400, 400, 204, 200])
  for (const answer of answers) {
    const where = `${answer.raw.req.method} ${answer.raw.req.url}`
    assert.deepEqual(Object.fromEntries(Object.keys(API_SECURITY_HEADERS).map((name) => [name, answer.headers[name]])), API_SECURITY_HEADERS, where)
    assert.equal(answer.headers['content-security-policy'], "default-src 'none'; frame-ancestors 'none'", where)
    for (const name of [...PAGE_ONLY_HEADERS, 'x-powered-by']) assert.equal(answer.headers[name], undefined, `${where}: ${name}`)
  }
})

test('without TRUST_PROXY, X-Forwarded-For is ignored: a client cannot pose as others to escape the rate limit', async (t) => {
  const logs = captureLogs()
  const app = await testApp(t, { RATE_LIMIT_MAX: '2', LOG_LEVEL: 'info' }, logs.stream)
  const statuses = []
  for (let i = 0; i < 3; i++) {
    statuses.push((await app.inject({ url: '/', remoteAddress: '10.0.0.1', headers: { 'x-forwarded-for': `203.0.113.${i}` } })).statusCode)
  }
  assert.deepEqual(statuses, [200, 200, 429])
  assert.deepEqual(new Set(logs.lines.filter((line) => line.msg === 'request completed').map((line) => line.client)), new Set(['10.0.0.1']))
})

test('behind a trusted proxy (TRUST_PROXY), the forwarded client address is the one logged and rate-limited', async (t) => {
  for (const trust of ['1', '10.0.0.0/8']) {
    const logs = captureLogs()
    const app = await testApp(t, { RATE_LIMIT_MAX: '2', LOG_LEVEL: 'info', TRUST_PROXY: trust }, logs.stream)
    const viaProxy = (client: string) => app.inject({ url: '/', remoteAddress: '10.0.0.1', headers: { 'x-forwarded-for': client } })
    const statuses = []
    for (let i = 0; i < 3; i++) statuses.push((await viaProxy(`203.0.113.${i}`)).statusCode)
    assert.deepEqual(statuses, [200, 200, 200], `TRUST_PROXY=${trust}: each client has its own budget`)
    assert.deepEqual([(await viaProxy('203.0.113.0')).statusCode, (await viaProxy('203.0.113.0')).statusCode], [200, 429], trust)
    const clients = logs.lines.filter((line) => line.msg === 'request completed').map((line) => line.client)
    assert.deepEqual(clients.slice(0, 3), ['203.0.113.0', '203.0.113.1', '203.0.113.2'], trust)
  }
  // A proxy outside the trusted networks is not believed.
  const app = await testApp(t, { RATE_LIMIT_MAX: '1', TRUST_PROXY: '10.0.0.0/8' })
  const fromElsewhere = (client: string) => app.inject({ url: '/', remoteAddress: '192.0.2.7', headers: { 'x-forwarded-for': client } })
  assert.deepEqual([(await fromElsewhere('203.0.113.1')).statusCode, (await fromElsewhere('203.0.113.2')).statusCode], [200, 429])
})

test('an IPv6 client counts by its /64 network: taking another address of its own network takes no fresh budget', async (t) => {
  const app = await testApp(t, { RATE_LIMIT_MAX: '2' })
  const from = async (remoteAddress: string) => (await app.inject({ url: '/', remoteAddress })).statusCode
  assert.deepEqual([await from('2001:db8:1:2::1'), await from('2001:db8:1:2::2'), await from('2001:db8:1:2:ffff::3')], [200, 200, 429])
  assert.equal(await from('2001:db8:1:3::1'), 200, 'another /64 is another client')
  assert.deepEqual([await from('::ffff:192.0.2.1'), await from('192.0.2.1'), await from('192.0.2.1')], [200, 200, 429],
    'an IPv4 client on a dual-stack socket is the same client as over IPv4')
})

test('a production start logs one warning naming what anyone can reach (API, /metrics, /documentation) and what closes it', async (t) => {
  const production = { NODE_ENV: 'production', JWT_SECRET: 'a-test-secret-that-is-long-enough-for-hs256', LOG_LEVEL: 'info' }
  const warnings = async (env: Record<string, string>) => {
    const logs = captureLogs()
    await (await testApp(t, { ...production, ...env }, logs.stream)).ready()
    return logs.lines.filter((line) => line.level === 40).map((line) => line.msg as string)
  }
  const open = await warnings({ METRICS: 'public' })
  assert.equal(open.length, 1)
  assert.match(open[0]!, /^NODE_ENV=production with what anyone can reach: .*AUTH=writes or AUTH=all.*RATE_LIMIT_MAX.*\/metrics is public.*\/documentation/)
  assert.doesNotMatch((await warnings({}))[0]!, /\/metrics/, 'in production /metrics asks for a token by default')
  const closed = await warnings({ AUTH: 'writes', RATE_LIMIT_MAX: '100', METRICS_PORT: '9464' })
  assert.equal(closed.length, 1)
  assert.doesNotMatch(closed[0]!, /AUTH=|RATE_LIMIT_MAX|\/metrics/)
  assert.match(closed[0]!, /\/documentation and its document are public/)
  assert.doesNotMatch((await warnings({ AUTH: 'all' }))[0]!, /\/metrics/, 'under AUTH=all /metrics asks for a token')
  assert.deepEqual(await warnings({ NODE_ENV: 'development' }), [], 'outside production nothing is said')
})

test('in production /metrics on the API port asks for a token whatever AUTH says, unless METRICS=public', async (t) => {
  const secret = 'a-test-secret-that-is-long-enough-for-hs256'
  const token = createSigner({ key: secret, expiresIn: 60_000 })({ sub: 'prometheus' })
  const production = { NODE_ENV: 'production', JWT_SECRET: secret }
  for (const auth of ['off', 'writes', 'all']) {
    const app = await testApp(t, { ...production, AUTH: auth })
    const refused = await app.inject('/metrics')
    assert.equal(refused.statusCode, 401, `AUTH=${auth}`)
    assert.equal(refused.headers['www-authenticate'], 'Bearer realm="api"')
    assert.equal((await app.inject({ url: '/metrics', headers: { authorization: `Bearer ${token}` } })).statusCode, 200, `AUTH=${auth}, with a token`)
    assert.equal((await app.inject('/users')).statusCode, auth === 'all' ? 401 : 200, 'the API follows AUTH as before')
  }
  const document = (await (await testApp(t, production)).inject('/documentation/json')).json()
  assert.deepEqual(document.paths['/metrics'].get.security, [{ bearerAuth: [] }])
  assert.equal((await (await testApp(t, { ...production, METRICS: 'public', AUTH: 'all' })).inject('/metrics')).statusCode, 200, 'METRICS=public')
  assert.equal((await (await testApp(t, { AUTH: 'writes', JWT_SECRET: secret })).inject('/metrics')).statusCode, 200, 'outside production it follows AUTH')
})

test('METRICS_PORT: /metrics is served by an app of its own and the API has none', async (t) => {
  const { buildMetricsApp } = await import('../../src/app.js')
  const app = await testApp(t, { METRICS_PORT: '9464' })
  assert.equal((await app.inject('/metrics')).statusCode, 404)
  await app.inject('/health')
  const scrapes = await buildMetricsApp(app)
  t.after(async () => { await scrapes.close() })
  const scrape = await scrapes.inject('/metrics')
  assert.equal(scrape.statusCode, 200)
  assert.match(scrape.body, /^http_requests_total\{[^}]*route="\/health"[^}]*\} 1$/m)
  assert.ok(!JSON.stringify((await app.inject('/documentation/json')).json().paths).includes('/metrics'), 'the API document has no /metrics')
})

test('every answer says how it may be cached: reads with an ETag and files no-cache, everything else no-store', async (t) => {
  const app = await testApp(t)
  await postJson(app, '/users', { name: 'Ada', email: 'ada@example.com' })
  const cacheControl = async (url: string, init: { method?: 'GET' | 'POST', payload?: object } = {}) =>
    (await app.inject({ url, ...init })).headers['cache-control']
  assert.equal(await cacheControl('/users/1'), 'no-cache')
  assert.equal(await cacheControl('/users'), 'no-cache')
  for (const url of ['/', '/custom', '/health', '/ready', '/metrics', '/users/2', '/no/such/route', '/custom?age=x', '/documentation', '/documentation/json']) {
    assert.equal(await cacheControl(url), 'no-store', url)
  }
  assert.equal(await cacheControl('/users', { method: 'POST', payload: { name: 'Grace', email: 'grace@example.com' } }), 'no-store')
  for (const url of ['/index.html', '/documentation/static/swagger-ui.css']) {
    assert.equal(await cacheControl(url), 'no-cache', url)
  }
  assert.equal(await cacheControl('/no-such-file.html'), 'no-store', 'a missing file is an error like any other')
})
