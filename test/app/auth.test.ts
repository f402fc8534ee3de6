import assert from 'node:assert/strict'
import { createSigner } from 'fast-jwt'
import { describe, test } from 'node:test'
import { captureLogs, postJson, testApp, type Env } from '../helpers.js'

const secret = 'a-test-secret-that-is-long-enough-for-hs256'
const ada = { name: 'Ada', email: 'ada@example.com' }

function token (claims: Record<string, unknown> = { sub: 'alice' }, options: { key?: string, algorithm?: 'HS256' | 'HS384' | 'HS512', expiresIn?: number } = {}): string {
  const { key = secret, algorithm = 'HS256', expiresIn = 60_000 } = options
  return createSigner({ key, algorithm, ...(expiresIn > 0 && { expiresIn }) })(claims)
}

function base64url (value: object): string {
  return Buffer.from(JSON.stringify(value)).toString('base64url')
}

const bearer = (value: string) => ({ authorization: `Bearer ${value}` })

function appWith (t: Parameters<typeof testApp>[0], auth: string, env: Env = {}) {
  return testApp(t, { AUTH: auth, JWT_SECRET: secret, ...env })
}

function assertUnauthorized (response: { statusCode: number, headers: Record<string, unknown>, json: () => any }, error?: RegExp) {
  assert.equal(response.statusCode, 401)
  assert.match(String(response.headers['www-authenticate']), /^Bearer /)
  assert.equal(typeof response.json().error, 'string')
  if (error !== undefined) assert.match(response.json().error, error)
}

test('AUTH=off: no route asks for a token, as the specification shows', async (t) => {
  const app = await appWith(t, 'off')
  assert.equal((await postJson(app, '/users', ada)).statusCode, 201)
  assert.equal((await app.inject('/users')).statusCode, 200)
})

test('without JWT_SECRET (AUTH=off, not production), start-up warns of nothing and one info line says the secret is random', async (t) => {
  const logs = captureLogs()
  await testApp(t, { LOG_LEVEL: 'info' }, logs.stream)
  assert.deepEqual(logs.lines.filter((line) => line.level >= 40), [])
  assert.deepEqual(logs.lines.filter((line) => /JWT_SECRET/.test(line.msg)).map((line) => line.msg),
    ['JWT_SECRET is not set: this process uses a random secret of its own (AUTH is off, so no route asks for a token; set JWT_SECRET before turning it on)'])
})

test('AUTH=writes: every POST needs a bearer token; reads do not', async (t) => {
  const app = await appWith(t, 'writes')
  assertUnauthorized(await postJson(app, '/users', ada), /^Missing bearer token/)
  assertUnauthorized(await postJson(app, '/users/507f1f77bcf86cd799439011', ada))

  const created = await app.inject({ method: 'POST', url: '/users', payload: ada, headers: bearer(token()) })
  assert.equal(created.statusCode, 201)
  assert.equal((await app.inject('/users')).statusCode, 200)
  assert.equal((await app.inject('/users/1')).statusCode, 200)
  assert.equal((await app.inject('/')).statusCode, 200)
})

test('a protected route checks the token before the body: no 400, 413 or 415 comes before the 401', async (t) => {
  const app = await appWith(t, 'writes', { BODY_LIMIT: '1024' })
  const refused = [
    { payload: { email: 'nope' }, why: 'a body that fails its schema' },
    { payload: { name: 'Ada', email: 'ada@example.com', padding: 'x'.repeat(4096) }, why: 'a body over BODY_LIMIT' },
    { payload: 'name=Ada', headers: { 'content-type': 'text/plain' }, why: 'a body that is not JSON' }
  ]
  for (const { payload, headers, why } of refused) {
    for (const url of ['/users', '/users/507f1f77bcf86cd799439011']) {
      const response = await app.inject({ method: 'POST', url, payload, headers: { ...headers } })
      assertUnauthorized(response, /^Missing bearer token/)
      assert.equal(response.json().details, undefined, `${why} on ${url}: no rule is told`)
    }
  }
})

