/** Finding and sorting users (`GET /users` with filters, `sort`, `fields`, `count`), on each database. */
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { sql } from 'kysely'
import type { FastifyInstance } from 'fastify'
import type { ListParameters } from '../../src/users/list.schemas.js'
import { userQuery } from '../../src/users/list-query.js'
import { pageQuery } from '../../src/users/repository.js'
import { postJson, testAppOn, testDatabases } from '../helpers.js'

interface Listed { id: number, name?: string, email?: string, created_at?: string }

async function store (app: FastifyInstance, users: Array<[string, string]>): Promise<void> {
  for (const [name, email] of users) assert.equal((await postJson(app, '/users', { name, email })).statusCode, 201)
}

/** Every user the pages from `url` on show, following `rel="next"`, and the pages' sizes. */
async function walk (app: FastifyInstance, url: string): Promise<{ users: Listed[], sizes: number[] }> {
  const users: Listed[] = []
  const sizes: number[] = []
  for (let next: string | undefined = url; next !== undefined;) {
    const response: Awaited<ReturnType<typeof app.inject>> = await app.inject(next)
    assert.equal(response.statusCode, 200, `${next}: ${response.body}`)
    const page = response.json() as Listed[]
    users.push(...page)
    sizes.push(page.length)
    next = /<([^>]+)>; rel="next"/.exec(String(response.headers.link))?.[1]
  }
  return { users, sizes }
}

const ids = (users: Listed[]) => users.map((user) => user.id)
/** Code point order, as both databases sort names. */
const byCodePoint = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0)

function refusal (response: { statusCode: number, json: () => any }, path: string, message: RegExp): void {
  assert.equal(response.statusCode, 400)
  const body = response.json()
  assert.match(body.error, message)
  assert.ok(body.details.some((detail: { in: string, path: string }) => detail.in === 'query' && detail.path === path), JSON.stringify(body.details))
}

