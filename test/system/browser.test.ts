import assert from 'node:assert/strict'
import { once } from 'node:events'
import { existsSync, readFileSync } from 'node:fs'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { chromium, type Page } from 'playwright-core'
import { rawRequest } from '../helpers.js'
import { repositoryRoot, runScript, startService } from '../process.js'
import { startTcpProxy } from '../tcp-proxy.js'

const executablePath = '/usr/bin/chromium'
const skip = existsSync(executablePath) ? false : `${executablePath} is not installed (apt-get install chromium)`
const secret = 'a-browser-test-secret-of-enough-bytes'

// Headless as root, with nothing that calls out of this machine.
const chromiumArgs = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync']

/** Presses Execute on POST /users with a body, and returns what the browser sent and got. */
async function executeCreateUser (page: Page, name: string) {
  const operation = page.locator('#operations-users-createUser')
  await operation.locator('textarea.body-param__text').fill(JSON.stringify({ name, email: `${name}@example.com` }))
  const [response] = await Promise.all([
    page.waitForResponse((response) => response.request().method() === 'POST' && new URL(response.url()).pathname === '/users'),
    operation.locator('button.execute').click()
  ])
  const sent = response.request().headers()
  return { status: response.status(), authorization: sent.authorization, idempotencyKey: sent['idempotency-key'] }
}

test('the docs page works in a real browser under its CSP: Authorize with a token from npm run token, then call a protected route, twice with two bodies', { skip }, async (t) => {
  const minted = await runScript('cli/token.ts', { JWT_SECRET: secret }, ['--sub', 'docs-reader'])
  assert.equal(minted.code, 0, minted.stderr)
  const token = minted.stdout.trim()
  const service = await startService(t, { DATABASE_URL: 'sqlite::memory:', AUTH: 'writes', JWT_SECRET: secret })

  const browser = await chromium.launch({ executablePath, args: chromiumArgs })
  t.after(() => browser.close())
  const page = await browser.newPage()
  const problems: string[] = []
  page.on('console', (message) => { if (message.type() === 'error') problems.push(message.text()) })
  page.on('requestfailed', (request) => problems.push(`failed: ${request.url()}`))
  page.on('request', (request) => {
    if (!request.url().startsWith(`http://127.0.0.1:${service.port}/`) && !request.url().startsWith('data:')) problems.push(`external: ${request.url()}`)
  })

  const documentPage = await page.goto(`http://127.0.0.1:${service.port}/documentation`)
  assert.match(String(documentPage?.headers()['content-security-policy']), /script-src 'self'/, 'the page runs under the service\'s content security policy')
  const operation = page.locator('#operations-users-createUser')
  await operation.locator('.opblock-summary').click()
  await operation.locator('button.try-out__btn').click()

  assert.deepEqual(await executeCreateUser(page, 'anonymous'), { status: 401, authorization: undefined, idempotencyKey: undefined }, 'without a token the protected route refuses')

  await page.locator('button.authorize').first().click()
  const modal = page.locator('.modal-ux')
  await modal.locator('input[type=text]').fill(token)
  await modal.locator('button.authorize').click()
  await modal.locator('button.btn-done').click()

  assert.deepEqual(await executeCreateUser(page, 'reader'), { status: 201, authorization: `Bearer ${token}`, idempotencyKey: undefined }, 'with the token it is accepted')
  await operation.locator('.live-responses-table tr.response .response-col_status', { hasText: '201' }).waitFor()
  // The page fills in no Idempotency-Key of its own, so a second try is a new user, not a 422.
  assert.deepEqual(await executeCreateUser(page, 'writer'), { status: 201, authorization: `Bearer ${token}`, idempotencyKey: undefined }, 'a second try, another body')
  const stored = await rawRequest(service.port, { path: '/users' })
  assert.deepEqual(JSON.parse(stored.body), [{ id: 1, name: 'reader' }, { id: 2, name: 'writer' }])
  assert.deepEqual(problems.filter((problem) => !/401/.test(problem)), [], 'no console error, failed or external request')
})

