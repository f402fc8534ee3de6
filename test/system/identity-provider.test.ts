/**
 * Tokens from an identity provider: a JWKS endpoint started here, serving keys made with
 * node:crypto, as Keycloak or Auth0 would, and tokens signed with their private keys.
 */
import assert from 'node:assert/strict'
import { generateKeyPairSync, randomUUID, sign as signBytes, type KeyObject } from 'node:crypto'
import { once } from 'node:events'
import { writeFileSync } from 'node:fs'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { describe, test, type TestContext } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { createSigner, type Algorithm } from 'fast-jwt'
import type { FastifyInstance } from 'fastify'
import { captureLogs, temporaryFolder, testApp, type Env } from '../helpers.js'

const ISSUER = 'https://idp.example/realms/test'
const AUDIENCE = 'users-api'
const ada = { name: 'Ada', email: 'ada@example.com' }

interface SigningKey { kid: string | undefined, alg: Algorithm, privateKey: KeyObject, publicKey: KeyObject }

function signingKey (alg: Algorithm): SigningKey {
  const pair = alg === 'RS256'
    ? generateKeyPairSync('rsa', { modulusLength: 2048 })
    : alg === 'ES256' ? generateKeyPairSync('ec', { namedCurve: 'P-256' }) : generateKeyPairSync('ed25519')
  return { kid: randomUUID(), alg, ...pair }
}

/**
 * An identity provider: its metadata at the two well-known paths, and its JWKS. The keys it
 * publishes can change, it counts its requests, it can stop answering, and its answers can be set.
 */