test('with tokens on, an Idempotency-Key is the caller\'s own: another sub\'s same key replays nothing, refuses nothing', async (t) => {
  const app = await appWith(t, 'writes')
  const post = (sub: string, body: object) => app.inject({ method: 'POST', url: '/users', payload: body, headers: { ...bearer(token({ sub })), 'idempotency-key': 'order-1' } })
  const alices = await post('alice', ada)
  assert.equal(alices.statusCode, 201)
  const bobs = await post('bob', ada)
  assert.equal(bobs.statusCode, 201)
  assert.equal(bobs.headers['idempotent-replayed'], undefined, 'no replay of alice\'s answer')
  assert.notEqual(bobs.headers.location, alices.headers.location)
  assert.equal((await post('bob', { name: 'Bob', email: 'bob@example.com' })).statusCode, 422, 'bob\'s own key, reused with another body')
  assert.equal((await post('carol', { name: 'Carol', email: 'carol@example.com' })).statusCode, 201, 'no 422 across callers')
  const retried = await post('alice', ada)
  assert.equal(retried.headers['idempotent-replayed'], 'true')
  assert.equal(retried.headers.location, alices.headers.location)
})

test('AUTH=all: every API route needs a token, HEAD included', async (t) => {
  const app = await appWith(t, 'all')
  for (const url of ['/', '/custom?name=x', '/users', '/users/1']) {
    assertUnauthorized(await app.inject(url))
    assert.notEqual((await app.inject({ url, headers: bearer(token()) })).statusCode, 401, url)
  }
  const head = await app.inject({ method: 'HEAD', url: '/users' })
  assert.equal(head.statusCode, 401, 'HEAD answers like GET, without a body')
  assert.match(String(head.headers['www-authenticate']), /^Bearer /)
  assertUnauthorized(await postJson(app, '/users', ada))
})

test('docs, static files, /health and /ready stay public in every mode', async (t) => {
  for (const mode of ['writes', 'all']) {
    const app = await appWith(t, mode)
    for (const url of ['/health', '/ready', '/documentation/json', '/documentation/', '/index.html']) {
      assert.equal((await app.inject(url)).statusCode, 200, `${mode} ${url}`)
    }
  }
})

test('a CORS preflight to a protected route needs no token', async (t) => {
  const app = await appWith(t, 'all')
  const preflight = await app.inject({ method: 'OPTIONS', url: '/users', headers: { origin: 'https://app.example.com', 'access-control-request-method': 'GET' } })
  assert.equal(preflight.statusCode, 204)
})

test('bad credentials are refused with 401, WWW-Authenticate and a JSON error, never a 500', async (t) => {
  const app = await appWith(t, 'all')
  const now = Math.floor(Date.now() / 1000)
  const refused: Array<[string, Record<string, string>, RegExp]> = [
    ['missing header', {}, /^Missing bearer token/],
    ['another scheme', { authorization: 'Basic YWxpY2U6cHc=' }, /must be "Bearer <token>"/],
    ['no token', { authorization: 'Bearer' }, /must be "Bearer <token>"/],
    ['malformed token', bearer('not.a-jwt'), /^Token is invalid$/],
    ['garbage', bearer('!!!'), /must be "Bearer <token>"/],
    ['wrong signature', bearer(token({ sub: 'alice' }, { key: 'another-secret' })), /^Token is invalid$/],
    ['expired', bearer(token({ sub: 'alice', exp: now - 120 }, { expiresIn: 0 })), /^Token has expired$/],
    ['not valid yet', bearer(token({ sub: 'alice', nbf: now + 120 })), /^Token is not valid yet \(its nbf is in the future\)$/],
    ['no exp', bearer(token({ sub: 'alice' }, { expiresIn: 0 })), /^Token is invalid$/],
    ['no sub', bearer(token({ name: 'alice' })), /^Token is invalid$/],
    ['empty sub', bearer(token({ sub: '' })), /must name its subject/],
    ['numeric sub', bearer(token({ sub: 42 })), /must name its subject/],
    ['alg none', bearer(`${base64url({ alg: 'none', typ: 'JWT' })}.${base64url({ sub: 'alice', exp: now + 60 })}.`), /^Token is invalid$/],
    ['HS384', bearer(token({ sub: 'alice' }, { algorithm: 'HS384' })), /^Token is invalid$/],
    ['HS512', bearer(token({ sub: 'alice' }, { algorithm: 'HS512' })), /^Token is invalid$/]
  ]
  for (const [name, headers, error] of refused) {
    const response = await app.inject({ url: '/users', headers })
    assert.equal(response.statusCode, 401, name)
    assertUnauthorized(response, error)
  }
  const missing = await app.inject('/users')
  assert.equal(missing.headers['www-authenticate'], 'Bearer realm="api"', 'no error code when no credentials were sent')
})

