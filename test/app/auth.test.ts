import assert from 'node:assert/strict'
import { createHmac } from 'node:crypto'
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

test('AUTH=writes: every POST, PATCH and DELETE needs a bearer token; reads do not', async (t) => {
  const app = await appWith(t, 'writes')
  assertUnauthorized(await postJson(app, '/users', ada), /^Missing bearer token/)
  assertUnauthorized(await postJson(app, '/users/507f1f77bcf86cd799439011', ada))
  assertUnauthorized(await app.inject({ method: 'PATCH', url: '/users/1', payload: { name: 'Grace' } }))
  assertUnauthorized(await app.inject({ method: 'DELETE', url: '/users/1' }))

  const created = await app.inject({ method: 'POST', url: '/users', payload: ada, headers: bearer(token()) })
  assert.equal(created.statusCode, 201)
  assert.equal((await app.inject('/users')).statusCode, 200)
  assert.equal((await app.inject('/users/1')).statusCode, 200)
  assert.equal((await app.inject('/')).statusCode, 200)
})

test('AUTH=writes: a list that reads addresses, by the email filter or field, needs a token; under AUTH_SCOPES=on, users:read', async (t) => {
  const app = await appWith(t, 'writes')
  assert.equal((await app.inject({ method: 'POST', url: '/users', payload: ada, headers: bearer(token()) })).statusCode, 201)
  for (const url of ['/users?email=ada@example.com', '/users?fields=id,email', '/users?fields=email&sort=name', '/users?email=not-an-address']) {
    assertUnauthorized(await app.inject(url), /^Missing bearer token/)
    assertUnauthorized(await app.inject({ url, headers: bearer('not.a.token') }))
  }
  assert.deepEqual((await app.inject({ url: '/users?email=ADA@example.com&fields=id,email', headers: bearer(token()) })).json(), [{ id: 1, email: 'ada@example.com' }])
  for (const url of ['/users?name=Ada', '/users?fields=id,name,created_at&sort=-created_at', '/users?name_prefix=email']) {
    assert.equal((await app.inject(url)).statusCode, 200, `${url} reads no address`)
  }

  const scoped = await appWith(t, 'writes', { AUTH_SCOPES: 'on' })
  const writer = bearer(token({ sub: 'alice', scope: 'users:write' }))
  const refused = await scoped.inject({ url: '/users?email=ada@example.com', headers: writer })
  assert.equal(refused.statusCode, 403)
  assert.equal(refused.headers['www-authenticate'], 'Bearer realm="api", error="insufficient_scope", scope="users:read"')
  assert.equal((await scoped.inject({ url: '/users?fields=email', headers: bearer(token({ sub: 'alice', scope: 'users:read' })) })).statusCode, 200)
  assert.equal((await scoped.inject('/users')).statusCode, 200, 'a list without addresses is open')
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
  const refused: Array<[string, Record<string, string>, RegExp, string]> = [
    ['missing header', {}, /^Missing bearer token/, 'token_missing'],
    ['another scheme', { authorization: 'Basic YWxpY2U6cHc=' }, /must be "Bearer <token>"/, 'authorization_malformed'],
    ['no token', { authorization: 'Bearer' }, /must be "Bearer <token>"/, 'authorization_malformed'],
    ['malformed token', bearer('not.a-jwt'), /^Token is invalid$/, 'token_invalid'],
    ['garbage', bearer('!!!'), /must be "Bearer <token>"/, 'authorization_malformed'],
    ['wrong signature', bearer(token({ sub: 'alice' }, { key: 'another-secret' })), /^Token is invalid$/, 'token_invalid'],
    ['expired', bearer(token({ sub: 'alice', exp: now - 120 }, { expiresIn: 0 })), /^Token has expired$/, 'token_expired'],
    ['not valid yet', bearer(token({ sub: 'alice', nbf: now + 120 })), /^Token is not valid yet \(its nbf is in the future\)$/, 'token_not_yet_valid'],
    ['no exp', bearer(token({ sub: 'alice' }, { expiresIn: 0 })), /^Token is invalid$/, 'token_invalid'],
    ['no sub', bearer(token({ name: 'alice' })), /^Token is invalid$/, 'token_invalid'],
    ['empty sub', bearer(token({ sub: '' })), /must name its subject/, 'token_claims_invalid'],
    ['numeric sub', bearer(token({ sub: 42 })), /must name its subject/, 'token_claims_invalid'],
    ['alg none', bearer(`${base64url({ alg: 'none', typ: 'JWT' })}.${base64url({ sub: 'alice', exp: now + 60 })}.`), /^Token is invalid$/, 'token_invalid'],
    ['HS384', bearer(token({ sub: 'alice' }, { algorithm: 'HS384' })), /^Token is invalid$/, 'token_invalid'],
    ['HS512', bearer(token({ sub: 'alice' }, { algorithm: 'HS512' })), /^Token is invalid$/, 'token_invalid']
  ]
  for (const [name, headers, error, code] of refused) {
    const response = await app.inject({ url: '/users', headers })
    assert.equal(response.statusCode, 401, name)
    assertUnauthorized(response, error)
    assert.equal(response.json().code, code, name)
  }
  const missing = await app.inject('/users')
  assert.equal(missing.headers['www-authenticate'], 'Bearer realm="api"', 'no error code when no credentials were sent')
})

