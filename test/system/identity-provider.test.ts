/**
 * Tokens from an identity provider: a JWKS endpoint started here, serving keys made with
 * node:crypto, as Keycloak or Auth0 would, and tokens signed with their private keys.
 */
import assert from 'node:assert/strict'
import { generateKeyPairSync, randomUUID, type KeyObject } from 'node:crypto'
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

interface SigningKey { kid: string, alg: Algorithm, privateKey: KeyObject, publicKey: KeyObject }

function signingKey (alg: Algorithm): SigningKey {
  const pair = alg === 'RS256'
    ? generateKeyPairSync('rsa', { modulusLength: 2048 })
    : alg === 'ES256' ? generateKeyPairSync('ec', { namedCurve: 'P-256' }) : generateKeyPairSync('ed25519')
  return { kid: randomUUID(), alg, ...pair }
}

/** A JWKS endpoint: the keys it publishes can change, it counts its requests, and it can stop answering. */
async function identityProvider (t: TestContext, published: SigningKey[]) {
  const state = { keys: published, hits: 0, hang: false }
  const server = http.createServer((request, response) => {
    state.hits++
    if (state.hang) return
    const keys = state.keys.map(({ kid, alg, publicKey }) => ({ ...publicKey.export({ format: 'jwk' }), kid, alg, use: 'sig' }))
    response.setHeader('content-type', 'application/json').end(JSON.stringify({ keys }))
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const { port } = server.address() as AddressInfo
  t.after(() => { server.closeAllConnections(); server.close() })
  return {
    state,
    url: `http://127.0.0.1:${port}/realms/test/protocol/openid-connect/certs`,
    async stop () { server.closeAllConnections(); server.close(); await once(server, 'close') },
    async start () { server.listen(port, '127.0.0.1'); await once(server, 'listening') }
  }
}

function sign (key: SigningKey, claims: Record<string, unknown> = {}, options: { kid?: string, expiresIn?: number } = {}): string {
  const signer = createSigner({ key: key.privateKey.export({ format: 'pem', type: 'pkcs8' }) as string, algorithm: key.alg, kid: options.kid ?? key.kid, expiresIn: options.expiresIn ?? 300_000 })
  return signer({ sub: 'alice', iss: ISSUER, aud: AUDIENCE, ...claims })
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

  test('wrong iss, wrong aud, expired, alg none and HS256 signed with the public key are refused; aud may be a list', async (t) => {
    const key = signingKey('RS256')
    const provider = await identityProvider(t, [key])
    const app = await appOf(t, provider.url)
    assert.equal((await create(app, sign(key, { aud: ['another-api', AUDIENCE] }))).statusCode, 201)
    const now = Math.floor(Date.now() / 1000)
    const header = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url')
    const publicPem = key.publicKey.export({ format: 'pem', type: 'spki' }) as string
    const refused: Array<[string, string]> = [
      ['wrong iss', sign(key, { iss: 'https://evil.example' })],
      ['wrong aud', sign(key, { aud: 'another-api' })],
      ['aud list without ours', sign(key, { aud: ['a', 'b'] })],
      ['expired', sign(key, { exp: now - 120, iat: now - 200 }, { expiresIn: 0 })],
      ['alg none', `${header({ alg: 'none', kid: key.kid })}.${header({ sub: 'alice', iss: ISSUER, aud: AUDIENCE, exp: now + 60 })}.`],
      ['HS256 keyed with the public key', createSigner({ key: publicPem, algorithm: 'HS256', kid: key.kid })({ sub: 'alice', iss: ISSUER, aud: AUDIENCE })],
      ['no kid', createSigner({ key: key.privateKey.export({ format: 'pem', type: 'pkcs8' }) as string, algorithm: 'RS256' })({ sub: 'alice', iss: ISSUER, aud: AUDIENCE })]
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
      assert.deepEqual(answer.json(), { error: 'The identity provider cannot be reached to check this token: retry shortly' })
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

test('JWT_PUBLIC_KEY: tokens signed with its private key are taken; HS256 keyed with the public key is refused', async (t) => {
  const key = signingKey('RS256')
  const file = join(temporaryFolder(t), 'provider.pem')
  const publicPem = key.publicKey.export({ format: 'pem', type: 'spki' }) as string
  writeFileSync(file, publicPem)
  const app = await testApp(t, { AUTH: 'writes', JWT_PUBLIC_KEY: file, JWT_ALGORITHMS: 'RS256' })
  assert.equal((await create(app, sign(key))).statusCode, 201)
  assert.equal((await create(app, createSigner({ key: publicPem, algorithm: 'HS256' })({ sub: 'alice' }))).statusCode, 401)
  assert.equal((await create(app, sign(signingKey('RS256')))).statusCode, 401, 'another key')
})
