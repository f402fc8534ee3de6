import assert from 'node:assert/strict'
import { join } from 'node:path'
import { describe, test } from 'node:test'
import { sql } from 'kysely'
import { createDatabase } from '../../src/storage/database.js'
import { captureLogs, postJson, temporaryFolder, testApp, testDatabases } from '../helpers.js'
import { usersSuite } from '../suites/users.js'

const ada = { name: 'Ada', email: 'ada@example.com' }

for (const database of testDatabases) usersSuite(database)

describe('users posted together on SQLite, committed as a group', () => {
  test('they share commits: fewer commits than users', async (t) => {
    const filename = join(temporaryFolder(t), 'app.db')
    const app = await testApp(t, { DATABASE_URL: `sqlite:${filename}` })
    const { db } = await createDatabase({ dialect: 'sqlite', filename })
    t.after(() => db.destroy())
    // The WAL file is emptied, then counts the pages the commits below write: one commit
    // writes the users table's page and the id sequence's, so one commit per user would
    // leave at least two frames per user.
    await sql`pragma wal_checkpoint(truncate)`.execute(db)
    const responses = await Promise.all(Array.from({ length: 40 }, (_, i) => postJson(app, '/users', { name: `user${i}`, email: `user${i}@example.com` })))
    assert.deepEqual(new Set(responses.map((response) => response.statusCode)), new Set([201]))
    const { rows: [checkpoint] } = await sql<{ log: number }>`pragma wal_checkpoint(passive)`.execute(db)
    assert.ok(checkpoint!.log < 40, `${checkpoint!.log} frames for 40 users`)
  })

  test('each gets its own id in order of arrival, and one the database refuses fails alone', async (t) => {
    const filename = join(temporaryFolder(t), 'app.db')
    const app = await testApp(t, { DATABASE_URL: `sqlite:${filename}` })
    const { db } = await createDatabase({ dialect: 'sqlite', filename })
    t.after(() => db.destroy())
    await sql`create trigger refuse_user before insert on users when new.name = 'Refused'
      begin select raise(abort, 'refused by a trigger'); end`.execute(db)

    const names = ['Ada', 'Grace', 'Refused', 'Edsger', 'Barbara']
    const responses = await Promise.all(names.map((name) => postJson(app, '/users', { name, email: 'someone@example.com' })))

    assert.deepEqual(responses.map((response) => response.statusCode), [201, 201, 500, 201, 201])
    const list = (await app.inject('/users')).json()
    assert.deepEqual(list.map((user: { name: string }) => user.name), ['Ada', 'Grace', 'Edsger', 'Barbara'])
    for (const [index, response] of responses.entries()) {
      if (response.statusCode !== 201) continue
      assert.equal((await app.inject(String(response.headers.location))).json().name, names[index])
    }
  })

  test('a statement after which SQLite rolls the whole transaction back fails every write that shared it, stores none, and logs its own error', async (t) => {
    const filename = join(temporaryFolder(t), 'app.db')
    const logs = captureLogs()
    const app = await testApp(t, { DATABASE_URL: `sqlite:${filename}`, LOG_LEVEL: 'error' }, logs.stream)
    const { db } = await createDatabase({ dialect: 'sqlite', filename })
    t.after(() => db.destroy())
    await sql`create trigger roll_back before insert on users when new.name = 'RollsBack'
      begin select raise(rollback, 'rolled back by a trigger'); end`.execute(db)

    const names = ['Ada', 'Grace', 'RollsBack', 'Edsger']
    const responses = await Promise.all(names.map((name) => postJson(app, '/users', { name, email: 'someone@example.com' })))

    assert.deepEqual(responses.map((response) => response.statusCode), [500, 500, 500, 500])
    assert.deepEqual((await app.inject('/users')).json(), [])
    assert.ok(logs.lines.some((line) => line.err?.message === 'rolled back by a trigger'), 'the log names the cause')
    assert.equal((await postJson(app, '/users', ada)).statusCode, 201, 'the next write is stored')
  })
})

describe('users read together on SQLite, in one transaction', () => {
  test('each read gets its own answer, and lists count what was committed before they arrived', async (t) => {
    const app = await testApp(t, { DATABASE_URL: `sqlite:${join(temporaryFolder(t), 'app.db')}` })
    for (let i = 1; i <= 5; i++) await postJson(app, '/users', { name: `user${i}`, email: `user${i}@example.com` })

    const lookups = await Promise.all([1, 2, 3, 4, 5, 6].map((id) => app.inject(`/users/${id}`)))
    const pages = await Promise.all([0, 1, 2, 3, 4, 5].map((offset) => app.inject(`/users?limit=1&offset=${offset}`)))

    assert.deepEqual(lookups.map((response) => response.json().name), ['user1', 'user2', 'user3', 'user4', 'user5', undefined])
    assert.equal(lookups[5]!.statusCode, 404)
    assert.deepEqual(pages.map((response) => response.json()[0]?.id), [1, 2, 3, 4, 5, undefined])
    assert.deepEqual(pages.map((response) => response.headers['x-total-count']), ['5', '5', '5', '5', '5', '5'])

    await postJson(app, '/users', { name: 'user6', email: 'user6@example.com' })
    const after = await Promise.all([app.inject('/users?limit=1'), app.inject('/users/6')])
    assert.equal(after[0].headers['x-total-count'], '6')
    assert.equal(after[1].json().name, 'user6')
  })
})

test('POST /users reads a body as JSON in UTF-8: a charset parameter changes nothing, a byte order mark is allowed, a member name twice in one object is a 400', async (t) => {
  const app = await testApp(t)
  const post = (payload: string | Buffer, contentType = 'application/json') =>
    app.inject({ method: 'POST', url: '/users', payload, headers: { 'content-type': contentType } })

  const latin1 = await post('{"name":"Zoë","email":"zoe@example.com"}', 'application/json; charset=iso-8859-1')
  assert.equal(latin1.statusCode, 201)
  assert.deepEqual((await app.inject(latin1.headers.location!)).json(), { id: '1', name: 'Zoë' }, 'read as UTF-8')

  const withBom = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"name":"Ada","email":"ada@example.com"}')])
  const bom = await post(withBom)
  assert.equal(bom.statusCode, 201)
  assert.deepEqual(bom.rawPayload, withBom, 'echoed as sent')

  for (const twice of ['{"name":"Ada","email":"ada@example.com","name":"Mallory"}', '{"name":"Ada","email":"ada@example.com","x":{"a":1,"\\u0061":2}}']) {
    const repeated = await post(twice)
    assert.equal(repeated.statusCode, 400, twice)
    assert.equal(repeated.json().error, 'Body has a member name twice in one object, which I-JSON (RFC 7493) does not allow')
  }
  const apart = '{"name":"Ada","email":"ada@example.com","x":[{"a":1},{"a":2}],"y":{"name":"nested"}}'
  assert.equal((await post(apart)).statusCode, 201, 'the same name in different objects is no repetition')
  assert.deepEqual((await app.inject('/users')).json().map((user: { name: string }) => user.name), ['Zoë', 'Ada', 'Ada'], 'nothing refused was stored')
})