test('with JWT_ISSUER and JWT_AUDIENCE set, a shared-secret token must carry both claims, and match them', async (t) => {
  const app = await appWith(t, 'writes', { JWT_ISSUER: 'https://issuer.example', JWT_AUDIENCE: 'users-api' })
  const create = async (claims: Record<string, unknown>) => (await app.inject({ method: 'POST', url: '/users', payload: ada, headers: bearer(token(claims)) })).statusCode
  assert.equal(await create({ sub: 'alice', iss: 'https://issuer.example', aud: 'users-api' }), 201)
  assert.equal(await create({ sub: 'alice', aud: 'users-api' }), 401, 'no iss')
  assert.equal(await create({ sub: 'alice', iss: 'https://issuer.example' }), 401, 'no aud')
  assert.equal(await create({ sub: 'alice', iss: 'https://issuer.example/', aud: 'users-api' }), 401, 'another iss')
})

test('the shared secret takes its own tokens (typ JWT) and access tokens (at+jwt), no other type', async (t) => {
  const app = await appWith(t, 'writes')
  const typed = (typ: string | undefined) => createSigner({ key: secret, algorithm: 'HS256', expiresIn: 60_000, header: { alg: 'HS256', typ } })({ sub: 'alice' })
  const create = async (value: string) => await app.inject({ method: 'POST', url: '/users', payload: ada, headers: bearer(value) })
  for (const typ of ['JWT', 'jwt', 'at+jwt', 'application/at+jwt']) assert.equal((await create(typed(typ))).statusCode, 201, typ)
  for (const typ of ['logout+jwt', 'id_token+jwt', undefined]) {
    const refused = await create(typed(typ))
    assertUnauthorized(refused, /^Token is not an access token/)
  }
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

test('the verified subject and its client reach the request and its log line, never the token', async (t) => {
  const logs = captureLogs()
  const app = await testApp(t, { AUTH: 'writes', JWT_SECRET: secret, LOG_LEVEL: 'info' }, logs.stream)
  const tokens = [token({ sub: 'alice' }), token({ sub: 'svc-1', azp: 'billing' }), token({ sub: 'svc-2', client_id: 'crm' })]
  for (const sent of tokens) await app.inject({ method: 'POST', url: '/users', payload: ada, headers: bearer(sent) })
  await app.inject('/users')
  const lines = logs.lines.filter((line) => line.msg === 'request completed')
  assert.deepEqual(lines.map((line) => [line.user, line.clientId]), [['alice', undefined], ['svc-1', 'billing'], ['svc-2', 'crm'], [undefined, undefined]])
  const logged = JSON.stringify(logs.lines)
  for (const sent of tokens) assert.ok(!logged.includes(sent.split('.')[2]!), 'no token in any line')
})

test('a token that lives longer than JWT_MAX_LIFETIME (from iat, or from now) is refused, as is an exp that is not finite', async (t) => {
  const app = await appWith(t, 'writes', { JWT_MAX_LIFETIME: '1h' })
  const now = Math.floor(Date.now() / 1000)
  const status = async (claims: Record<string, unknown>) =>
    (await app.inject({ method: 'POST', url: '/users', payload: ada, headers: bearer(token({ sub: 'alice', ...claims }, { expiresIn: 0 })) })).statusCode
  assert.equal(await status({ iat: now, exp: now + 3600 }), 201, 'exactly the limit')
  assert.equal(await status({ iat: now, exp: now + 3660 }), 401, 'a minute over')
  assert.equal(await status({ exp: now + 3000 }), 201, 'no iat: counted from now')
  assert.equal(await status({ exp: now + 100_000_000 }), 401, '10^8 s ahead, no iat')
  assert.equal(await status({ iat: now + 100_000_000 - 60, exp: now + 100_000_000 }), 401, 'an iat in the future gains nothing')
  assert.equal(await status({ iat: now - 7200, exp: now + 60 }), 401, 'issued two hours ago for two hours and a minute')
  const forever = createSigner({ key: secret, algorithm: 'HS256' })({ sub: 'alice', exp: 1e300 })
  const refusal = await app.inject({ method: 'POST', url: '/users', payload: ada, headers: bearer(forever) })
  assert.equal(refusal.statusCode, 401)
  assert.equal(refusal.json().error, 'Token lives longer than this service accepts (JWT_MAX_LIFETIME): ask for one that expires sooner')
  // JSON has no Infinity; 1e999 is how a token spells it.
  const infinite = `${base64url({ alg: 'HS256', typ: 'JWT' })}.${Buffer.from('{"sub":"alice","exp":1e999}').toString('base64url')}`
  const signed = `${infinite}.${createHmac('sha256', secret).update(infinite).digest('base64url')}`
  assert.equal((await app.inject({ method: 'POST', url: '/users', payload: ada, headers: bearer(signed) })).statusCode, 401)
  assert.equal((await app.inject('/users')).headers['x-total-count'], '2')
})

describe('AUTH_SCOPES=on', () => {
  const scoped = (scope: Record<string, unknown>) => bearer(token({ sub: 'alice', ...scope }))

  test('each protected route asks for users:read to read and users:write to write, from scope or scp; without it, 403', async (t) => {
    const app = await appWith(t, 'all', { AUTH_SCOPES: 'on' })
    const writer = scoped({ scope: 'openid users:write' })
    const reader = scoped({ scp: ['users:read'] })
    const both = scoped({ scp: 'users:read users:write' })
    assert.equal((await app.inject({ method: 'POST', url: '/users', payload: ada, headers: writer })).statusCode, 201)
    for (const [method, url] of [['GET', '/'], ['GET', '/custom'], ['GET', '/users'], ['GET', '/users/1'], ['HEAD', '/users'], ['GET', '/metrics']] as const) {
      assert.equal((await app.inject({ method, url, headers: reader })).statusCode, 200, `${method} ${url} with users:read`)
      const refused = await app.inject({ method, url, headers: writer })
      assert.equal(refused.statusCode, 403, `${method} ${url} with users:write only`)
      assert.equal(refused.headers['www-authenticate'], 'Bearer realm="api", error="insufficient_scope", scope="users:read"')
      if (method === 'GET') assert.deepEqual(refused.json(), { error: 'Token lacks the scope this route asks for: users:read', code: 'insufficient_scope' })
    }
    const writes = [
      { method: 'POST', url: '/users', payload: ada },
      { method: 'POST', url: '/users/507f1f77bcf86cd799439011', payload: ada },
      { method: 'PATCH', url: '/users/1', payload: { name: 'Grace' } },
      { method: 'DELETE', url: '/users/1' }
    ] as const
    for (const request of writes) {
      const refused = await app.inject({ ...request, headers: reader })
      assert.equal(refused.statusCode, 403, `${request.method} ${request.url} with users:read only`)
      assert.equal(refused.headers['www-authenticate'], 'Bearer realm="api", error="insufficient_scope", scope="users:write"')
      assert.equal((await app.inject({ ...request, headers: scoped({}) })).statusCode, 403, 'no scope at all')
    }
    for (const request of writes) assert.ok([200, 201, 204].includes((await app.inject({ ...request, headers: both })).statusCode), request.method)
    assertUnauthorized(await app.inject('/users'), /^Missing bearer token/)
  })

  test('a 403 is checked before the body, and counted by route in the metrics as the 401s are', async (t) => {
    const app = await appWith(t, 'writes', { AUTH_SCOPES: 'on' })
    const refused = await app.inject({ method: 'POST', url: '/users', payload: 'not json', headers: { ...scoped({ scope: 'users:read' }), 'content-type': 'application/json' } })
    assert.equal(refused.statusCode, 403)
    await app.inject({ method: 'POST', url: '/users', payload: ada })
    assert.equal((await app.inject({ method: 'GET', url: '/users' })).statusCode, 200, 'AUTH=writes: reads stay public')
    const metrics = (await app.inject('/metrics')).body
    assert.match(metrics, /http_requests_total\{method="POST",route="\/users",status_code="403"\} 1/)
    assert.match(metrics, /http_requests_total\{method="POST",route="\/users",status_code="401"\} 1/)
  })

  test('the document declares the scope of each protected operation, and its 403', async (t) => {
    const app = await appWith(t, 'all', { AUTH_SCOPES: 'on' })
    const doc = (await app.inject('/documentation/json')).json()
    assert.deepEqual(doc.paths['/users'].get.security, [{ bearerAuth: ['users:read'] }])
    assert.deepEqual(doc.paths['/users'].post.security, [{ bearerAuth: ['users:write'] }])
    assert.deepEqual(doc.paths['/users/{id}'].delete.security, [{ bearerAuth: ['users:write'] }])
    assert.match(doc.paths['/users/{id}'].patch.responses['403'].description, /users:write/)
    assert.equal(doc.paths['/health'].get.security, undefined)
  })
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

  test('AUTH=writes marks the operations that write (POST, PATCH, DELETE) and, as optional, the list that can read addresses, with the bearer scheme and a 401', async (t) => {
    const doc = await document(t, 'writes')
    assert.deepEqual(doc.components.securitySchemes.bearerAuth, {
      type: 'http', scheme: 'bearer', bearerFormat: 'JWT', description: doc.components.securitySchemes.bearerAuth.description
    })
    assert.deepEqual(secured(doc), ['delete /users/{id}', 'get /users', 'patch /users/{id}', 'post /users', 'post /users/{id}'])
    assert.deepEqual(doc.paths['/users'].post.security, [{ bearerAuth: [] }])
    assert.ok(doc.paths['/users'].post.responses['401'])
    assert.deepEqual(doc.paths['/users'].get.security, [{}, { bearerAuth: [] }], 'a list needs a token only to read addresses')
    assert.ok(doc.paths['/users'].get.responses['401'])
    assert.equal(doc.paths['/users/{id}'].get.responses['401'], undefined)
  })

  test('AUTH=all marks every API operation and /metrics, but not health and readiness', async (t) => {
    const doc = await document(t, 'all')
    assert.deepEqual(secured(doc), ['delete /users/{id}', 'get /', 'get /custom', 'get /events', 'get /metrics', 'get /users', 'get /users/{id}', 'patch /users/{id}',
      'post /events/tickets', 'post /users', 'post /users/{id}'])
  })
})
