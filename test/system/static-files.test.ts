import assert from 'node:assert/strict'
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import net from 'node:net'
import { join } from 'node:path'
import { test, type TestContext } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { captureLogs, listeningApp, rawRequest, testApp } from '../helpers.js'
import { serverUnderOpenFileLimit, startService } from '../process.js'

/** A static folder with a secret file beside it (outside it) to try to reach. */
function staticFolder (t: TestContext): string {
  const base = mkdtempSync(join(tmpdir(), 'static-test-'))
  t.after(() => rmSync(base, { recursive: true, force: true }))
  const root = join(base, 'public')
  mkdirSync(join(root, 'docs'), { recursive: true })
  writeFileSync(join(base, 'secret.txt'), 'TOP SECRET')
  writeFileSync(join(root, 'index.html'), '<h1>home</h1>')
  writeFileSync(join(root, 'style.css'), 'body { color: red }')
  writeFileSync(join(root, 'docs', 'guide.txt'), 'a guide')
  writeFileSync(join(root, '.env'), 'JWT_SECRET=leaked')
  writeFileSync(join(root, 'health'), 'a file shadowed by the API')
  return root
}

test('the shipped public/index.html is served with its content type and links to the docs', async (t) => {
  const { port } = await listeningApp(t)
  const response = await rawRequest(port, { path: '/index.html' })
  assert.equal(response.statusCode, 200)
  assert.match(String(response.headers['content-type']), /^text\/html/)
  assert.match(response.body, /href="\/documentation"/)
})

test('files are served with their content types, ETag and Last-Modified, and revalidate to 304', async (t) => {
  const { port } = await listeningApp(t, { STATIC_DIR: staticFolder(t) })
  const css = await rawRequest(port, { path: '/style.css' })
  assert.equal(css.statusCode, 200)
  assert.match(String(css.headers['content-type']), /^text\/css/)
  assert.equal(css.body, 'body { color: red }')
  const etag = css.headers.etag as string
  assert.ok(etag)
  assert.ok(css.headers['last-modified'])

  const byEtag = await rawRequest(port, { path: '/style.css', headers: { 'if-none-match': etag } })
  assert.equal(byEtag.statusCode, 304)
  assert.equal(byEtag.body, '')
  const byDate = await rawRequest(port, { path: '/style.css', headers: { 'if-modified-since': css.headers['last-modified'] as string } })
  assert.equal(byDate.statusCode, 304)

  assert.equal((await rawRequest(port, { path: '/docs/guide.txt' })).body, 'a guide')
})

test('nothing outside the folder is reachable, however the path is encoded', async (t) => {
  const { port } = await listeningApp(t, { STATIC_DIR: staticFolder(t) })
  const attempts = [
    '/../secret.txt', '/docs/../../secret.txt', '/%2e%2e/secret.txt', '/%2E%2E%2Fsecret.txt',
    '/docs/%2e%2e/%2e%2e/secret.txt', '/..%2fsecret.txt', '/..%5csecret.txt', '/%252e%252e/secret.txt',
    '/docs/..%2f..%2fsecret.txt', '//secret.txt', '/.%2e/secret.txt', '/%c0%ae%c0%ae/secret.txt', '/secret.txt%00.html'
  ]
  for (const path of attempts) {
    const response = await rawRequest(port, { path })
    assert.ok(response.statusCode >= 400 && response.statusCode < 500, `${path} answered ${response.statusCode}`)
    assert.doesNotMatch(response.body, /TOP SECRET/, path)
    assert.equal(typeof JSON.parse(response.body).error, 'string', `${path} answers a JSON error`)
  }
})

test('a file or folder whose real path leaves STATIC_DIR (a symbolic link out) is never served; one line at start names it', async (t) => {
  const root = staticFolder(t)
  const outside = join(root, '..', 'outside')
  mkdirSync(outside)
  writeFileSync(join(outside, 'notes.txt'), 'TOP SECRET too')
  symlinkSync(join(root, '..', 'secret.txt'), join(root, 'passwd.txt'))
  symlinkSync(outside, join(root, 'linked'))
  symlinkSync(join(root, 'style.css'), join(root, 'alias.css'))
  const logs = captureLogs()
  const app = await testApp(t, { STATIC_DIR: root, LOG_LEVEL: 'info' }, logs.stream)
  for (const path of ['/passwd.txt', '/linked/notes.txt']) {
    const response = await app.inject(path)
    assert.equal(response.statusCode, 404, path)
    assert.doesNotMatch(response.body, /TOP SECRET/, path)
  }
  assert.equal((await app.inject('/alias.css')).statusCode, 200, 'a link that stays inside is served')
  const lines = logs.lines.filter((line) => /links that lead out/.test(line.msg))
  assert.equal(lines.length, 1)
  assert.deepEqual([...lines[0]!.skipped].sort(), ['linked', 'passwd.txt'])
})

test('dotfiles and directories are not served or listed', async (t) => {
  const { port } = await listeningApp(t, { STATIC_DIR: staticFolder(t) })
  for (const path of ['/.env', '/docs', '/docs/']) {
    const response = await rawRequest(port, { path })
    assert.equal(response.statusCode, 404, path)
    assert.deepEqual(JSON.parse(response.body), { error: 'Route not found', code: 'route_not_found' }, path)
  }
})

