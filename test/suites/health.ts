/** Readiness and health, on one database: run by test/app/ on each backend and by test/system/pgbouncer.test.ts behind PgBouncer. */
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { DatabaseUnavailableError } from '../../src/storage/observed-queries.js'
import { testAppOn, type TestDatabase } from '../helpers.js'

export function healthSuite (database: TestDatabase): void {
  describe(`health on ${database.name}`, { skip: database.skip }, () => {
    test('GET /health answers ok without asking the database, even when it is down', async (t) => {
      const app = await testAppOn(t, database)
      const down = async () => { throw new DatabaseUnavailableError(new Error('down for the test')) }
      // Every query, built or compiled once, runs through the one executor.
      const asked = [t.mock.method(app, 'checkDatabase', down), t.mock.method(app.db.getExecutor(), 'executeQuery', down)]
      const response = await app.inject('/health')
      assert.equal(response.statusCode, 200)
      assert.deepEqual(response.json(), { status: 'ok' })
      assert.deepEqual(asked.map((mock) => mock.mock.callCount()), [0, 0])
      assert.equal((await app.inject('/users/1')).statusCode, 503, 'a read does ask the database, and hears it is down')
      assert.equal((await app.inject('/ready')).statusCode, 503, 'while /ready does ask, and hears it is down')
    })

    test('GET /ready answers ok when the database answers', async (t) => {
      const app = await testAppOn(t, database)
      const response = await app.inject('/ready')
      assert.equal(response.statusCode, 200)
      assert.deepEqual(response.json(), { status: 'ok' })
    })
  })
}
