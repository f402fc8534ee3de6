/** Storing, listing and looking up users, on one database: run by test/app/ on each backend and by test/system/pgbouncer.test.ts behind PgBouncer. */
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { sql } from 'kysely'
import { Migrator } from 'kysely/migration'
import { createDatabase } from '../../src/storage/database.js'
import { migrations } from '../../src/storage/migrate.js'
import { captureLogs, postJson, testApp, testAppOn, testConfig, type TestDatabase } from '../helpers.js'

const ada = { name: 'Ada', email: 'ada@example.com' }

export function usersSuite (database: TestDatabase): void {
  describe(`users stored in ${database.name}`, { skip: database.skip }, () => {
    test('POST /users stores the user and answers 201 with the body exactly as sent', async (t) => {
      const app = await testAppOn(t, database)
      const raw = '{"email":"ada@example.com","name":"Ada","team":{"roles":["admin"],"since":1843},"note":null}'
      const response = await app.inject({ method: 'POST', url: '/users', payload: raw, headers: { 'content-type': 'application/json' } })
      assert.equal(response.statusCode, 201)
      assert.equal(response.body, raw)
      assert.equal(response.headers.location, '/users/1')

      const stored = await app.inject('/users/1')
      assert.deepEqual(stored.json(), { id: '1', name: 'Ada' })
    })

    test('POST /users answers with the body byte for byte: key order, number spelling, white space, deep nesting', async (t) => {
      const app = await testAppOn(t, database)
      // As deep as a body may be: the object around it is one more level.
      const deep = '{"a":'.repeat(999) + '1' + '}'.repeat(999)
      const bodies = [
        '{ "2": "two", "1": "one", "name": "Ada",\n  "email": "ada@example.com", "big": 1e400, "float": 1.0, "exp": 1E2 }',
        `{"name":"Grace","email":"grace@example.com","nested":${deep}}`,
        '{"name":"Edsger \\u00e9 \u00e9","email":"edsger@example.com"}'
      ]
      for (const [index, raw] of bodies.entries()) {
        const response = await app.inject({ method: 'POST', url: '/users', payload: raw, headers: { 'content-type': 'application/json' } })
        assert.equal(response.statusCode, 201, raw.slice(0, 80))
        assert.equal(response.rawPayload.toString('utf8'), raw)
        assert.match(String(response.headers['content-type']), /^application\/json/)
        assert.equal(response.headers.location, `/users/${index + 1}`)
      }
    })

    test('POST /users refuses, storing nothing, a body that is not UTF-8 and a name the databases cannot store (NUL, an unpaired surrogate)', async (t) => {
      const app = await testAppOn(t, database)
      const notUtf8 = Buffer.concat([Buffer.from('{"name":"Ada'), Buffer.from([0xff, 0xfe]), Buffer.from('","email":"ada@example.com"}')])
      const invalid = await app.inject({ method: 'POST', url: '/users', payload: notUtf8, headers: { 'content-type': 'application/json' } })
      assert.equal(invalid.statusCode, 400)
      assert.deepEqual(invalid.json(), { error: 'Body is not valid JSON: it is not UTF-8', code: 'json_not_utf8' })
      // A NUL, and the escapes of a surrogate without its partner (a string cut inside an
      // emoji), which would be stored as U+FFFD: the user would not get back what was sent.
      const unstorable = ['Ada\\u0000Lovelace', 'Ada \\ud83d', '\\ude00 Ada', 'Ada \\ude00\\ud83d']
      for (const name of unstorable) {
        const refused = await app.inject({ method: 'POST', url: '/users', payload: `{"name":"${name}","email":"ada@example.com"}`, headers: { 'content-type': 'application/json' } })
        assert.equal(refused.statusCode, 400, name)
        assert.equal(refused.json().error, 'body/name must not contain the NUL character (U+0000) or an unpaired surrogate (U+D800–U+DFFF)')
      }
      assert.equal((await app.inject('/users')).headers['x-total-count'], '0', 'nothing was stored')
      // A surrogate pair, escaped or not, is one character, stored and given back as sent.
      for (const name of ['Ada \\ud83d\\ude00', 'Ada \u{1F600}']) {
        const created = await app.inject({ method: 'POST', url: '/users', payload: `{"name":"${name}","email":"ada@example.com"}`, headers: { 'content-type': 'application/json' } })
        assert.equal(created.statusCode, 201, name)
        assert.equal((await app.inject(String(created.headers.location))).json().name, 'Ada \u{1F600}')
      }
    })

    test('POST /users gives each user the next integer id', async (t) => {
      const app = await testAppOn(t, database)
      const locations = []
      for (const name of ['Ada', 'Grace', 'Edsger']) {
        locations.push((await postJson(app, '/users', { name, email: `${name.toLowerCase()}@example.com` })).headers.location)
      }
      assert.deepEqual(locations, ['/users/1', '/users/2', '/users/3'])
    })

    test('once every id up to 2,147,483,647 is taken, POST /users answers 507 and stores nothing, on either database; reads go on', async (t) => {
      const url = await database.url(t)
      const logs = captureLogs()
      const app = await testApp(t, { DATABASE_URL: url, LOG_LEVEL: 'error' }, logs.stream)
      assert.equal((await postJson(app, '/users', ada)).statusCode, 201)
      const config = testConfig({ DATABASE_URL: url }).database
      const { db } = await createDatabase(config)
      await (config.dialect === 'sqlite'
        ? sql`update sqlite_sequence set seq = 2147483646 where name = 'users'`
        : sql`select setval(pg_get_serial_sequence('users', 'id'), 2147483646)`).execute(db)
      await db.destroy()

      const last = await postJson(app, '/users', { name: 'Grace', email: 'grace@example.com' })
      assert.equal(last.headers.location, '/users/2147483647')
      for (const headers of [{}, { 'idempotency-key': 'one-more' }]) {
        const refused = await app.inject({ method: 'POST', url: '/users', payload: { name: 'Edsger', email: 'edsger@example.com' }, headers })
        assert.equal(refused.statusCode, 507)
        assert.deepEqual(refused.json(), { error: 'Every user id is taken', code: 'user_ids_exhausted' })
      }
      const list = await app.inject('/users')
      assert.deepEqual(list.json().map((user: { id: number }) => user.id), [1, 2147483647])
      assert.equal(list.headers['x-total-count'], '2')
      assert.equal((await app.inject('/users/2147483647')).json().name, 'Grace')
      assert.ok(logs.lines.some((line) => line.msg === 'no user ids left: no more users can be stored'))
    })

    test('concurrent POST /users each get their own id and all appear', async (t) => {
      const app = await testAppOn(t, database)
      const responses = await Promise.all(Array.from({ length: 50 }, (_, i) =>
        postJson(app, '/users', { name: `user${i}`, email: `user${i}@example.com` })))
      const ids = new Set(responses.map((response) => response.headers.location))
      assert.equal(ids.size, 50)
      const list = await app.inject('/users?limit=1000')
      assert.equal(list.json().length, 50)
      assert.equal(list.headers['x-total-count'], '50')
    })

    test('POST /users requires name and email, and checks their types and format', async (t) => {
      const app = await testAppOn(t, database)
      const cases: Array<[unknown, string]> = [
        [{ email: 'ada@example.com' }, "body must have required property 'name'"],
        [{ name: 'Ada' }, "body must have required property 'email'"],
        [{ name: 'Ada', email: 'not-an-email' }, 'body/email must match format "email"'],
        [{ name: 123, email: 'ada@example.com' }, 'body/name must be string'],
        [{ name: '', email: 'ada@example.com' }, 'body/name must NOT have fewer than 1 characters'],
        [[ada], 'body must be object'],
        ['Ada', 'body must be object']
      ]
      for (const [body, error] of cases) {
        const response = await postJson(app, '/users', body)
        assert.equal(response.statusCode, 400, JSON.stringify(body))
        assert.equal(response.json().error, error)
      }
      assert.equal((await app.inject('/users')).headers['x-total-count'], '0', 'nothing was stored')
    })

    test('email is an RFC 5321 mailbox, as format "email" defines it: quoted local parts, any domain, address literals; non-ASCII is refused', async (t) => {
      const app = await testAppOn(t, database)
      const mailboxes = ['q@test', 'a@localhost', '"q"@example.com', '"john doe"@example.com', '"a@b"@example.com', 'a@[127.0.0.1]',
        'a@[IPv6:2001:db8::1]', 'user+tag@sub.example.com', "o'hara@example.com", 'a@xn--bcher-kva.example']
      for (const email of mailboxes) {
        assert.equal((await postJson(app, '/users', { name: 'Ada', email })).statusCode, 201, email)
        assert.equal((await postJson(app, '/users/507f1f77bcf86cd799439011', { name: 'Ada', email })).statusCode, 200, email)
      }
      const notMailboxes = ['plain', 'a@', '@example.com', 'a..b@example.com', '.a@example.com', 'a@-example.com', 'a@example..com',
        'a b@example.com', '"unterminated@example.com', 'a@[300.1.1.1]', 'a@[IPv6:zz]', 'jörg@example.com', 'jorg@exämple.com', '用户@例子.广告']
      for (const email of notMailboxes) {
        const response = await postJson(app, '/users', { name: 'Ada', email })
        assert.deepEqual([response.statusCode, response.json().error], [400, 'body/email must match format "email"'], email)
      }
      assert.equal((await app.inject('/users')).headers['x-total-count'], String(mailboxes.length))
    })

    test('GET /users lists stored users by ascending id, a page at a time, with X-Total-Count', async (t) => {
      const app = await testAppOn(t, database)
      assert.deepEqual((await app.inject('/users')).json(), [])
      for (let i = 1; i <= 5; i++) await postJson(app, '/users', { name: `user${i}`, email: `user${i}@example.com` })

      const all = await app.inject('/users')
      assert.equal(all.statusCode, 200)
      assert.equal(all.headers['x-total-count'], '5')
      assert.deepEqual(all.json().map((user: { id: number }) => user.id), [1, 2, 3, 4, 5])
      assert.deepEqual(all.json()[0], { id: 1, name: 'user1' })

      const page = await app.inject('/users?limit=2&offset=3')
      assert.deepEqual(page.json(), [{ id: 4, name: 'user4' }, { id: 5, name: 'user5' }])
      assert.equal(page.headers['x-total-count'], '5')

      const pastTheEnd = await app.inject('/users?offset=10')
      assert.deepEqual(pastTheEnd.json(), [])
      assert.equal(pastTheEnd.headers['x-total-count'], '5', 'the total, even on an empty page')
    })

    test('GET /users?after= gives the page after that id, and Link (next, first) walks the whole table', async (t) => {
      const app = await testAppOn(t, database)
      for (let i = 1; i <= 7; i++) await postJson(app, '/users', { name: `user${i}`, email: `user${i}@example.com` })
      const pages: number[][] = []
      let next: string | undefined = '/users?limit=3'
      while (next !== undefined) {
        const response: Awaited<ReturnType<typeof app.inject>> = await app.inject(next)
        assert.equal(response.statusCode, 200)
        assert.match(String(response.headers.link), /<\/users\?limit=3>; rel="first"/)
        assert.equal(response.headers['x-total-count'], '7')
        pages.push(response.json().map((user: { id: number }) => user.id))
        next = /<([^>]+)>; rel="next"/.exec(String(response.headers.link))?.[1]
      }
      assert.deepEqual(pages, [[1, 2, 3], [4, 5, 6], [7]], 'a short page has no next')
      assert.deepEqual((await app.inject('/users?after=5&limit=10')).json().map((user: { id: number }) => user.id), [6, 7])
      assert.deepEqual((await app.inject('/users?after=7')).json(), [])
      assert.equal((await app.inject('/users?offset=2&limit=2')).headers.link, '</users?limit=2&after=4>; rel="next", </users?limit=2>; rel="first"',
        'an offset page links on by id too')
      const both = await app.inject('/users?after=1&offset=2&limit=2')
      assert.equal(both.statusCode, 200, 'after and offset together: the offset counts from the after position')
      assert.deepEqual(both.json().map((user: { id: number }) => user.id), [4, 5])
    })

    test('X-Total-Count is kept by the database as users are added, and counts the users already stored when the count is introduced', async (t) => {
      const url = await database.url(t)
      const { db } = await createDatabase(url.startsWith('sqlite:') ? { dialect: 'sqlite', filename: url.slice('sqlite:'.length) } : { dialect: 'postgres', connectionString: url, poolSize: 2 })
      const dialect = url.startsWith('sqlite:') ? 'sqlite' : 'postgres'
      // On PostgreSQL, the migrator's tables in this test's own schema, as the service keeps them
      // (other tests' schemas share the database).
      const schema = dialect === 'postgres' ? (await sql<{ schema: string }>`select current_schema() as schema`.execute(db)).rows[0]!.schema : undefined
      const before = new Migrator({ db, provider: { getMigrations: async () => migrations(dialect) }, migrationTableSchema: schema })
      assert.equal((await before.migrateTo('2026-11-22-create-users')).error, undefined)
      await db.insertInto('users').values(Array.from({ length: 5 }, (_, i) => ({ name: `old${i}`, email: 'old@example.com' }))).execute()
      await db.destroy()

      const app = await testApp(t, { DATABASE_URL: url })
      assert.equal((await app.inject('/users')).headers['x-total-count'], '5')
      await Promise.all(Array.from({ length: 20 }, (_, i) => postJson(app, '/users', { name: `new${i}`, email: 'new@example.com' })))
      assert.equal((await app.inject('/users?limit=1')).headers['x-total-count'], '25')
    })

    test('GET /users/{id} and GET /users carry a strong ETag; If-None-Match with a current one is a 304 without a body; a new user changes the list\'s tag', async (t) => {
      const app = await testAppOn(t, database)
      await postJson(app, '/users', ada)
      const user = await app.inject('/users/1')
      const tag = String(user.headers.etag)
      assert.match(tag, /^"[^"]+"$/, 'strong: no W/')
      for (const ifNoneMatch of [tag, `"other", ${tag}`, `W/${tag}`, '*']) {
        const unchanged = await app.inject({ url: '/users/1', headers: { 'if-none-match': ifNoneMatch } })
        assert.deepEqual([unchanged.statusCode, unchanged.body, unchanged.headers.etag], [304, '', tag], ifNoneMatch)
      }
      assert.equal((await app.inject({ url: '/users/1', headers: { 'if-none-match': '"other"' } })).statusCode, 200)
      // HEAD too, with the length a 200 would have had, as a 304 may carry it.
      for (const url of ['/users/1', '/users?limit=1']) {
        const full = await app.inject({ method: 'HEAD', url })
        const unchanged = await app.inject({ method: 'HEAD', url, headers: { 'if-none-match': String(full.headers.etag) } })
        assert.deepEqual([unchanged.statusCode, unchanged.body, unchanged.headers.etag, unchanged.headers['content-length']],
          [304, '', full.headers.etag, full.headers['content-length']], `HEAD ${url}`)
      }
      assert.equal((await app.inject({ url: '/users/2', headers: { 'if-none-match': '*' } })).statusCode, 404, 'only a 200 is ever turned into a 304')

      const page = await app.inject('/users?limit=1')
      await postJson(app, '/users', { name: 'Grace', email: 'grace@example.com' })
      const after = await app.inject({ url: '/users?limit=1', headers: { 'if-none-match': String(page.headers.etag) } })
      assert.equal(after.statusCode, 200, 'the same first page, but the collection has grown')
      assert.equal(after.body, page.body)
      assert.notEqual(after.headers.etag, page.headers.etag)
      assert.equal((await app.inject({ url: '/users?limit=1', headers: { 'if-none-match': String(after.headers.etag) } })).statusCode, 304)
    })

    test('POST /users with an Idempotency-Key: a retry is answered as the first was and stores nothing; another body is a 422; a retry in flight a 409', async (t) => {
      const app = await testAppOn(t, database)
      const post = (key: string, body: object) => app.inject({
        method: 'POST', url: '/users', headers: { 'content-type': 'application/json', 'idempotency-key': key }, payload: JSON.stringify(body)
      })
      const first = await post('key-1', ada)
      assert.deepEqual([first.statusCode, first.headers.location, first.headers['idempotent-replayed']], [201, '/users/1', undefined])
      const retry = await post('key-1', ada)
      assert.deepEqual([retry.statusCode, retry.headers.location, retry.headers['idempotent-replayed'], retry.body], [201, '/users/1', 'true', first.body])
      const other = await post('key-1', { ...ada, name: 'Grace' })
      assert.deepEqual([other.statusCode, other.json()], [422, { error: 'This Idempotency-Key was used with a different request body', code: 'idempotency_key_reused' }])
      // Neither the retry nor the refused body took an id (an insert PostgreSQL refuses would).
      assert.equal((await post('key-2', ada)).headers.location, '/users/2', 'another key is the next user')
      const together = await Promise.all([post('key-3', ada), post('key-3', ada)])
      assert.deepEqual(together.map((response) => response.statusCode).sort(), [201, 409])
      assert.equal(together.find((response) => response.statusCode === 201)!.headers.location, '/users/3')
      assert.equal((await post('key-3', ada)).headers.location, '/users/3')
      assert.equal((await app.inject('/users')).headers['x-total-count'], '3')
      const bad = await app.inject({ method: 'POST', url: '/users', headers: { 'content-type': 'application/json', 'idempotency-key': 'has space' }, payload: JSON.stringify(ada) })
      assert.equal(bad.statusCode, 400)
    })

    test('Idempotency-Key: kept across restarts and shared by instances on one database; two instances retrying together store one user', async (t) => {
      const url = await database.url(t)
      const post = (app: Awaited<ReturnType<typeof testApp>>, key: string) => app.inject({
        method: 'POST', url: '/users', headers: { 'content-type': 'application/json', 'idempotency-key': key }, payload: JSON.stringify(ada)
      })
      const before = await testApp(t, { DATABASE_URL: url })
      assert.equal((await post(before, 'before-restart')).statusCode, 201)
      await before.close()

      const [one, two] = [await testApp(t, { DATABASE_URL: url }), await testApp(t, { DATABASE_URL: url })]
      const replayed = await post(two, 'before-restart')
      assert.deepEqual([replayed.statusCode, replayed.headers.location, replayed.headers['idempotent-replayed']], [201, '/users/1', 'true'])

      const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => post(i % 2 === 0 ? one : two, 'together')))
      const created = answers.filter((answer) => answer.statusCode === 201)
      assert.ok(created.length >= 2, 'each instance answers at least its own first')
      assert.equal(new Set(created.map((answer) => answer.headers.location)).size, 1, 'one user, one Location')
      assert.notEqual(created[0]!.headers.location, '/users/1')
      assert.ok(answers.every((answer) => [201, 409].includes(answer.statusCode)), answers.map((answer) => answer.statusCode).join())
      assert.equal((await one.inject('/users')).headers['x-total-count'], '2')
    })

    test('Idempotency-Key: once IDEMPOTENCY_KEY_TTL has passed, the key is forgotten and a request with it creates a new user', async (t) => {
      // Long enough that the second request comes within it on a busy machine; the clock is moved past it.
      const app = await testAppOn(t, database, { IDEMPOTENCY_KEY_TTL: '1m' })
      const post = () => app.inject({ method: 'POST', url: '/users', headers: { 'content-type': 'application/json', 'idempotency-key': 'short-lived' }, payload: JSON.stringify(ada) })
      assert.equal((await post()).headers.location, '/users/1')
      assert.equal((await post()).headers.location, '/users/1')
      // The service's clock moves on past the key's time; the database's stays where it was.
      t.mock.timers.enable({ apis: ['Date'], now: Date.now() })
      t.mock.timers.tick(61_000)
      const later = await post()
      assert.deepEqual([later.statusCode, later.headers['idempotent-replayed']], [201, undefined])
      assert.notEqual(later.headers.location, '/users/1')
      assert.equal((await app.inject('/users')).headers['x-total-count'], '2')
    })

    test('GET /users refuses a limit or offset out of range', async (t) => {
      const app = await testAppOn(t, database)
      const cases: Array<[string, string]> = [
        ['limit=0', 'querystring/limit must be >= 1'],
        ['limit=1001', 'querystring/limit must be <= 1000'],
        ['limit=ten', 'querystring/limit must be integer'],
        ['offset=-1', 'querystring/offset must be >= 0'],
        ['offset=10001', 'querystring/offset must be <= 10000'],
        ['offset=1e300', 'querystring/offset must be <= 10000']
      ]
      for (const [query, error] of cases) {
        const response = await app.inject(`/users?${query}`)
        assert.equal(response.statusCode, 400, query)
        assert.equal(response.json().error, error)
      }
      const deepest = await app.inject('/users?offset=10000')
      assert.deepEqual([deepest.statusCode, deepest.json()], [200, []], 'an offset of 10,000 is still taken')
    })

    test('a query parameter a route does not declare is ignored: the answer, its ETag and its Link are those without it', async (t) => {
      const app = await testAppOn(t, database)
      for (const name of ['Ada', 'Grace']) await postJson(app, '/users', { name, email: `${name.toLowerCase()}@example.com` })
      const answer = async (url: string) => {
        const { statusCode, headers, body } = await app.inject(url)
        return { statusCode, etag: headers.etag, link: headers.link, body }
      }
      for (const [url, extra] of [['/users?limit=1', '&_=1733170000&limt=5'], ['/users/1', '?_=1'], ['/custom?name=Ada', '&nmae=Grace']]) {
        const plain = await answer(url!)
        assert.equal(plain.statusCode, 200, url)
        assert.deepEqual(await answer(url! + extra!), plain, url + extra!)
      }
    })

    test('GET /users/{id} answers 404 for an unknown, non-numeric or non-canonical id', async (t) => {
      const app = await testAppOn(t, database)
      await postJson(app, '/users', ada)
      for (const id of ['2', 'abc', '01', '1.0', '-1', '0', '99999999999999999999', '2147483648', '%20']) {
        const response = await app.inject(`/users/${id}`)
        assert.equal(response.statusCode, 404, id)
        assert.deepEqual(response.json(), { error: 'User not found', code: 'user_not_found' })
      }
    })

    test('POST /users/{id} answers the path id with name and email, and stores nothing', async (t) => {
      const app = await testAppOn(t, database)
      const id = '507f1f77bcf86cd799439011'
      const response = await postJson(app, `/users/${id}?limit=5&offset=2`, { ...ada, age: 36 })
      assert.equal(response.statusCode, 200)
      assert.deepEqual(response.json(), { id, ...ada })
      assert.equal((await app.inject('/users')).headers['x-total-count'], '0')

      const upper = await postJson(app, '/users/507F1F77BCF86CD799439011', ada)
      assert.equal(upper.statusCode, 200, 'hexadecimal digits may be upper case')
    })

    test('POST /users/{id} validates path, query and body together', async (t) => {
      const app = await testAppOn(t, database)
      const id = '507f1f77bcf86cd799439011'
      const cases: Array<[string, unknown, string]> = [
        ['/users/507f1f77bcf86cd79943901', ada, 'params/id must match pattern "^[0-9a-fA-F]{24}$"'],
        ['/users/507f1f77bcf86cd79943901g', ada, 'params/id must match pattern "^[0-9a-fA-F]{24}$"'],
        [`/users/${id}?limit=abc`, ada, 'querystring/limit must be integer'],
        [`/users/${id}?offset=-3`, ada, 'querystring/offset must be >= 0'],
        [`/users/${id}?offset=10001`, ada, 'querystring/offset must be <= 10000'],
        [`/users/${id}`, { ...ada, age: -1 }, 'body/age must be >= 0'],
        [`/users/${id}`, { ...ada, age: 3.5 }, 'body/age must be integer'],
        [`/users/${id}`, { ...ada, age: '36' }, 'body/age must be integer'],
        [`/users/${id}`, { ...ada, role: 'admin' }, 'body must NOT have additional property "role"'],
        [`/users/${id}`, { name: 'Ada' }, "body must have required property 'email'"]
      ]
      for (const [url, body, error] of cases) {
        const response = await postJson(app, url, body)
        assert.equal(response.statusCode, 400, `${url} ${JSON.stringify(body)}`)
        assert.equal(response.json().error, error)
      }
    })
  })
}