test('a token minted on a machine whose clock is up to a minute off is taken; further off, refused', async (t) => {
  const app = await appWith(t, 'writes')
  const now = Math.floor(Date.now() / 1000)
  const status = async (claims: Record<string, unknown>) =>
    (await app.inject({ method: 'POST', url: '/users', payload: ada, headers: bearer(token({ sub: 'alice', ...claims }, { expiresIn: 0 })) })).statusCode
  // The minting clock ahead of ours: its nbf and iat are in our future.
  assert.equal(await status({ iat: now + 50, nbf: now + 50, exp: now + 3650 }), 201, 'nbf 50 s ahead')
  assert.equal(await status({ iat: now + 90, nbf: now + 90, exp: now + 3690 }), 401, 'nbf 90 s ahead')
  // Behind ours: its exp is in our past.
  assert.equal(await status({ iat: now - 3650, exp: now - 50 }), 201, 'exp 50 s ago')
  assert.equal(await status({ iat: now - 3690, exp: now - 90 }), 401, 'exp 90 s ago')
})

test('the verified subject reaches the request and its log line', async (t) => {
  const logs = captureLogs()
  const app = await testApp(t, { AUTH: 'writes', JWT_SECRET: secret, LOG_LEVEL: 'info' }, logs.stream)
  await app.inject({ method: 'POST', url: '/users', payload: ada, headers: bearer(token({ sub: 'alice' })) })
  await app.inject('/users')
  const [create, list] = logs.lines.filter((line) => line.msg === 'request completed')
  assert.equal(create?.user, 'alice')
  assert.equal(list?.user, undefined, 'no token, no user')
})

describe('the OpenAPI document follows AUTH', () => {
  async function document (t: Parameters<typeof testApp>[0], auth: string) {
    return (await appWith(t, auth).then((app) => app.inject('/documentation/json'))).json()
  }
  const secured = (doc: any) => Object.entries<any>(doc.paths).flatMap(([path, methods]) =>
    Object.entries<any>(methods).filter(([, operation]) => operation.security !== undefined).map(([method]) => `${method} ${path}`)).sort()

  test('AUTH=off declares no security scheme and no protected operation', async (t) => {
    const doc = await document(t, 'off')
    assert.equal(doc.components?.securitySchemes, undefined)
    assert.deepEqual(secured(doc), [])
  })

  test('AUTH=writes marks exactly the operations that write (POST, PATCH, DELETE), with the bearer scheme and a 401', async (t) => {
    const doc = await document(t, 'writes')
    assert.deepEqual(doc.components.securitySchemes.bearerAuth, {
      type: 'http', scheme: 'bearer', bearerFormat: 'JWT', description: doc.components.securitySchemes.bearerAuth.description
    })
    assert.deepEqual(secured(doc), ['delete /users/{id}', 'patch /users/{id}', 'post /users', 'post /users/{id}'])
    assert.deepEqual(doc.paths['/users'].post.security, [{ bearerAuth: [] }])
    assert.ok(doc.paths['/users'].post.responses['401'])
    assert.equal(doc.paths['/users'].get.responses['401'], undefined)
  })

  test('AUTH=all marks every API operation and /metrics, but not health and readiness', async (t) => {
    const doc = await document(t, 'all')
    assert.deepEqual(secured(doc), ['delete /users/{id}', 'get /', 'get /custom', 'get /metrics', 'get /users', 'get /users/{id}', 'patch /users/{id}',
      'post /users', 'post /users/{id}'])
  })
})