async function identityProvider (t: TestContext, published: SigningKey[]) {
  const state = {
    keys: published,
    hits: 0,
    hang: false,
    jwksStatus: 200,
    metadata: undefined as Record<string, unknown> | undefined,
    /** Where the metadata is published: OpenID Connect's path, RFC 8414's, or neither. */
    metadataAt: 'openid' as 'openid' | 'oauth' | 'none'
  }
  const server = http.createServer((request, response) => {
    state.hits++
    if (state.hang) return
    const path = request.url ?? ''
    const metadataPath = state.metadataAt === 'openid' ? '/realms/test/.well-known/openid-configuration' : '/.well-known/oauth-authorization-server/realms/test'
    if (path === metadataPath && state.metadataAt !== 'none') {
      const metadata = state.metadata ?? { issuer: provider.issuer, jwks_uri: provider.url }
      response.setHeader('content-type', 'application/json').end(JSON.stringify(metadata))
    } else if (path === '/realms/test/protocol/openid-connect/certs') {
      const keys = state.keys.map(({ kid, alg, publicKey }) => ({ ...publicKey.export({ format: 'jwk' }), kid, alg, use: 'sig' }))
      response.statusCode = state.jwksStatus
      response.setHeader('content-type', 'application/json').end(JSON.stringify({ keys }))
    } else {
      response.statusCode = 404
      response.end()
    }
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const { port } = server.address() as AddressInfo
  t.after(() => { server.closeAllConnections(); server.close() })
  const provider = {
    state,
    issuer: `http://127.0.0.1:${port}/realms/test`,
    url: `http://127.0.0.1:${port}/realms/test/protocol/openid-connect/certs`,
    async stop () { server.closeAllConnections(); server.close(); await once(server, 'close') },
    async start () { server.listen(port, '127.0.0.1'); await once(server, 'listening') }
  }
  return provider
}

interface SignOptions { kid?: string | null, expiresIn?: number, typ?: string }

/** An access token (RFC 9068: `typ: at+jwt`) signed with the key; `kid: null` leaves its `kid` out. */
function sign (key: SigningKey, claims: Record<string, unknown> = {}, options: SignOptions = {}): string {
  const kid = options.kid === null ? undefined : options.kid ?? key.kid
  const signer = createSigner({ key: key.privateKey.export({ format: 'pem', type: 'pkcs8' }) as string, algorithm: key.alg, kid, header: { alg: key.alg, typ: options.typ ?? 'at+jwt' }, expiresIn: options.expiresIn ?? 300_000 })
  return signer({ sub: 'alice', iss: ISSUER, aud: AUDIENCE, ...claims })
}

const base64url = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url')

/** A token with any header, signed as Ed25519 signs (RFC 8037), for algorithm names fast-jwt's signer does not know. */
function signEd25519 (key: SigningKey, header: Record<string, unknown>, claims: Record<string, unknown> = {}): string {
  const now = Math.floor(Date.now() / 1000)
  const input = `${base64url({ typ: 'at+jwt', kid: key.kid, ...header })}.${base64url({ sub: 'alice', iss: ISSUER, aud: AUDIENCE, iat: now, exp: now + 300, ...claims })}`
  return `${input}.${signBytes(null, Buffer.from(input), key.privateKey).toString('base64url')}`
}

const create = (app: FastifyInstance, token: string) =>
  app.inject({ method: 'POST', url: '/users', payload: ada, headers: { authorization: `Bearer ${token}` } })

async function appOf (t: TestContext, jwksUrl: string, env: Env = {}, logs = captureLogs()) {
  return await testApp(t, { AUTH: 'writes', JWT_JWKS_URL: jwksUrl, JWT_ISSUER: ISSUER, JWT_AUDIENCE: AUDIENCE, LOG_LEVEL: 'info', ...env }, logs.stream)
}

describe('tokens verified with an identity provider\'s JWKS (JWT_JWKS_URL)', () => {
  test('RS256, ES256 and EdDSA tokens are taken, each key chosen by kid from one fetch of the set', async (t) => {
    const keys = [signingKey('RS256'), signingKey('ES256'), signingKey('EdDSA')]
    const provider = await identityProvider(t, keys)
    const app = await appOf(t, provider.url)
    for (const key of keys) {
      const answer = await create(app, sign(key))
      assert.equal(answer.statusCode, 201, `${key.alg}: ${answer.body}`)
    }
    for (const key of keys) assert.equal((await create(app, sign(key))).statusCode, 201, `${key.alg} again`)
    assert.equal(provider.state.hits, 1, 'the set is fetched once and kept')
  })

  test('wrong or missing iss, wrong or missing aud, expired, alg none and HS256 signed with the public key are refused; aud may be a list', async (t) => {
    const key = signingKey('RS256')
    const provider = await identityProvider(t, [key])
    const app = await appOf(t, provider.url)
    assert.equal((await create(app, sign(key, { aud: ['another-api', AUDIENCE] }))).statusCode, 201)
    const now = Math.floor(Date.now() / 1000)
    const publicPem = key.publicKey.export({ format: 'pem', type: 'spki' }) as string
    const refused: Array<[string, string]> = [
      ['wrong iss', sign(key, { iss: 'https://evil.example' })],
      ['wrong aud', sign(key, { aud: 'another-api' })],
      ['aud list without ours', sign(key, { aud: ['a', 'b'] })],
      ['expired', sign(key, { exp: now - 120, iat: now - 200 }, { expiresIn: 0 })],
      ['alg none', `${base64url({ alg: 'none', kid: key.kid, header: { typ: 'at+jwt' } })}.${base64url({ sub: 'alice', iss: ISSUER, aud: AUDIENCE, exp: now + 60 })}.`],
      ['HS256 keyed with the public key', createSigner({ key: publicPem, algorithm: 'HS256', kid: key.kid, header: { alg: 'HS256', typ: 'at+jwt' } })({ sub: 'alice', iss: ISSUER, aud: AUDIENCE })],
      ['no iss', sign(key, { iss: undefined })],
      ['no aud', sign(key, { aud: undefined })]
    ]
    for (const [name, token] of refused) {
      const answer = await create(app, token)
      assert.equal(answer.statusCode, 401, `${name}: ${answer.body}`)
      assert.match(String(answer.headers['www-authenticate']), /error="invalid_token"/, name)
    }
    assert.equal(provider.state.hits, 1, 'no refused token sent for keys')
  })

  test('a key the provider rotates in is followed within about a second, without a restart', async (t) => {
    const first = signingKey('ES256')
    const provider = await identityProvider(t, [first])
    const app = await appOf(t, provider.url)
    assert.equal((await create(app, sign(first))).statusCode, 201)
    const next = signingKey('ES256')
    provider.state.keys = [next]
    const rotatedAt = performance.now()
    let status = 0
    while (status !== 201 && performance.now() - rotatedAt < 3000) {
      status = (await create(app, sign(next))).statusCode
      if (status !== 201) await sleep(100)
    }
    assert.equal(status, 201)
    assert.ok(performance.now() - rotatedAt < 1500, `followed in ${Math.round(performance.now() - rotatedAt)} ms`)
  })

  test('50 tokens with made-up kids cause a handful of fetches, not 50, and each is a 401', async (t) => {
    const key = signingKey('RS256')
    const provider = await identityProvider(t, [key])
    const app = await appOf(t, provider.url)
    assert.equal((await create(app, sign(key))).statusCode, 201)
    const before = provider.state.hits
    const answers = await Promise.all(Array.from({ length: 50 }, async () => await create(app, sign(key, {}, { kid: randomUUID() }))))
    assert.deepEqual([...new Set(answers.map((answer) => answer.statusCode))], [401])
    await sleep(300)
    const more = await Promise.all(Array.from({ length: 50 }, async () => await create(app, sign(key, {}, { kid: randomUUID() }))))
    assert.deepEqual([...new Set(more.map((answer) => answer.statusCode))], [401])
    assert.ok(provider.state.hits - before <= 2, `${provider.state.hits - before} fetches`)
    assert.equal((await create(app, sign(key))).statusCode, 201, 'the real key still works')
  })

  test('while the provider is down, cached keys go on working; a key not cached is 503 with Retry-After, logged once', async (t) => {
    const known = signingKey('EdDSA')
    const provider = await identityProvider(t, [known])
    const logs = captureLogs()
    const app = await appOf(t, provider.url, {}, logs)
    assert.equal((await create(app, sign(known))).statusCode, 201)

    await provider.stop()
    const unseen = signingKey('EdDSA')
    provider.state.keys = [known, unseen]
    assert.equal((await create(app, sign(known))).statusCode, 201, 'a cached key needs no provider')
    for (let attempt = 0; attempt < 3; attempt++) {
      const answer = await create(app, sign(unseen))
      assert.equal(answer.statusCode, 503, answer.body)
      assert.equal(answer.headers['retry-after'], '1')
      assert.deepEqual(answer.json(), { error: 'The identity provider cannot be reached to check this token: retry shortly', code: 'provider_unreachable' })
      await sleep(600)
    }
    const outageLines = logs.lines.filter((line) => /identity provider's keys cannot be fetched/.test(line.msg))
    assert.equal(outageLines.length, 1, 'one line for the outage')
    assert.equal(outageLines[0]!.level, 50)

    await provider.start()
    await sleep(1000)
    assert.equal((await create(app, sign(unseen))).statusCode, 201, 'back once the provider is')
    assert.equal(logs.lines.filter((line) => /identity provider's keys can be fetched again/.test(line.msg)).length, 1)
  })

  test('a provider that answers nothing is a 503 within seconds, never a hang or a 500', async (t) => {
    const provider = await identityProvider(t, [])
    provider.state.hang = true
    const app = await appOf(t, provider.url)
    const startedAt = performance.now()
    const answer = await create(app, sign(signingKey('RS256')))
    assert.equal(answer.statusCode, 503)
    assert.ok(performance.now() - startedAt < 5000)
  })

  test('scopes from scp, as a list, work with the provider\'s tokens; the access log names sub and azp', async (t) => {
    const key = signingKey('RS256')
    const provider = await identityProvider(t, [key])
    const logs = captureLogs()
    const app = await appOf(t, provider.url, { AUTH: 'all', AUTH_SCOPES: 'on' }, logs)
    assert.equal((await create(app, sign(key, { scp: ['users:read'] }))).statusCode, 403)
    assert.equal((await create(app, sign(key, { scp: ['users:write'], azp: 'web-app' }))).statusCode, 201)
    const line = logs.lines.filter((entry) => entry.msg === 'request completed').at(-1)
    assert.deepEqual([line?.user, line?.clientId], ['alice', 'web-app'])
  })
})

test('JWT_PUBLIC_KEY: tokens signed with its private key are taken; HS256 keyed with the public key, or no iss or aud, is refused', async (t) => {
  const key = signingKey('RS256')
  const file = join(temporaryFolder(t), 'provider.pem')
  const publicPem = key.publicKey.export({ format: 'pem', type: 'spki' }) as string
  writeFileSync(file, publicPem)
  const app = await testApp(t, { AUTH: 'writes', JWT_PUBLIC_KEY: file, JWT_ALGORITHMS: 'RS256', JWT_ISSUER: ISSUER, JWT_AUDIENCE: AUDIENCE })
  assert.equal((await create(app, sign(key))).statusCode, 201)
  assert.equal((await create(app, sign(key, { iss: undefined }))).statusCode, 401, 'no iss')
  assert.equal((await create(app, sign(key, { aud: undefined }))).statusCode, 401, 'no aud')
  assert.equal((await create(app, createSigner({ key: publicPem, algorithm: 'HS256', header: { alg: 'HS256', typ: 'at+jwt' } })({ sub: 'alice' }))).statusCode, 401)
  assert.equal((await create(app, sign(signingKey('RS256')))).statusCode, 401, 'another key')
})

describe('an identity provider found from JWT_ISSUER alone (discovery)', () => {
  const ready = async (app: FastifyInstance) => await app.inject('/ready')

  test('the keys are found through /.well-known/openid-configuration, said at start-up, and verify tokens', async (t) => {
    const key = signingKey('ES256')
    const provider = await identityProvider(t, [key])
    const logs = captureLogs()
    const app = await testApp(t, { AUTH: 'writes', JWT_ISSUER: provider.issuer, LOG_LEVEL: 'info' }, logs.stream)
    const found = logs.lines.find((line) => line.msg === 'the identity provider\'s signing keys are fetched')
    assert.equal(found?.jwksUrl, provider.url)
    assert.deepEqual(found?.keys, [{ kid: key.kid, alg: 'ES256', type: 'ec' }])
    assert.equal((await create(app, sign(key, { iss: provider.issuer }))).statusCode, 201)
    assert.equal((await ready(app)).statusCode, 200)
  })

  test('RFC 8414\'s metadata path is used when OpenID Connect\'s has none', async (t) => {
    const key = signingKey('RS256')
    const provider = await identityProvider(t, [key])
    provider.state.metadataAt = 'oauth'
    const app = await testApp(t, { AUTH: 'writes', JWT_ISSUER: provider.issuer })
    assert.equal((await create(app, sign(key, { iss: provider.issuer }))).statusCode, 201)
  })

  test('metadata naming another issuer, a JWKS that answers 404 and one with no usable key are said at start-up and by /ready', async (t) => {
    const key = signingKey('RS256')
    const cases: Array<[string, (provider: Awaited<ReturnType<typeof identityProvider>>) => void, RegExp]> = [
      ['another issuer', (provider) => { provider.state.metadata = { issuer: `${provider.issuer}/`, jwks_uri: provider.url } }, /names the issuer .*, not JWT_ISSUER/],
      ['a 404', (provider) => { provider.state.jwksStatus = 404 }, /answered HTTP 404/],
      ['no usable key', (provider) => { provider.state.keys = [signingKey('ES256')] }, /holds no key for RS256/],
      ['no metadata', (provider) => { provider.state.metadataAt = 'none' }, /publishes no metadata/]
    ]
    for (const [name, arrange, said] of cases) {
      const provider = await identityProvider(t, [key])
      arrange(provider)
      const logs = captureLogs()
      const app = await testApp(t, { AUTH: 'writes', JWT_ISSUER: provider.issuer, JWT_ALGORITHMS: 'RS256', LOG_LEVEL: 'info' }, logs.stream)
      const line = logs.lines.find((entry) => /identity provider's keys cannot be fetched/.test(entry.msg))
      assert.match(String(line?.reason), said, name)
      const readiness = await ready(app)
      assert.equal(readiness.statusCode, 503, name)
      assert.match(readiness.json().error, /^No token can be verified: /, name)
      assert.match(readiness.json().error, said, name)
      const answer = await create(app, sign(key, { iss: provider.issuer }))
      assert.equal(answer.statusCode, 503, name)
      assert.deepEqual(answer.json(), { error: 'The identity provider publishes no key this service can use: retry shortly', code: 'provider_without_usable_key' }, name)
    }
  })
})

describe('tokens without kid, Ed25519, and token types', () => {
  test('a token without kid is verified when exactly one key fits its alg; keys without kid are used that way', async (t) => {
    const rsa = { ...signingKey('RS256'), kid: undefined }
    const ec = signingKey('ES256')
    const provider = await identityProvider(t, [rsa, ec])
    const app = await appOf(t, provider.url)
    assert.equal((await create(app, sign(rsa, {}, { kid: null }))).statusCode, 201, 'one RS256 key, no kid on either side')
    assert.equal((await create(app, sign(ec, {}, { kid: null }))).statusCode, 201, 'one ES256 key, with a kid the token leaves out')

    const other = signingKey('RS256')
    provider.state.keys = [rsa, ec, other]
    await sleep(1100)
    assert.equal((await create(app, sign(other))).statusCode, 201, 'the new key, by its kid')
    const ambiguous = await create(app, sign(rsa, {}, { kid: null }))
    assert.equal(ambiguous.statusCode, 401, 'two RS256 keys: the token must name one')
  })

  test('Ed25519 (RFC 9864) and EdDSA are both taken, each only when JWT_ALGORITHMS allows it', async (t) => {
    const key = signingKey('EdDSA')
    const provider = await identityProvider(t, [{ ...key, alg: 'Ed25519' as Algorithm }])
    const app = await appOf(t, provider.url)
    assert.equal((await create(app, signEd25519(key, { alg: 'Ed25519' }))).statusCode, 201, 'Ed25519 by default')

    const onlyEd25519 = await appOf(t, provider.url, { JWT_ALGORITHMS: 'Ed25519' })
    assert.equal((await create(onlyEd25519, signEd25519(key, { alg: 'Ed25519' }))).statusCode, 201)
    assert.equal((await create(onlyEd25519, signEd25519(key, { alg: 'EdDSA' }))).statusCode, 401, 'EdDSA is not allowed then')

    const plain = await identityProvider(t, [key])
    const onlyEdDSA = await appOf(t, plain.url, { JWT_ALGORITHMS: 'EdDSA' })
    assert.equal((await create(onlyEdDSA, sign(key))).statusCode, 201)
    assert.equal((await create(onlyEdDSA, signEd25519(key, { alg: 'Ed25519' }))).statusCode, 401, 'Ed25519 is not allowed then')
  })

  test('only access tokens (typ at+jwt) are taken by default; an ID token is refused; JWT_TYP names others', async (t) => {
    const key = signingKey('RS256')
    const provider = await identityProvider(t, [key])
    const app = await appOf(t, provider.url)
    assert.equal((await create(app, sign(key, {}, { typ: 'application/at+jwt' }))).statusCode, 201)
    assert.equal((await create(app, sign(key, {}, { typ: 'AT+JWT' }))).statusCode, 201)
    for (const typ of ['JWT', 'id_token+jwt', 'logout+jwt']) {
      const answer = await create(app, sign(key, {}, { typ }))
      assert.equal(answer.statusCode, 401, typ)
      assert.deepEqual(answer.json(), { error: 'Token is not an access token: its typ header is not one this service accepts', code: 'token_not_access_token' })
    }
    const keycloak = await appOf(t, provider.url, { JWT_TYP: 'JWT' })
    assert.equal((await create(keycloak, sign(key, {}, { typ: 'JWT' }))).statusCode, 201)
    assert.equal((await create(keycloak, sign(key))).statusCode, 401, 'at+jwt is not named then')
  })

  test('each refusal is logged at info with its reason, never with the token', async (t) => {
    const key = signingKey('RS256')
    const provider = await identityProvider(t, [key])
    const logs = captureLogs()
    const app = await appOf(t, provider.url, { JWT_MAX_LIFETIME: '1h' }, logs)
    const now = Math.floor(Date.now() / 1000)
    const cases: Array<[string, string, RegExp?]> = [
      ['claim', sign(key, { iss: `${ISSUER}/` }), /\biss claim\b/],
      ['claim', sign(key, { aud: 'another-api' }), /\baud claim\b/],
      ['algorithm', createSigner({ key: 'a-secret-that-is-long-enough-for-hs256-x', algorithm: 'HS256', header: { alg: 'HS256', typ: 'at+jwt' } })({ sub: 'alice' })],
      ['kid', sign(key, {}, { kid: 'unknown' })],
      ['type', sign(key, {}, { typ: 'JWT' })],
      ['expiry', sign(key, { exp: now - 120, iat: now - 200 }, { expiresIn: 0 })],
      ['lifetime', sign(key, {}, { expiresIn: 2 * 3600_000 })],
      ['signature', `${sign(key).slice(0, -4)}AAAA`]
    ]
    for (const [reason, token, detail] of cases) {
      const answer = await create(app, token)
      assert.equal(answer.statusCode, 401, reason)
      const line = logs.lines.findLast((entry) => entry.msg === 'bearer token refused')
      assert.equal(line?.level, 30, reason)
      assert.equal(line?.tokenRefused, reason, `${reason}: ${JSON.stringify(line)}`)
      assert.equal(typeof line?.detail, 'string')
      if (detail !== undefined) assert.match(String(line?.detail), detail, 'the detail names the claim')
      assert.ok(!JSON.stringify(logs.lines).includes(token.split('.')[2]!), `${reason}: the token is not logged`)
    }
  })
})

describe('ID tokens, scopes from other claims, and the provider\'s answers at start', () => {
  test('an ID token is refused under any JWT_TYP, by its nonce, at_hash, c_hash or typ "ID" claim, while the same provider\'s access tokens are taken', async (t) => {
    const key = signingKey('RS256')
    const provider = await identityProvider(t, [key])
    for (const env of [{}, { JWT_TYP: 'JWT' }, { JWT_TYP: 'JWT,at+jwt,id_token+jwt' }] as Env[]) {
      const app = await appOf(t, provider.url, env)
      const typ = env.JWT_TYP === undefined ? 'at+jwt' : 'JWT'
      assert.equal((await create(app, sign(key, { auth_time: 1, acr: '1', sid: 's' }, { typ }))).statusCode, 201, `an access token, ${JSON.stringify(env)}`)
      for (const claims of [{ nonce: 'n-1' }, { at_hash: 'x' }, { c_hash: 'y' }, { typ: 'ID' }, { nonce: 'n', typ: 'ID', azp: 'web' }]) {
        const answer = await create(app, sign(key, claims, { typ }))
        assert.equal(answer.statusCode, 401, `${JSON.stringify(claims)}, ${JSON.stringify(env)}`)
        assert.deepEqual(answer.json(), { error: 'Token is an ID token: send an access token issued for this API', code: 'token_is_id_token' })
      }
    }
  })

  test('JWT_SCOPE_CLAIMS reads scopes from roles or permissions; a 403 logs what was needed and granted', async (t) => {
    const key = signingKey('RS256')
    const provider = await identityProvider(t, [key])
    const logs = captureLogs()
    const entra = await appOf(t, provider.url, { AUTH_SCOPES: 'on', JWT_SCOPE_CLAIMS: 'scp,roles' }, logs)
    assert.equal((await create(entra, sign(key, { roles: ['users:write'] }))).statusCode, 201, 'an app-only token\'s roles')
    assert.equal((await create(entra, sign(key, { scp: 'users:read users:write' }))).statusCode, 201)
    assert.equal((await create(entra, sign(key, { scope: 'users:write' }))).statusCode, 403, 'scope is not read then')
    const line = logs.lines.findLast((entry) => entry.msg === 'bearer token lacks the scope this route asks for')
    assert.deepEqual([line?.needed, line?.granted, line?.scopeClaims], ['users:write', [], ['scp', 'roles']])
    const auth0 = await appOf(t, provider.url, { AUTH_SCOPES: 'on', JWT_SCOPE_CLAIMS: 'scope,permissions' })
    assert.equal((await create(auth0, sign(key, { permissions: ['users:read', 'users:write'] }))).statusCode, 201)
    assert.equal((await create(auth0, sign(key, { roles: ['users:write'] }))).statusCode, 403)
  })

  test('/ready is 503 while the provider cannot be reached at start, and 200 by itself within 30 s of it answering, with no token', async (t) => {
    const key = signingKey('RS256')
    const provider = await identityProvider(t, [key])
    await provider.stop()
    const app = await appOf(t, provider.url)
    const down = await app.inject('/ready')
    assert.equal(down.statusCode, 503)
    assert.match(down.json().error, /^No token can be verified: .*cannot be reached/)
    await sleep(1500)
    await provider.start()
    const answeringSince = performance.now()
    while ((await app.inject('/ready')).statusCode !== 200) {
      assert.ok(performance.now() - answeringSince < 30_000, '/ready turns 200 within 30 s')
      await sleep(200)
    }
    assert.equal((await create(app, sign(key))).statusCode, 201)
  })

  test('/ready is 503 while the provider answers wrongly at start, and 200 by itself within 30 s of its fix', async (t) => {
    const key = signingKey('RS256')
    const provider = await identityProvider(t, [key])
    provider.state.jwksStatus = 404
    const app = await appOf(t, provider.url)
    assert.equal((await app.inject('/ready')).statusCode, 503)
    await sleep(3000)
    provider.state.jwksStatus = 200
    const fixedSince = performance.now()
    while ((await app.inject('/ready')).statusCode !== 200) {
      assert.ok(performance.now() - fixedSince < 30_000, '/ready turns 200 within 30 s')
      await sleep(200)
    }
  })

  test('a key set or metadata document over 1 MiB is refused as it arrives, and said by /ready', async (t) => {
    const key = signingKey('RS256')
    const provider = await identityProvider(t, [key])
    // Whitespace around a valid set: JSON that parses, but far larger than any set.
    const server = http.createServer((_request, response) => {
      response.setHeader('content-type', 'application/json')
      response.write('{"keys":[]')
      const padding = ' '.repeat(64 * 1024)
      for (let chunk = 0; chunk < 64; chunk++) response.write(padding)
      response.end('}')
    })
    server.listen(0, '127.0.0.1')
    await once(server, 'listening')
    t.after(() => { server.closeAllConnections(); server.close() })
    const huge = `http://127.0.0.1:${(server.address() as AddressInfo).port}/certs`
    const app = await appOf(t, huge)
    const readiness = await app.inject('/ready')
    assert.equal(readiness.statusCode, 503)
    assert.match(readiness.json().error, /answered more than 1024 KiB/)
    provider.state.metadata = { issuer: provider.issuer, jwks_uri: provider.url, padding: 'x'.repeat(2 * 1024 * 1024) }
    const discovered = await testApp(t, { AUTH: 'writes', JWT_ISSUER: provider.issuer, LOG_LEVEL: 'silent' })
    assert.match((await discovered.inject('/ready')).json().error, /openid-configuration answered more than 1024 KiB/)
  })
})