for (const database of testDatabases) {
  describe(`finding users in ${database.name}`, { skip: database.skip }, () => {
    test('GET /users?email= finds the users with that address whatever the case of its letters, and only them', async (t) => {
      const app = await testAppOn(t, database)
      await store(app, [['Ada', 'Ada@Example.com'], ['Grace', 'grace@example.com'], ['Ada L', 'ada@example.org'], ['Ada 2', 'ada@example.com']])
      const found = await app.inject('/users?email=ADA@example.COM&fields=id,name,email')
      assert.equal(found.statusCode, 200)
      assert.deepEqual(found.json(), [{ id: 1, name: 'Ada', email: 'Ada@Example.com' }, { id: 4, name: 'Ada 2', email: 'ada@example.com' }])
      assert.deepEqual((await app.inject('/users?email=nobody@example.com')).json(), [])
      refusal(await app.inject('/users?email=not-an-address'), '/email', /querystring\/email must match format "email"/)
    })

    test('name finds one exact name; name_prefix every name that starts with it, by code point, case and all', async (t) => {
      const app = await testAppOn(t, database)
      const names = ['Ada', 'Adam', 'ada', 'Ad', 'Ae', 'Ac\u{10FFFF}', 'Émile', 'Éva', 'E', 'a\u{10FFFF}', 'a\u{10FFFF}b', 'b']
      await store(app, names.map((name, index) => [name, `u${index}@example.com`]))
      const named = async (query: string) => ((await app.inject(`/users?${query}`)).json() as Listed[]).map((user) => user.name)
      assert.deepEqual(await named('name=Ada'), ['Ada'])
      assert.deepEqual(await named('name_prefix=Ad'), ['Ada', 'Adam', 'Ad'])
      assert.deepEqual(await named('name_prefix=Ad&sort=name'), ['Ad', 'Ada', 'Adam'])
      assert.deepEqual(await named(`name_prefix=${encodeURIComponent('É')}`), ['Émile', 'Éva'])
      assert.deepEqual(await named(`name_prefix=${encodeURIComponent('a\u{10FFFF}')}`), ['a\u{10FFFF}', 'a\u{10FFFF}b'], 'a prefix ending in the last code point')
      assert.deepEqual(await named('name=Ada&name_prefix=Ad'), ['Ada'], 'both hold')
      assert.deepEqual(await named('name=Ada&name_prefix=Adam'), [], 'no name is both')
    })

    test('created_after and created_before keep the users stored strictly between, to the millisecond, in any offset', async (t) => {
      const app = await testAppOn(t, database)
      const times = ['2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.001Z', '2026-01-01T00:00:00.001Z', '2026-01-01T10:00:00.000Z', '2026-06-30T23:59:59.999Z']
      await app.db.insertInto('users').values(times.map((time, index) => ({ name: `user${index}`, email: `u${index}@example.com`, created_at: time }))).execute()
      const found = async (query: string) => ids((await app.inject(`/users?${query}`)).json())
      assert.deepEqual(await found('created_after=2026-01-01T00:00:00.000Z'), [2, 3, 4, 5])
      assert.deepEqual(await found('created_before=2026-01-01T00:00:00.001Z'), [1])
      assert.deepEqual(await found('created_after=2026-01-01T00:00:00.000Z&created_before=2026-06-30T23:59:59.999Z'), [2, 3, 4])
      assert.deepEqual(await found(`created_after=${encodeURIComponent('2026-01-01T11:00:00+01:00')}`), [5], 'an offset east of UTC')
      assert.deepEqual(await found('created_before=2025-12-31T19:00:00.001-05:00'), [1], 'an offset west of UTC, without its colon too')
      assert.deepEqual(await found('created_before=2025-12-31T19:00:00.001-0500'), [1])
      assert.deepEqual(await found('created_after=2026-01-01T00:00:00.0005Z'), [2, 3, 4, 5], 'a finer time rounds down for a lower bound')
      assert.deepEqual(await found('created_before=2026-01-01T00:00:00.0005Z'), [1], 'and up for an upper one')
      assert.deepEqual(await found('created_after=2026-01-01t00:00:00.001z'), [4, 5])
      assert.deepEqual(await found('created_after=0001-01-01T00:00:00Z&created_before=9999-12-31T23:59:59-05:00'), [1, 2, 3, 4, 5], 'bounds beyond the years stored')
      assert.deepEqual(await found('sort=-created_at&limit=2&fields=id'), [5, 4])
      refusal(await app.inject('/users?created_after=yesterday'), '/created_after', /must match format "date-time"/)
      refusal(await app.inject('/users?created_before=2026-02-30T00:00:00Z'), '/created_before', /must match format "date-time"/)
    })

    test('sort by name, -name, created_at, -created_at, -id: Link walks every user once, ties in id order, whatever the page size', async (t) => {
      const app = await testAppOn(t, database)
      const names = ['Grace', 'Ada', 'Zoe', 'Ada', 'ada', 'Émile', 'Ada', 'Barbara', 'Grace']
      await store(app, names.map((name, index) => [name, `u${index}@example.com`]))
      const stored = (await app.inject('/users?fields=id,name,created_at')).json() as Array<Required<Listed>>
      const expected: Record<string, number[]> = {
        name: ids([...stored].sort((a, b) => byCodePoint(a.name, b.name) || a.id - b.id)),
        created_at: ids([...stored].sort((a, b) => byCodePoint(a.created_at, b.created_at) || a.id - b.id)),
        id: ids(stored)
      }
      for (const sort of ['name', '-name', 'created_at', '-created_at', '-id']) {
        const key = sort.replace('-', '')
        const order = sort.startsWith('-') ? [...expected[key]!].reverse() : expected[key]!
        for (const limit of [1, 2, 4, 100]) {
          const { users, sizes } = await walk(app, `/users?sort=${sort}&limit=${limit}`)
          assert.deepEqual(ids(users), order, `sort=${sort}&limit=${limit}`)
          assert.ok(sizes.slice(0, -1).every((size) => size === limit), `full pages before the last: ${sizes.join(', ')}`)
        }
      }
      const { users } = await walk(app, '/users?sort=name&name_prefix=Ad&limit=2&fields=name&count=exact')
      assert.deepEqual(users, [{ name: 'Ada' }, { name: 'Ada' }, { name: 'Ada' }], 'Link keeps the filters and fields')
    })

    test('a page sorted by name starts after the cursor\'s user even when that user is gone, and a user added behind it is not shown', async (t) => {
      const app = await testAppOn(t, database)
      await store(app, [['Ada', 'a@example.com'], ['Bea', 'b@example.com'], ['Cy', 'c@example.com'], ['Di', 'd@example.com']])
      const first = await app.inject('/users?sort=name&limit=2')
      const next = /<([^>]+)>; rel="next"/.exec(String(first.headers.link))![1]!
      assert.equal((await app.inject({ method: 'DELETE', url: '/users/2' })).statusCode, 204)
      await store(app, [['Ab', 'ab@example.com'], ['Ca', 'ca@example.com']])
      assert.deepEqual((await app.inject(next)).json(), [{ id: 6, name: 'Ca' }, { id: 3, name: 'Cy' }])
    })

    test('fields chooses the members of each user; the default stays id and name; unknown names are 400', async (t) => {
      const app = await testAppOn(t, database)
      await store(app, [['Ada', 'ada@example.com']])
      assert.deepEqual((await app.inject('/users')).json(), [{ id: 1, name: 'Ada' }])
      assert.deepEqual(Object.keys((await app.inject('/users?fields=email,id')).json()[0]), ['id', 'email'])
      const everything = (await app.inject('/users?fields=id,name,email,created_at&sort=name')).json()[0]
      assert.deepEqual(Object.keys(everything), ['id', 'name', 'email', 'created_at'])
      assert.match(everything.created_at, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/)
      assert.deepEqual((await app.inject('/users?fields=name&sort=-created_at')).json(), [{ name: 'Ada' }], 'the sort key is not shown unless asked for')
      refusal(await app.inject('/users?fields=id,age'), '/fields', /querystring\/fields must match pattern/)
      refusal(await app.inject('/users?fields='), '/fields', /querystring\/fields must match pattern/)
    })

    test('X-Total-Count: the total without a filter; with one, the users it matches with count=exact, and none without', async (t) => {
      const app = await testAppOn(t, database)
      await store(app, [['Ada', 'ada@example.com'], ['Adam', 'adam@example.com'], ['Grace', 'grace@example.com']])
      assert.equal((await app.inject('/users?limit=1&sort=-name')).headers['x-total-count'], '3')
      assert.equal((await app.inject('/users?limit=1&count=exact')).headers['x-total-count'], '3')
      assert.equal((await app.inject('/users?name_prefix=Ad&limit=1')).headers['x-total-count'], undefined)
      assert.equal((await app.inject('/users?name_prefix=Ad&limit=1&count=exact')).headers['x-total-count'], '2')
      assert.equal((await app.inject('/users?email=GRACE@example.com&count=exact')).headers['x-total-count'], '1')
      refusal(await app.inject('/users?count=estimate'), '/count', /querystring\/count must be one of exact/)
    })

    test('a cursor from another sort or another search, an id where a cursor belongs, and one not in a cursor\'s shape are 400 with details; one made by hand in that shape names its position', async (t) => {
      const app = await testAppOn(t, database)
      await store(app, [['Ada', 'a@example.com'], ['Bea', 'b@example.com'], ['Ada', 'c@example.com']])
      const nextOf = async (url: string) => /after=([^&>]+)>; rel="next"/.exec(String((await app.inject(url)).headers.link))![1]!
      const byName = await nextOf('/users?sort=name&limit=1')
      const adaOnly = await nextOf('/users?sort=name&limit=1&name=Ada')
      refusal(await app.inject(`/users?sort=-name&after=${byName}`), '/after', /is a cursor of pages sorted by name, not by -name/)
      refusal(await app.inject(`/users?sort=name&after=${byName}&name=Ada`), '/after', /is a cursor of another search/)
      refusal(await app.inject(`/users?sort=name&after=${adaOnly}`), '/after', /is a cursor of another search/)
      refusal(await app.inject(`/users?sort=name&after=${adaOnly}&name=Bea`), '/after', /is a cursor of another search/)
      assert.equal((await app.inject(`/users?sort=name&after=${adaOnly}&name=Ada`)).statusCode, 200)
      refusal(await app.inject('/users?sort=name&after=1'), '/after', /is a user id, which places pages sorted by id/)
      refusal(await app.inject(`/users?sort=created_at&after=${byName}`), '/after', /sorted by name, not by created_at/)
      refusal(await app.inject('/users?after=2147483648'), '/after', /must be <= 2147483647/)
      const forged = (content: unknown) => Buffer.from(JSON.stringify(content)).toString('base64url')
      for (const cursor of ['zzzz', forged(['name', 'Ada', 0, '']), forged(['name', 'A\u0000', 1, '']), forged(['name', 'x'.repeat(201), 1, '']),
        forged(['created_at', 'yesterday', 1, '']), forged(['id', '1', 1, '']), forged({ sort: 'name' }), forged(['name', 7, 1, ''])]) {
        refusal(await app.inject(`/users?sort=name&after=${cursor}`), '/after', /must be a user id or a cursor from a Link header of this service|not by name/)
      }
      const handMade = await app.inject(`/users?sort=name&after=${forged(['name', 'Ada', 1, ''])}`)
      assert.deepEqual((handMade.json() as Listed[]).map((user) => [user.id, user.name]), [[3, 'Ada'], [2, 'Bea']], 'after Ada with id 1, as docs/api.md says')
      refusal(await app.inject('/users?sort=size'), '/sort', /querystring\/sort must be one of id, -id, name, -name, created_at, -created_at/)
    })

    test('each sort and filter reads through an index, never the whole table nor a sort of it', async (t) => {
      const app = await testAppOn(t, database)
      await store(app, [['Ada', 'ada@example.com'], ['Grace', 'grace@example.com']])
      const cursor = (sort: string, key: string) => Buffer.from(JSON.stringify([sort, key, 1, ''])).toString('base64url')
      const cases: Array<[Partial<ListParameters>, string]> = [
        [{ sort: 'name' }, 'users_by_name'],
        [{ sort: '-name', after: cursor('-name', 'Grace') }, 'users_by_name'],
        [{ sort: '-created_at' }, 'users_by_creation'],
        [{ sort: 'created_at', after: cursor('created_at', '2026-12-02T00:00:00.000Z') }, 'users_by_creation'],
        [{ sort: 'name', name_prefix: 'Ad' }, 'users_by_name'],
        [{ sort: 'name', name: 'Ada' }, 'users_by_name'],
        [{ email: 'Ada@example.com' }, 'users_by_email'],
        [{ sort: '-created_at', created_after: '2026-01-01T00:00:00Z' }, 'users_by_creation']
      ]
      const sqlite = database.name.includes('SQLite')
      await app.db.connection().execute(async (db) => {
        // PostgreSQL reads a table this small whole, or sorts it, if it may; the question is whether an index serves the order.
        if (!sqlite) await sql`set enable_seqscan = off; set enable_bitmapscan = off; set enable_sort = off`.execute(db)
        for (const [parameters, index] of cases) {
          const compiled = pageQuery(db, userQuery({ limit: 10, offset: 0, sort: 'id', ...parameters })).compile()
          const explain = sqlite ? 'explain query plan ' : 'explain '
          const { rows } = await db.executeQuery<Record<string, string>>({ ...compiled, sql: explain + compiled.sql })
          const plan = rows.map((row) => row.detail ?? row['QUERY PLAN']).join('\n')
          assert.match(plan, new RegExp(index), `${JSON.stringify(parameters)}:\n${plan}`)
          assert.doesNotMatch(plan, /TEMP B-TREE|^\s*(->\s*)?Sort\b|Seq Scan|^SCAN users$/m, `${JSON.stringify(parameters)}:\n${plan}`)
        }
        if (!sqlite) await sql`reset all`.execute(db)
      })
    })
  })
}
