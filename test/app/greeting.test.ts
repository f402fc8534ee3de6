import assert from 'node:assert/strict'
import { test } from 'node:test'
import { testApp } from '../helpers.js'

test('GET / says hello world', async (t) => {
  const app = await testApp(t)
  const response = await app.inject('/')
  assert.equal(response.statusCode, 200)
  assert.match(response.headers['content-type'] as string, /^application\/json/)
  assert.deepEqual(response.json(), { hello: 'world' })
})

test('GET /custom greets the name from the query string, or the world', async (t) => {
  const app = await testApp(t)
  assert.deepEqual((await app.inject('/custom?name=Ada&age=36')).json(), { hello: 'Ada' })
  assert.deepEqual((await app.inject('/custom')).json(), { hello: 'world' })
})

test('GET /custom converts age from text to an integer and refuses a non-integer', async (t) => {
  const app = await testApp(t)
  // The handler answers no age, so the query it is handed is read here, as a handler sees it.
  const handed: unknown[] = []
  app.addHook('preHandler', (request, _reply, done) => {
    handed.push(request.query)
    done()
  })
  for (const [text, value] of [['3', 3], ['2.0', 2], ['2e0', 2]] as const) {
    assert.equal((await app.inject(`/custom?age=${text}`)).statusCode, 200, `age=${text}`)
    assert.deepEqual({ ...handed.pop() as object }, { age: value }, `age=${text} is handed over as the integer ${value}`)
  }
  for (const age of ['abc', '3.5', '']) {
    const response = await app.inject(`/custom?age=${age}`)
    assert.equal(response.statusCode, 400, `age=${age}`)
    assert.equal(response.json().error, 'querystring/age must be integer')
  }
})
