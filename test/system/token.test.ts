import assert from 'node:assert/strict'
import { test } from 'node:test'
import { rawRequest } from '../helpers.js'
import { runScript, startService } from '../process.js'

const secret = 'a-test-secret-that-is-long-enough-for-hs256'
const ada = { name: 'Ada', email: 'ada@example.com' }

test('npm run token prints a token that a running service with the same secret accepts', async (t) => {
  const minted = await runScript('cli/token.ts', { JWT_SECRET: secret }, ['--sub', 'ci-bot', '--expires', '5m'])
  assert.equal(minted.code, 0, minted.stderr)
  const printed = minted.stdout.trim()
  assert.match(printed, /^[\w-]+\.[\w-]+\.[\w-]+$/)
  const claims = JSON.parse(Buffer.from(printed.split('.')[1] as string, 'base64url').toString())
  assert.equal(claims.sub, 'ci-bot')
  assert.ok(claims.exp - claims.iat === 300)

  const service = await startService(t, { DATABASE_URL: 'sqlite::memory:', AUTH: 'writes', JWT_SECRET: secret })
  const body = JSON.stringify(ada)
  const headers = { 'content-type': 'application/json' }
  assert.equal((await rawRequest(service.port, { method: 'POST', path: '/users', body, headers })).statusCode, 401)
  const accepted = await rawRequest(service.port, { method: 'POST', path: '/users', body, headers: { ...headers, authorization: `Bearer ${printed}` } })
  assert.equal(accepted.statusCode, 201)
})

test('npm run token -- --scope mints a token whose scopes the service reads with AUTH_SCOPES=on', async (t) => {
  const mint = async (scope: string) => (await runScript('cli/token.ts', { JWT_SECRET: secret }, ['--sub', 'ci-bot', '--scope', scope])).stdout.trim()
  const [reader, writer] = [await mint('users:read'), await mint('users:read users:write')]
  assert.equal(JSON.parse(Buffer.from(writer.split('.')[1] as string, 'base64url').toString()).scope, 'users:read users:write')
  const service = await startService(t, { DATABASE_URL: 'sqlite::memory:', AUTH: 'all', AUTH_SCOPES: 'on', JWT_SECRET: secret })
  const create = (token: string) => rawRequest(service.port, {
    method: 'POST', path: '/users', body: JSON.stringify(ada), headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` }
  })
  assert.equal((await create(reader)).statusCode, 403)
  assert.equal((await create(writer)).statusCode, 201)
  assert.equal((await rawRequest(service.port, { path: '/users/1', headers: { authorization: `Bearer ${reader}` } })).statusCode, 200)
})

test('npm run token without a secret, a subject or a valid duration exits 1 with one clear line', async () => {
  const cases: Array<[Record<string, string>, string[], RegExp]> = [
    [{}, ['--sub', 'x'], /^Configuration error: JWT_SECRET is not set/],
    [{ JWT_SECRET: secret }, [], /^--sub is required/],
    [{ JWT_SECRET: secret }, ['--sub', 'x', '--expires', 'soon'], /^--expires must look like 30s, 15m, 1h or 7d/],
    [{ JWT_SECRET: 'short' }, ['--sub', 'x'], /^Configuration error: JWT_SECRET must be at least 32 bytes/],
    [{ JWT_SECRET: 'a'.repeat(40) }, ['--sub', 'x'], /^Configuration error: JWT_SECRET must not be one character repeated/],
    [{ JWT_SECRET: secret }, ['--sub', 'x', '--expires', '2d'], /^--expires 2d is longer than the service accepts \(JWT_MAX_LIFETIME=24h\)/],
    [{ JWT_SECRET: secret, JWT_MAX_LIFETIME: '1h' }, ['--sub', 'x', '--expires', '2h'], /^--expires 2h is longer than the service accepts \(JWT_MAX_LIFETIME=1h\)/]
  ]
  await Promise.all(cases.map(async ([env, args, message]) => {
    const result = await runScript('cli/token.ts', env, args)
    assert.equal(result.code, 1, result.stderr)
    assert.equal(result.stdout, '')
    assert.equal(result.stderr.trim().split('\n').length, 1, result.stderr)
    assert.match(result.stderr, message)
  }))
})