test('a page on another origin uses the API with fetch: a token, an Idempotency-Key, the headers it reads, a conditional GET, and the errors it must read (401, 400, 429)', { skip }, async (t) => {
  const minted = await runScript('cli/token.ts', { JWT_SECRET: secret }, ['--sub', 'web-app'])
  assert.equal(minted.code, 0, minted.stderr)
  const service = await startService(t, { DATABASE_URL: 'sqlite::memory:', AUTH: 'writes', JWT_SECRET: secret, RATE_LIMIT_MAX: '10' })
  // The web app's own origin: another host name and port than the API's.
  const site = createServer((_request, response) => response.end('<!doctype html><title>web app</title>'))
  site.listen(0, '127.0.0.1')
  await once(site, 'listening')
  t.after(() => site.close())

  const browser = await chromium.launch({ executablePath, args: chromiumArgs })
  t.after(() => browser.close())
  const page = await browser.newPage()
  const problems: string[] = []
  page.on('console', (message) => { if (message.type() === 'error') problems.push(message.text()) })
  // tsx compiles this file keeping function names, through a helper the page lacks.
  await page.addInitScript('globalThis.__name = (target) => target')
  await page.goto(`http://localhost:${(site.address() as AddressInfo).port}/`)

  const seen = await page.evaluate(async ({ api, token }) => {
    /** What the page could read of an answer: its status, its body, and the named headers. */
    const read = async (response: Response, ...names: string[]): Promise<{ status: number, body: any, headers: Record<string, string | null> }> => ({
      status: response.status,
      body: response.status === 304 ? null : await response.json(),
      headers: Object.fromEntries(names.map((name) => [name, response.headers.get(name)]))
    })
    const create = async (body: object, headers: Record<string, string>) =>
      await fetch(`${api}/users`, { method: 'POST', headers: { 'Content-Type': 'application/json', ...headers }, body: JSON.stringify(body) })
    const signedIn = { Authorization: `Bearer ${token}`, 'Idempotency-Key': 'browser-key-1' }
    const created = await read(await create({ name: 'Ada', email: 'ada@example.com' }, signedIn), 'location', 'idempotent-replayed')
    const replayed = await read(await create({ name: 'Ada', email: 'ada@example.com' }, signedIn), 'location', 'idempotent-replayed')
    const page = await read(await fetch(`${api}/users?limit=1`), 'x-total-count', 'link')
    const user = await read(await fetch(`${api}/users/1`), 'etag')
    const unchanged = await read(await fetch(`${api}/users/1`, { headers: { 'If-None-Match': user.headers.etag! } }), 'etag')
    const anonymous = await read(await create({ name: 'Eve', email: 'eve@example.com' }, {}), 'www-authenticate')
    const invalid = await read(await create({ name: '' }, { Authorization: `Bearer ${token}` }))
    let limited = await read(await fetch(`${api}/users/1`), 'retry-after', 'ratelimit-remaining')
    while (limited.status === 200) limited = await read(await fetch(`${api}/users/1`), 'retry-after', 'ratelimit-remaining')
    return { created, replayed, page, user, unchanged, anonymous, invalid, limited }
  }, { api: `http://127.0.0.1:${service.port}`, token: minted.stdout.trim() })

  assert.deepEqual(seen.created, { status: 201, body: { name: 'Ada', email: 'ada@example.com' }, headers: { location: '/users/1', 'idempotent-replayed': null } })
  assert.deepEqual(seen.replayed, { ...seen.created, headers: { location: '/users/1', 'idempotent-replayed': 'true' } })
  assert.deepEqual(seen.page, { status: 200, body: [{ id: 1, name: 'Ada' }], headers: { 'x-total-count': '1', link: '</users?limit=1&after=1>; rel="next", </users?limit=1>; rel="first"' } })
  assert.deepEqual(seen.unchanged, { status: 304, body: null, headers: { etag: seen.user.headers.etag } })
  assert.equal(seen.anonymous.status, 401)
  assert.match(String(seen.anonymous.headers['www-authenticate']), /^Bearer/)
  assert.match(seen.anonymous.body.error, /bearer token/)
  assert.equal(seen.invalid.status, 400)
  assert.ok(seen.invalid.body.details.length > 0, JSON.stringify(seen.invalid.body))
  assert.deepEqual([seen.limited.status, seen.limited.headers['ratelimit-remaining']], [429, '0'])
  assert.match(String(seen.limited.headers['retry-after']), /^\d+$/)
  // The browser logs the 4xx answers themselves; a CORS refusal would add its own line.
  assert.deepEqual(problems.filter((problem) => /CORS|Access-Control/.test(problem)), [])
})

