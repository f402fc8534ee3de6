import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { testAppOn, testDatabases } from './helpers.js'

for (const database of testDatabases) {
  describe(`health on ${database.name}`, { skip: database.skip }, () => {
    test('GET /health answers ok without asking the database', async (t) => {
      const app = await testAppOn(t, database)
      const response = await app.inject('/health')
      assert.equal(response.statusCode, 200)
      assert.deepEqual(response.json(), { status: 'ok' })
    })

    test('GET /ready answers ok when the database answers', async (t) => {
      const app = await testAppOn(t, database)
      const response = await app.inject('/ready')
      assert.equal(response.statusCode, 200)
      assert.deepEqual(response.json(), { status: 'ok' })
    })
  })
}
