/** `USER_OWNERSHIP=on`: a user is changed or erased only by the token that stored it, or by an admin. */
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { createSigner } from 'fast-jwt'
import type { FastifyInstance } from 'fastify'
import { testApp, testConfig, testDatabases } from '../helpers.js'

const secret = 'an-ownership-secret-of-at-least-32-bytes'
// Minted as the file loads, so valid for as long as its tests may take on a busy machine.
const bearer = (claims: Record<string, unknown>) => ({ authorization: `Bearer ${createSigner({ key: secret, expiresIn: 900_000 })(claims)}` })
const alice = bearer({ sub: 'alice', iss: 'https://idp.example' })
const mallory = bearer({ sub: 'mallory', iss: 'https://idp.example' })
const admin = bearer({ sub: 'ops', iss: 'https://idp.example', scope: 'users:read users:admin' })

const create = async (app: FastifyInstance, headers: Record<string, string>, name: string, extra: Record<string, string> = {}) => {
  const answer = await app.inject({ method: 'POST', url: '/users', payload: { name, email: `${name.toLowerCase()}@example.com` }, headers: { ...headers, ...extra } })
  assert.equal(answer.statusCode, 201, answer.body)
  return Number(answer.headers.location!.split('/').at(-1))
}
const patch = (app: FastifyInstance, id: number, headers: Record<string, string>, name: string, ifMatch?: string) =>
  app.inject({ method: 'PATCH', url: `/users/${id}`, payload: { name }, headers: { ...headers, ...(ifMatch !== undefined && { 'if-match': ifMatch }) } })
const erase = (app: FastifyInstance, id: number, headers: Record<string, string>) => app.inject({ method: 'DELETE', url: `/users/${id}`, headers })
const nameOf = async (app: FastifyInstance, id: number) => (await app.inject(`/users/${id}`)).json().name

const refusal = { error: 'This user was stored by another token: only that token, or one granting users:admin, may change or erase it', code: 'not_owner' }

for (const database of testDatabases) {
  describe(`owned users on ${database.name}`, { skip: database.skip }, () => {
    test('only the token that stored a user, or one granting users:admin, may change or erase it; the refusal is 403 and writes nothing', async (t) => {
      const app = await testApp(t, { DATABASE_URL: await database.url(t), AUTH: 'writes', JWT_SECRET: secret, USER_OWNERSHIP: 'on' })
      const id = await create(app, alice, 'Alice')
      for (const answer of [await patch(app, id, mallory, 'Mallory'), await erase(app, id, mallory)]) {
        assert.equal(answer.statusCode, 403)
        assert.deepEqual(answer.json(), refusal)
        assert.equal(answer.headers['www-authenticate'], 'Bearer realm="api", error="insufficient_scope", scope="users:admin"')
      }
      assert.equal(await nameOf(app, id), 'Alice', 'nothing was written')
      assert.equal((await patch(app, id, bearer({ sub: 'alice', iss: 'https://other.example' }), 'X')).statusCode, 403, 'the same subject from another issuer is another token')
      assert.equal((await patch(app, id, bearer({ sub: 'alice' }), 'X')).statusCode, 403, 'and so is one without an issuer')
      assert.equal((await patch(app, id, alice, 'Alice L')).statusCode, 200, 'the owner changes it')
      assert.equal((await patch(app, id, admin, 'Alice M')).statusCode, 200, 'an admin changes it')
      assert.equal((await erase(app, id, admin)).statusCode, 204, 'an admin erases it')

      const second = await create(app, alice, 'Second')
      assert.equal((await erase(app, second, alice)).statusCode, 204, 'the owner erases it')
    })

    test('the owner is checked before If-Match, after the user: another\'s stale ETag is 403, the owner\'s 412, a missing user 404', async (t) => {
      const app = await testApp(t, { DATABASE_URL: await database.url(t), AUTH: 'writes', JWT_SECRET: secret, USER_OWNERSHIP: 'on' })
      const id = await create(app, alice, 'Alice')
      assert.equal((await patch(app, id, mallory, 'Mallory', `"${id}.9"`)).statusCode, 403)
      assert.equal((await patch(app, id, mallory, 'Alice', `"${id}.1"`)).statusCode, 403, 'a change to what it already is, too')
      assert.equal((await app.inject({ method: 'PATCH', url: `/users/${id}`, payload: {}, headers: mallory })).statusCode, 403, 'an empty patch, too')
      assert.equal((await patch(app, id, alice, 'Alice', `"${id}.9"`)).statusCode, 412)
      assert.equal((await patch(app, 999, mallory, 'Mallory')).statusCode, 404)
      assert.equal((await app.inject({ method: 'PATCH', url: `/users/${id}`, payload: {}, headers: alice })).statusCode, 200)
    })

    test('a user stored under an Idempotency-Key is owned by its token, and a replay by another caller creates nothing of theirs', async (t) => {
      const app = await testApp(t, { DATABASE_URL: await database.url(t), AUTH: 'writes', JWT_SECRET: secret, USER_OWNERSHIP: 'on' })
      const id = await create(app, alice, 'Alice', { 'idempotency-key': 'k-1' })
      assert.equal(await create(app, alice, 'Alice', { 'idempotency-key': 'k-1' }), id, 'a replay')
      assert.equal((await patch(app, id, mallory, 'Mallory')).statusCode, 403)
      assert.equal((await patch(app, id, alice, 'Alice L')).statusCode, 200)
    })

    test('a user stored before the setting, or without ownership, has no owner: only an admin changes it then; without the setting anyone may', async (t) => {
      const url = await database.url(t)
      const open = await testApp(t, { DATABASE_URL: url, AUTH: 'writes', JWT_SECRET: secret })
      const id = await create(open, alice, 'Alice')
      assert.equal((await patch(open, id, mallory, 'Mallory')).statusCode, 200, 'without USER_OWNERSHIP any write token changes any user')
      await open.close()
      const owned = await testApp(t, { DATABASE_URL: url, AUTH: 'writes', JWT_SECRET: secret, USER_OWNERSHIP: 'on' })
      assert.equal((await patch(owned, id, alice, 'Alice')).statusCode, 403, 'its creator is not its owner')
      assert.equal((await erase(owned, id, mallory)).statusCode, 403)
      assert.equal((await patch(owned, id, admin, 'Alice')).statusCode, 200)
    })
  })
}

test('USER_OWNERSHIP=on needs tokens, and the document declares the 403 of PATCH and DELETE', async (t) => {
  assert.throws(() => testConfig({ USER_OWNERSHIP: 'on' }), /^ConfigError: USER_OWNERSHIP=on needs AUTH=writes or AUTH=all/)
  const document = (await (await testApp(t, { AUTH: 'writes', JWT_SECRET: secret, USER_OWNERSHIP: 'on' })).inject('/documentation/json')).json()
  for (const method of ['patch', 'delete']) assert.match(document.paths['/users/{id}'][method].responses['403'].description, /USER_OWNERSHIP=on/)
})
