/**
 * The README's commands that no other test runs: `npm run dev`, `npm run openapi` and
 * `npm run bench`, each run as a developer would, for a short while (CI runs `npm run coverage`).
 */
import assert from 'node:assert/strict'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { rawRequest, temporaryFolder } from '../helpers.js'
import { installed, repositoryRoot, runNode, signalGroup, startService } from '../process.js'

test('npm run dev serves the service from src/ and stops on SIGTERM', async (t) => {
  const service = await startService(t, { DATABASE_URL: 'sqlite::memory:' }, undefined, ['run', 'dev'], 'npm')
  assert.deepEqual(JSON.parse((await rawRequest(service.port, { path: '/' })).body), { hello: 'world' })
  signalGroup(service.child, 'SIGTERM')
  const exit = await Promise.race([service.exited, sleep(10_000).then(() => 'still running')])
  assert.notEqual(exit, 'still running')
})

test('npm run openapi writes the served document to openapi.json, which is the committed one', async () => {
  const file = join(repositoryRoot, 'openapi.json')
  const committed = readFileSync(file, 'utf8')
  const run = await runNode(['run', 'openapi'], {}, 'npm')
  assert.equal(run.code, 0, run.stderr)
  assert.match(run.stdout, /Wrote .*openapi\.json/)
  assert.equal(readFileSync(file, 'utf8'), committed)
})

test('npm run bench measures every server on a route, gives no ratio to a server without the route, and writes its report where it is told', { skip: installed('wrk') ? false : 'wrk is not installed (apt-get install wrk)' }, async (t) => {
  const out = temporaryFolder(t)
  const run = await runNode(['run', 'bench', '--', '--duration', '1', '--rounds', '1', '--warmup', '0', '--big', '0', '--only', 'GET /custom,GET /index.html', '--out', out], {}, 'npm')
  assert.equal(run.code, 0, run.stderr.slice(-2000))
  assert.ok(existsSync(join(out, 'benchmark-run.svg')))
  const report = readFileSync(join(out, 'benchmark-run.md'), 'utf8')
  for (const server of ['the service', 'bare node:http (baseline)', 'plain Fastify', 'plain Fastify + SQLite', 'Fastify + plugins']) {
    assert.match(report, new RegExp(`^\\| ${server.replace(/[+()]/g, '\\$&')} \\| \\d+`, 'm'), server)
  }
  assert.match(report, /^\| GET \/custom \| \d+ \|/m)
  // Fastify + plugins serves no files: its 404s are no yardstick for the service's file.
  assert.match(report, /^\| GET \/index\.html \|(?:[^|]*\|){6} \d+ \| — \(\d+ other answers\) \|/m)
})
