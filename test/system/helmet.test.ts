import assert from 'node:assert/strict'
import { test } from 'node:test'
import http from 'node:http'
import { once } from 'node:events'
import type { AddressInfo } from 'node:net'
import helmet from 'helmet'
import { PAGE_HELMET_OPTIONS } from '../../src/http/pages/helmet.js'
import { PAGE_ONLY_HEADERS, rawRequest, testApp } from '../helpers.js'

test('pages (the docs page, its assets, static files) carry helmet\'s headers with the service\'s policy, name for name and value for value', async (t) => {
  // What helmet sends with the same options from a bare Node server, its usual home.
  const reference = http.createServer((request, response) => { helmet(PAGE_HELMET_OPTIONS)(request, response, () => response.end('page')) })
  reference.listen(0, '127.0.0.1')
  await once(reference, 'listening')
  t.after(() => reference.close())
  const fromHelmet = (await rawRequest((reference.address() as AddressInfo).port, { path: '/' })).headers
  const helmetNames = Object.keys(fromHelmet).filter((name) => !['content-length', 'date', 'connection', 'keep-alive'].includes(name))
  assert.deepEqual(helmetNames.filter((name) => PAGE_ONLY_HEADERS.includes(name)).sort(), PAGE_ONLY_HEADERS)

  const app = await testApp(t)
  for (const url of ['/index.html', '/documentation/', '/documentation/static/swagger-ui.css']) {
    const page = await app.inject(url)
    assert.equal(page.statusCode, 200, url)
    for (const name of helmetNames) assert.equal(page.headers[name], fromHelmet[name], `${url}: ${name}`)
  }
  assert.match(String(fromHelmet['content-security-policy']), /script-src 'self'/)
})
