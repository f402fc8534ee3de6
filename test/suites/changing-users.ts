/** Changing and erasing users, on one database: run by test/app/ on each backend and by test/system/pgbouncer.test.ts behind PgBouncer. */
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import type { FastifyInstance } from 'fastify'
import { createSigner } from 'fast-jwt'
import { captureLogs, postJson, testApp, testAppOn, type TestDatabase } from '../helpers.js'

const ada = { name: 'Ada', email: 'ada@example.com' }

export function patch (app: FastifyInstance, url: string, body: unknown, headers: Record<string, string> = {}) {
  return app.inject({
    method: 'PATCH',
    url,
    payload: typeof body === 'string' ? body : JSON.stringify(body),
    headers: { 'content-type': 'application/merge-patch+json', ...headers }
  })
}

export const remove = (app: FastifyInstance, url: string, headers: Record<string, string> = {}) => app.inject({ method: 'DELETE', url, headers })

export function changingUsersSuite (database: TestDatabase): void {
  describe(`users changed and erased in ${database.name}`, { skip: database.skip }, () => {
    test('PATCH /users/{id} sets the fields of a merge patch and answers the user as GET shows it, with its new ETag', async (t) => {
      const app = await testAppOn(t, database)
      const created = await postJson(app, '/users', ada)
      assert.equal(created.headers.etag, '"1.1"')
      const renamed = await patch(app, '/users/1', { name: 'Ada Lovelace' })
      assert.equal(renamed.statusCode, 200)
      assert.deepEqual(renamed.json(), { id: '1', name: 'Ada Lovelace' })
      const read = await app.inject('/users/1')
      assert.deepEqual(read.json(), renamed.json())
      assert.equal(read.headers.etag, renamed.headers.etag)
      assert.notEqual(renamed.headers.etag, created.headers.etag)

      // application/json is taken as well; the email is not shown, but its change makes a new ETag.
      const moved = await app.inject({ method: 'PATCH', url: '/users/1', payload: { email: 'ada@example.org' } })
      assert.equal(moved.statusCode, 200)
      assert.deepEqual(moved.json(), renamed.json())
      assert.notEqual(moved.headers.etag, renamed.headers.etag)
      assert.equal((await app.inject('/users/1')).headers.etag, moved.headers.etag)
    })

    test('PATCH /users/{id} refuses null, unknown properties and bodies that are not objects, changing nothing; {} changes nothing', async (t) => {
      const app = await testAppOn(t, database)
      await postJson(app, '/users', ada)
      const before = await app.inject('/users/1')
      for (const [body, error] of [
        [{ name: null }, 'body/name must be string'],
        [{ email: null }, 'body/email must be string'],
        [{ name: 'Grace', nickname: 'G' }, 'body must NOT have additional property "nickname"'],
        [{ id: 2 }, 'body must NOT have additional property "id"'],
        [{ email: 'not an email' }, 'body/email must match format "email"'],
        ['["Grace"]', 'body must be object'],
        ['"Grace"', 'body must be object']
      ] as const) {
        const refused = await patch(app, '/users/1', body)
        assert.equal(refused.statusCode, 400, JSON.stringify(body))
        assert.equal(refused.json().error, error)
      }
      const empty = await patch(app, '/users/1', {})
      assert.equal(empty.statusCode, 200)
      assert.deepEqual(empty.json(), before.json())
      assert.equal(empty.headers.etag, before.headers.etag)
      assert.equal((await app.inject('/users/1')).headers.etag, before.headers.etag, 'nothing was written')
    })

    test('a merge patch is a body only PATCH takes: POST /users refuses it with 415', async (t) => {
      const app = await testAppOn(t, database)
      const refused = await app.inject({ method: 'POST', url: '/users', payload: JSON.stringify(ada), headers: { 'content-type': 'application/merge-patch+json' } })
      assert.equal(refused.statusCode, 415)
      assert.equal((await app.inject('/users')).headers['x-total-count'], '0')
    })

    test('PATCH and DELETE of a user that is not there, or of an id in another spelling, answer 404', async (t) => {
      const app = await testAppOn(t, database)
      await postJson(app, '/users', ada)
      for (const url of ['/users/2', '/users/01', '/users/1.0', '/users/abc', '/users/99999999999']) {
        assert.equal((await patch(app, url, { name: 'Grace' })).statusCode, 404, url)
        assert.equal((await remove(app, url)).statusCode, 404, url)
        // If-Match does not turn a missing user into a 412 (RFC 9110 §13.2.1).
        assert.equal((await remove(app, url, { 'if-match': '*' })).statusCode, 404, url)
      }
      assert.deepEqual((await app.inject('/users/1')).json(), { id: '1', name: 'Ada' })
    })

    test('If-Match: the current ETag, one of a list, or * applies a change; any other tag is 412 and changes nothing', async (t) => {
      const app = await testAppOn(t, database)
      await postJson(app, '/users', ada)
      await postJson(app, '/users', { name: 'Grace', email: 'grace@example.com' })
      const first = await patch(app, '/users/1', { name: 'Ada 2' }, { 'if-match': '"1.1"' })
      assert.equal(first.statusCode, 200)
      assert.equal(first.headers.etag, '"1.2"')
      // Compared byte for byte: the same numbers written otherwise are other tags.
      for (const stale of ['"1.1"', '"1.3"']) {
        const refused = await patch(app, '/users/1', { name: 'Lost' }, { 'if-match': stale })
        assert.equal(refused.statusCode, 412, stale)
        assert.deepEqual(refused.json(), { error: 'The user has changed since the ETag in If-Match: read it again, then retry', code: 'precondition_failed' })
        assert.equal((await remove(app, '/users/1', { 'if-match': stale })).statusCode, 412, stale)
      }
      // No tag of this user at all: the message says so, rather than that the user changed.
      for (const foreign of ['""', 'W/"1.2"', '"2.1"', 'garbage', '"01.2"', '"1.02"', '"1.2.0"', '"1.2e0"']) {
        const refused = await patch(app, '/users/1', { name: 'Lost' }, { 'if-match': foreign })
        assert.equal(refused.statusCode, 412, foreign)
        assert.deepEqual(refused.json(), { error: 'If-Match names no ETag of this user: read it, then send the ETag it answers with (or *)', code: 'etag_not_of_user' }, foreign)
        assert.equal((await remove(app, '/users/1', { 'if-match': foreign })).json().code, 'etag_not_of_user', foreign)
      }
      assert.deepEqual((await app.inject('/users/1')).json(), { id: '1', name: 'Ada 2' }, 'nothing changed')
      assert.equal((await patch(app, '/users/1', { name: 'Ada 3' }, { 'if-match': '"1.1", "1.2"' })).statusCode, 200)
      assert.equal((await patch(app, '/users/1', { name: 'Ada 4' }, { 'if-match': '*' })).statusCode, 200)
      assert.equal((await patch(app, '/users/1', {}, { 'if-match': '"1.1"' })).statusCode, 412, 'an empty patch checks If-Match too')
      assert.equal((await remove(app, '/users/1', { 'if-match': '"1.4"' })).statusCode, 204)
      assert.deepEqual((await app.inject('/users')).json(), [{ id: 2, name: 'Grace' }])
    })

    test('of clients on two instances that PATCH with the same ETag at once, exactly one succeeds', async (t) => {
      const url = await database.url(t)
      const instances = [await testApp(t, { DATABASE_URL: url }), await testApp(t, { DATABASE_URL: url })]
      await postJson(instances[0]!, '/users', ada)
      const answers = await Promise.all(Array.from({ length: 8 }, (_, client) =>
        patch(instances[client % 2]!, '/users/1', { name: `Client ${client}` }, { 'if-match': '"1.1"' })))
      const statuses = answers.map((answer) => answer.statusCode).sort()
      assert.deepEqual(statuses, [200, 412, 412, 412, 412, 412, 412, 412])
      const winner = answers.find((answer) => answer.statusCode === 200)!
      assert.deepEqual((await instances[1]!.inject('/users/1')).json(), winner.json())
      assert.equal(winner.headers.etag, '"1.2"')
    })

    test('REQUIRE_IF_MATCH=on answers PATCH and DELETE without If-Match with 428, writing nothing', async (t) => {
      const app = await testAppOn(t, database, { REQUIRE_IF_MATCH: 'on' })
      await postJson(app, '/users', ada)
      const unconditional = await patch(app, '/users/1', { name: 'Grace' })
      assert.equal(unconditional.statusCode, 428)
      assert.deepEqual(unconditional.json(), { error: 'If-Match is required: send the ETag of the user as last read (or *)', code: 'precondition_required' })
      assert.equal((await remove(app, '/users/1')).statusCode, 428)
      assert.deepEqual((await app.inject('/users/1')).json(), { id: '1', name: 'Ada' })
      assert.equal((await patch(app, '/users/1', { name: 'Grace' }, { 'if-match': '"1.1"' })).statusCode, 200)
      assert.equal((await remove(app, '/users/1', { 'if-match': '*' })).statusCode, 204)
    })

    test('DELETE /users/{id} answers 204; the user is then 404, off every page and the total, and deleting again is 404', async (t) => {
      const app = await testAppOn(t, database)
      for (const name of ['Ada', 'Grace', 'Edsger', 'Barbara']) await postJson(app, '/users', { name, email: `${name}@example.com` })
      const deleted = await remove(app, '/users/2')
      assert.equal(deleted.statusCode, 204)
      assert.equal(deleted.body, '')
      assert.equal((await app.inject('/users/2')).statusCode, 404)
      assert.equal((await patch(app, '/users/2', { name: 'Back' })).statusCode, 404)
      assert.equal((await remove(app, '/users/2')).statusCode, 404)

      const all = await app.inject('/users')
      assert.deepEqual(all.json(), [{ id: 1, name: 'Ada' }, { id: 3, name: 'Edsger' }, { id: 4, name: 'Barbara' }])
      assert.equal(all.headers['x-total-count'], '3')
      // Keyset pages around the gap: after 1 starts at 3, and a page of two ends at 3, linking after it.
      assert.deepEqual((await app.inject('/users?after=1&limit=1')).json(), [{ id: 3, name: 'Edsger' }])
      const firstPage = await app.inject('/users?limit=2')
      assert.deepEqual(firstPage.json(), [{ id: 1, name: 'Ada' }, { id: 3, name: 'Edsger' }])
      assert.match(String(firstPage.headers.link), /after=3>; rel="next"/)
      assert.deepEqual((await app.inject('/users?limit=2&offset=1')).json(), [{ id: 3, name: 'Edsger' }, { id: 4, name: 'Barbara' }])
      // Ids are never given again.
      assert.equal((await postJson(app, '/users', ada)).headers.location, '/users/5')
      assert.equal((await app.inject('/users')).headers['x-total-count'], '4')
    })

    test('a retry with an Idempotency-Key answers as the first time, and stores nothing, after the user is changed or deleted', async (t) => {
      const app = await testAppOn(t, database)
      const create = (body: unknown, key: string) => app.inject({ method: 'POST', url: '/users', payload: body as object, headers: { 'idempotency-key': key } })
      const first = await create(ada, 'key-1')
      assert.equal(first.statusCode, 201)
      await patch(app, '/users/1', { name: 'Ada Lovelace' })

      const afterChange = await create(ada, 'key-1')
      assert.equal(afterChange.statusCode, 201)
      assert.equal(afterChange.body, first.body)
      assert.equal(afterChange.headers['idempotent-replayed'], 'true')
      assert.equal(afterChange.headers.etag, first.headers.etag)
      // The first answer's ETag is stale: a change based on it is refused.
      assert.equal((await patch(app, '/users/1', { name: 'Lost' }, { 'if-match': String(afterChange.headers.etag) })).statusCode, 412)

      assert.equal((await remove(app, '/users/1')).statusCode, 204)
      const afterDelete = await create(ada, 'key-1')
      assert.equal(afterDelete.statusCode, 201)
      assert.equal(afterDelete.headers['idempotent-replayed'], 'true')
      assert.equal(afterDelete.headers.location, '/users/1')
      assert.equal((await app.inject('/users/1')).statusCode, 404, 'the deleted user stays deleted')
      // Nothing of the erased user's request is kept to tell another body apart: the key still makes no user.
      const otherBody = await create({ name: 'Grace', email: 'grace@example.com' }, 'key-1')
      assert.equal(otherBody.statusCode, 201)
      assert.equal(otherBody.headers['idempotent-replayed'], 'true')
      assert.equal(otherBody.headers.location, '/users/1')
      assert.equal((await app.inject('/users')).headers['x-total-count'], '0', 'no user was made again')
      assert.equal((await create(ada, 'key-2')).headers.location, '/users/2')
    })

    test('with AUTH=writes, PATCH and DELETE need a token as POST does, and are counted by route in the metrics', async (t) => {
      const app = await testAppOn(t, database, { AUTH: 'writes', JWT_SECRET: 'a-secret-of-thirty-two-bytes-at-least!' })
      const token = createSigner({ key: 'a-secret-of-thirty-two-bytes-at-least!', expiresIn: 300_000 })({ sub: 'tester' })
      await app.inject({ method: 'POST', url: '/users', payload: ada, headers: { authorization: `Bearer ${token}` } })
      assert.equal((await patch(app, '/users/1', { name: 'Grace' })).statusCode, 401)
      assert.equal((await remove(app, '/users/1')).statusCode, 401)
      assert.equal((await patch(app, '/users/1', { name: 'Grace' }, { authorization: `Bearer ${token}` })).statusCode, 200)
      assert.equal((await remove(app, '/users/1', { authorization: `Bearer ${token}` })).statusCode, 204)
      const metrics = (await app.inject('/metrics')).body
      for (const [method, status] of [['PATCH', 401], ['PATCH', 200], ['DELETE', 401], ['DELETE', 204]]) {
        assert.match(metrics, new RegExp(`http_requests_total\\{method="${method}",route="/users/:id",status_code="${status}"\\} 1`), `${method} ${status}`)
      }
    })

    test('no log line, at any level, holds a user\'s name or email through its creation, change and erasure', async (t) => {
      const logs = captureLogs()
      const app = await testAppOn(t, database, { LOG_LEVEL: 'trace' }, logs.stream)
      await postJson(app, '/users', { name: 'Zebulon Quixote', email: 'zq@erase.example' })
      await patch(app, '/users/1', { name: 'Xavier Quixote', email: 'xq@erase.example' })
      await remove(app, '/users/1')
      assert.ok(logs.lines.length > 0)
      const logged = JSON.stringify(logs.lines) + (await app.inject('/metrics')).body
      for (const personal of ['Zebulon', 'Xavier', 'zq@erase', 'xq@erase']) assert.ok(!logged.includes(personal), personal)
    })
  })
}
