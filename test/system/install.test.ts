/**
 * The production install docs/deployment.md gives, `npm ci && npm prune --omit=dev`, then `npm start`, in a fresh copy
 * of the repository: the files git tracks, and those it would track, as they are now.
 */
import assert from 'node:assert/strict'
import { execFile, execFileSync, spawn } from 'node:child_process'
import { once } from 'node:events'
import { cpSync, existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { delimiter, dirname, join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { promisify } from 'node:util'
import { postJsonOver, rawRequest } from '../helpers.js'
import { repositoryRoot, signalGroup, startService } from '../process.js'

/** A Node older than the service supports (the README's first lines), to see it refused. */
const unsupportedNode = process.env.TEST_UNSUPPORTED_NODE

function freshCopy (): string {
  const folder = mkdtempSync(join(tmpdir(), 'service-install-'))
  const files = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: repositoryRoot, encoding: 'utf8' })
  for (const file of files.split('\0')) {
    if (file !== '' && existsSync(join(repositoryRoot, file))) cpSync(join(repositoryRoot, file), join(folder, file))
  }
  return folder
}

describe('a production install: npm ci, npm prune --omit=dev, npm start', () => {
  // npm and the `node` its scripts run are this test's own Node, whatever else PATH holds.
  const env = { PATH: `${dirname(process.execPath)}${delimiter}${process.env.PATH ?? ''}` }
  // npm reaches the registry as it does here (proxies, certificates), without the settings
  // of the `npm test` that runs this file.
  const installEnv = { ...Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('npm_'))), ...env }
  let folder = ''
  let installLog = ''

  before(async () => {
    folder = freshCopy()
    for (const args of [['ci', '--no-audit', '--no-fund', '--loglevel', 'info'], ['prune', '--omit=dev', '--no-audit', '--no-fund']]) {
      const npm = spawn('npm', args, { cwd: folder, env: installEnv, stdio: ['ignore', 'pipe', 'pipe'] })
      npm.stdout.on('data', (chunk) => { installLog += String(chunk) })
      npm.stderr.on('data', (chunk) => { installLog += String(chunk) })
      const [code] = await once(npm, 'close')
      assert.equal(code, 0, installLog)
    }
  }, { timeout: 300_000 })
  after(() => { if (folder !== '') rmSync(folder, { recursive: true, force: true }) })

  test('keeps only the packages the bundle loads, compiles nothing, and builds the service', () => {
    for (const devDependency of ['typescript', 'tsx', 'eslint', 'esbuild', 'fastify', '@fastify/swagger-ui']) {
      assert.ok(!existsSync(join(folder, 'node_modules', devDependency)), `${devDependency} is not kept`)
    }
    for (const loaded of ['better-sqlite3', 'pg']) assert.ok(existsSync(join(folder, 'node_modules', loaded)), `${loaded} is kept`)
    assert.doesNotMatch(installLog, /node-gyp/, 'better-sqlite3 comes prebuilt: no native compile')
    for (const built of ['dist/server.js', 'dist/cli/migrate.js', 'dist/cli/token.js', 'dist/cli/backup.js']) {
      assert.ok(existsSync(join(folder, built)), `${built} is built at install time`)
    }
  })

  test('npm start serves the API and the docs, npm run backup copies its database, and it stops on SIGTERM', async (t) => {
    const service = await startService(t, { ...env, DATABASE_URL: `sqlite:${join(folder, 'data', 'app.db')}` }, folder, ['start'], 'npm')
    const created = await postJsonOver(service.port, '/users', { name: 'Ada', email: 'ada@example.com' })
    assert.equal(created.statusCode, 201)
    const found = await rawRequest(service.port, { path: created.headers.location as string })
    assert.deepEqual(JSON.parse(found.body), { id: '1', name: 'Ada' })
    assert.equal((await rawRequest(service.port, { path: '/documentation/static/swagger-ui.css' })).statusCode, 200, 'Swagger UI finds its files')
    const backedUp = await promisify(execFile)('npm', ['run', '-s', 'backup', '--', join('data', 'backup.db')],
      { cwd: folder, env: { ...installEnv, DATABASE_URL: `sqlite:${join(folder, 'data', 'app.db')}` } })
    assert.match(backedUp.stdout, /^Backed up .*app\.db to data\/backup\.db\.\n$/, 'npm run backup works from the installed package')
    // As a terminal or a process manager would, to npm and the service it started alike.
    signalGroup(service.child, 'SIGTERM')
    await once(service.child.stdout!, 'close')
    assert.match(service.stdout.join('\n'), /"shutting down: finishing requests in flight"/)
  })

  test('on a Node older than 22.19 the service stops at once with one line naming the Node it needs', {
    skip: unsupportedNode === undefined ? 'TEST_UNSUPPORTED_NODE (the path of, say, a Node 20 binary) is not set' : false
  }, async () => {
    for (const entry of ['dist/server.js', 'dist/cli/migrate.js', 'dist/cli/token.js', 'dist/cli/backup.js']) {
      const result = await promisify(execFile)(unsupportedNode as string, [entry], { cwd: folder, env: { DATABASE_URL: 'sqlite::memory:' } })
        .then(() => assert.fail(`${entry} ran on an unsupported Node`), (error: { code: number, stdout: string, stderr: string }) => error)
      assert.equal(result.code, 1)
      assert.equal(result.stdout, '')
      assert.match(result.stderr, /^Node\.js \d+\.\d+\.\d+ is not supported: install Node\.js 22\.19 or later \(22, 24 or 26; 26 recommended, see \.nvmrc\)\.\n$/)
    }
  })

  test('npm install on a Node older than 22.19 stops at once with npm\'s one line, and installs nothing', {
    skip: unsupportedNode === undefined ? 'TEST_UNSUPPORTED_NODE (the path of, say, a Node 20 binary) is not set' : false
  }, async () => {
    const copy = freshCopy()
    try {
      const npmCli = execFileSync('sh', ['-c', 'readlink -f "$(command -v npm)"'], { encoding: 'utf8' }).trim()
      const refused = await promisify(execFile)(unsupportedNode as string, [npmCli, 'install', '--no-audit', '--no-fund'], { cwd: copy, env: installEnv })
        .then(() => assert.fail('npm install went through on an unsupported Node'), (error: { code: number, stderr: string }) => error)
      assert.notEqual(refused.code, 0)
      assert.match(refused.stderr, /EBADENGINE/)
      assert.equal(existsSync(join(copy, 'node_modules')), false)
    } finally {
      rmSync(copy, { recursive: true, force: true })
    }
  })
})