test('a page on another origin follows a protected feed with EventSource and a ticket, as docs/events.md shows, and goes on after its connection drops', { skip }, async (t) => {
  const minted = await runScript('cli/token.ts', { JWT_SECRET: secret }, ['--sub', 'web-app', '--scope', 'users:write events:read'])
  assert.equal(minted.code, 0, minted.stderr)
  const token = minted.stdout.trim()
  const service = await startService(t, { DATABASE_URL: 'sqlite::memory:', AUTH: 'writes', AUTH_SCOPES: 'on', JWT_SECRET: secret })
  // Between the page and the service, so that the test can drop the stream's connection.
  const proxy = await startTcpProxy(t, { host: '127.0.0.1', port: service.port })
  const site = createServer((_request, response) => response.end('<!doctype html><title>web app</title>'))
  site.listen(0, '127.0.0.1')
  await once(site, 'listening')
  t.after(() => site.close())
  // The client exactly as the docs give it.
  const docs = readFileSync(join(repositoryRoot, 'docs', 'events.md'), 'utf8')
  const client = /### From a browser[\s\S]*?```js\n([\s\S]*?)```/.exec(docs)?.[1]
  assert.ok(client !== undefined, 'docs/events.md shows the client')

  const browser = await chromium.launch({ executablePath, args: chromiumArgs })
  t.after(() => browser.close())
  const page = await browser.newPage()
  await page.goto(`http://localhost:${(site.address() as AddressInfo).port}/`)
  await page.addScriptTag({ content: `${client}\nglobalThis.followChanges = followChanges` })
  const api = `http://127.0.0.1:${proxy.port}`

  const refused = await page.evaluate(async (api) => await new Promise<number>((resolve) => {
    const source = new EventSource(`${api}/events`)
    source.onerror = () => { resolve(source.readyState); source.close() }
  }), api)
  assert.equal(refused, 2, 'without a ticket EventSource gets a 401 and closes')

  await page.evaluate(async ({ api, token }) => {
    const seen: unknown[] = []
    Object.assign(globalThis, { seen })
    await (globalThis as unknown as { followChanges: (api: string, token: string, onEvent: (event: unknown) => void) => Promise<EventSource> }).followChanges(api, token, (event) => seen.push(event))
  }, { api, token })
  const create = async (name: string) => {
    const answer = await fetch(`http://127.0.0.1:${service.port}/users`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify({ name, email: `${name}@example.com` }) })
    assert.equal(answer.status, 201)
  }
  const seenIds = async () => await page.evaluate(() => (globalThis as unknown as { seen: Array<{ id: number }> }).seen.map((event) => event.id))
  const waitForIds = async (count: number) => {
    const until = Date.now() + 10_000
    while ((await seenIds()).length < count && Date.now() < until) await sleep(100)
  }
  // The stream opens a moment after its ticket: an event stored after the first is sent.
  await sleep(500)
  await create('ada')
  await waitForIds(1)
  assert.deepEqual(await seenIds(), [1])
  proxy.restore()
  await create('grace')
  await waitForIds(2)
  await create('edsger')
  await waitForIds(3)
  assert.deepEqual(await seenIds(), [1, 2, 3], 'each event once, across the drop: a new ticket, from the last id seen')
})