test('an API route wins over a file of the same path, or under its path', async (t) => {
  const root = staticFolder(t)
  mkdirSync(join(root, 'users', 'list'), { recursive: true })
  writeFileSync(join(root, 'users', 'list', 'all.html'), 'a file under /users')
  const { port } = await listeningApp(t, { STATIC_DIR: root })
  const response = await rawRequest(port, { path: '/health' })
  assert.deepEqual(JSON.parse(response.body), { status: 'ok' })
  const underUsers = await rawRequest(port, { path: '/users/list/all.html' })
  assert.equal(underUsers.statusCode, 404)
  assert.deepEqual(JSON.parse(underUsers.body), { error: 'Route not found', code: 'route_not_found' })
  const home = await rawRequest(port, { path: '/' })
  assert.deepEqual(JSON.parse(home.body), { hello: 'world' })
})

test('a missing file is the JSON 404 of any unknown route', async (t) => {
  const { port } = await listeningApp(t, { STATIC_DIR: staticFolder(t) })
  const response = await rawRequest(port, { path: '/missing.png' })
  assert.equal(response.statusCode, 404)
  assert.deepEqual(JSON.parse(response.body), { error: 'Route not found', code: 'route_not_found' })
})

test('the files served are those present at start: one added later is a 404 until a restart, and a removed one is a 404 under the pages\' security headers', async (t) => {
  const root = staticFolder(t)
  const { port } = await listeningApp(t, { STATIC_DIR: root })
  writeFileSync(join(root, 'added.txt'), 'new')
  const added = await rawRequest(port, { path: '/added.txt' })
  assert.equal(added.statusCode, 404)
  assert.deepEqual(JSON.parse(added.body), { error: 'Route not found', code: 'route_not_found' })

  rmSync(join(root, 'style.css'))
  const removed = await rawRequest(port, { path: '/style.css' })
  assert.equal(removed.statusCode, 404)
  assert.deepEqual(JSON.parse(removed.body), { error: 'Route not found', code: 'route_not_found' })
  assert.match(String(removed.headers['content-security-policy']), /^default-src 'self'/)
  assert.equal(removed.headers['x-frame-options'], 'SAMEORIGIN')

  const { port: restarted } = await listeningApp(t, { STATIC_DIR: root })
  assert.equal((await rawRequest(restarted, { path: '/added.txt' })).body, 'new')
})

test('a changed file is served at once, with its own ETag, and a large one in full', async (t) => {
  const root = staticFolder(t)
  const large = 'x'.repeat(200_000)
  writeFileSync(join(root, 'large.txt'), 'small')
  const { port } = await listeningApp(t, { STATIC_DIR: root })
  assert.equal((await rawRequest(port, { path: '/style.css' })).body, 'body { color: red }')

  writeFileSync(join(root, 'style.css'), 'body { color: blue; margin: 0 }')
  writeFileSync(join(root, 'large.txt'), large)

  const changed = await rawRequest(port, { path: '/style.css' })
  assert.equal(changed.body, 'body { color: blue; margin: 0 }')
  const revalidated = await rawRequest(port, { path: '/style.css', headers: { 'if-none-match': changed.headers.etag as string } })
  assert.equal(revalidated.statusCode, 304, 'the ETag served is the changed file\'s')
  const largeFile = await rawRequest(port, { path: '/large.txt' })
  assert.equal(largeFile.headers['content-length'], '200000')
  assert.equal(largeFile.body, large)
})

test('at most 64 files are sent at once: past it a page answers 503 with Retry-After, so that slow readers and pipelined requests never take the process\'s last open file', async (t) => {
  const root = staticFolder(t)
  // Larger than the kernel's socket buffers hold, so a client that does not read keeps it open.
  writeFileSync(join(root, 'large.bin'), Buffer.alloc(32 * 2 ** 20))
  // 172 connections, and 128 open files for everything else.
  const { nodeArgs, command } = serverUnderOpenFileLimit(300)
  const service = await startService(t, { STATIC_DIR: root }, undefined, nodeArgs, command)
  const request = 'GET /large.bin HTTP/1.1\r\nHost: localhost\r\n\r\n'
  const clients: net.Socket[] = []
  t.after(() => { for (const socket of clients) socket.destroy() })
  // 140 clients that ask for the file and do not read it, and one that pipelines 140 requests for it.
  for (let i = 0; i <= 140; i++) {
    const socket = net.connect(service.port, '127.0.0.1', () => { socket.write(i === 140 ? request.repeat(140) : request) })
    socket.pause()
    socket.on('error', () => {})
    clients.push(socket)
  }
  await sleep(1500)
  assert.equal(service.child.exitCode, null, 'the process lives on, though EMFILE keeps it from reading its memory figures')

  const refused = await rawRequest(service.port, { path: '/large.bin' })
  assert.equal(refused.statusCode, 503)
  assert.equal(refused.headers['retry-after'], '1')
  assert.deepEqual(JSON.parse(refused.body), { error: 'Too many files are being sent: try again shortly', code: 'too_many_files' })
  assert.equal((await rawRequest(service.port, { path: '/users' })).statusCode, 200, 'the API is answered meanwhile')
  assert.deepEqual(service.stdout.filter((line) => line.includes('EMFILE')), [], 'no file failed to open')

  for (const socket of clients) socket.destroy()
  await sleep(500)
  const served = await rawRequest(service.port, { path: '/large.bin' })
  assert.equal(served.statusCode, 200, 'once they are gone, the file is served again')
  assert.equal(served.body.length, 32 * 2 ** 20)
})
