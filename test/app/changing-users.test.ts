import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, test } from 'node:test'
import Database from 'better-sqlite3'
import { postJson, temporaryFolder, testApp, testDatabases, waitFor } from '../helpers.js'
import { changingUsersSuite, patch, remove } from '../suites/changing-users.js'

for (const database of testDatabases) changingUsersSuite(database)

describe('erasure in a SQLite file', () => {
  /** Every file of the database (the file, its WAL and shared memory) that holds `text`. */
  function filesHolding (folder: string, text: string): string[] {
    return readdirSync(folder).filter((file) => readFileSync(join(folder, file)).includes(Buffer.from(text)))
  }

  test('once DELETE has answered 204, the name and email it erased, and the hash of the request that made it, are in none of the files, once a read held open ends', async (t) => {
    const folder = temporaryFolder(t)
    const filename = join(folder, 'app.db')
    const app = await testApp(t, { DATABASE_URL: `sqlite:${filename}` })
    for (let n = 0; n < 40; n++) await postJson(app, '/users', { name: `Neighbour ${n}`, email: `n${n}@example.com` })
    const body = JSON.stringify({ name: 'Zebulon Erasable', email: 'zebulon@erase.example' })
    const created = await app.inject({ method: 'POST', url: '/users', payload: body, headers: { 'content-type': 'application/json', 'idempotency-key': 'zebulon-1' } })
    assert.equal(created.headers.location, '/users/41')
    const fingerprint = createHash('sha256').update(body).digest('base64url')
    await patch(app, '/users/41', { name: 'Xavier Erasable', email: 'xavier@erase.example' })
    for (let n = 40; n < 80; n++) await postJson(app, '/users', { name: `Neighbour ${n}`, email: `n${n}@example.com` })
    const personal = ['Zebulon Erasable', 'zebulon@erase.example', 'Xavier Erasable', 'xavier@erase.example', fingerprint]
    assert.ok(personal.some((text) => filesHolding(folder, text).length > 0), 'the user is on disk before')

    // Another connection holds a read: the WAL cannot be cut until it ends.
    const reader = new Database(filename, { readonly: true })
    t.after(() => { if (reader.open) reader.close() })
    reader.prepare('begin').run()
    reader.prepare('select count(*) from users').get()
    assert.equal((await remove(app, '/users/41')).statusCode, 204)
    reader.prepare('rollback').run()
    reader.close()

    await waitFor(() => personal.every((text) => filesHolding(folder, text).length === 0), 5000)
    for (const text of personal) assert.deepEqual(filesHolding(folder, text), [], text)
    assert.ok(filesHolding(folder, 'Neighbour 79').length > 0, 'the other users are still there')
    assert.equal((await app.inject('/users')).headers['x-total-count'], '80')
    assert.ok(filesHolding(folder, 'zebulon-1').length > 0, 'the key stays, so that a retry makes no user')
  })
})
