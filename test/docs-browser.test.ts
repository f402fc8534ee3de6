import assert from 'node:assert/strict'
import { existsSync } from 'node:fs'
import { test } from 'node:test'
import { chromium, type Page } from 'playwright-core'
import { rawRequest } from './helpers.js'
import { runScript, startService } from './process.js'

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
  return { status: response.status(), authorization: response.request().headers().authorization }
}

test('the docs page works in a real browser under its CSP: Authorize with a token from npm run token, then call a protected route', { skip }, async (t) => {
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

  assert.deepEqual(await executeCreateUser(page, 'anonymous'), { status: 401, authorization: undefined }, 'without a token the protected route refuses')

  await page.locator('button.authorize').first().click()
  const modal = page.locator('.modal-ux')
  await modal.locator('input[type=text]').fill(token)
  await modal.locator('button.authorize').click()
  await modal.locator('button.btn-done').click()

  assert.deepEqual(await executeCreateUser(page, 'reader'), { status: 201, authorization: `Bearer ${token}` }, 'with the token it is accepted')
  await operation.locator('.live-responses-table tr.response .response-col_status', { hasText: '201' }).waitFor()
  const stored = await rawRequest(service.port, { path: '/users' })
  assert.deepEqual(JSON.parse(stored.body), [{ id: 1, name: 'reader' }])
  assert.deepEqual(problems.filter((problem) => !/401/.test(problem)), [], 'no console error, failed or external request')
})
