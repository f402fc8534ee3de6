import assert from 'node:assert/strict'
import { test } from 'node:test'
import { testApp } from './helpers.js'

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

test('GET /custom converts age from text and refuses a non-integer', async (t) => {
  const app = await testApp(t)
  assert.equal((await app.inject('/custom?age=3')).statusCode, 200)
  for (const age of ['abc', '3.5', '']) {
    const response = await app.inject(`/custom?age=${age}`)
    assert.equal(response.statusCode, 400, `age=${age}`)
    assert.equal(response.json().error, 'querystring/age must be integer')
  }
})
