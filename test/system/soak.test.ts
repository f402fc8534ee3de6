/** `npm run soak` on the bundle as shipped: a few seconds of mixed load, every acknowledged write stored. */
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { join } from 'node:path'
import { test } from 'node:test'
import { promisify } from 'node:util'
import { repositoryRoot } from '../process.js'

test('npm run soak runs the built service under mixed load: every 201 is a stored row, no 5xx', async () => {
  const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', join('scripts', 'soak.ts'), '--duration', '4', '--connections', '16'],
    { cwd: repositoryRoot, env: { PATH: process.env.PATH } })
  assert.match(stdout, /^201s \/ rows: {2}(\d+) acknowledged, \1 stored: equal$/m)
  const statuses = /^by status: {4}(.*)$/m.exec(stdout)?.[1] ?? ''
  assert.match(statuses, /201: \d+/)
  assert.doesNotMatch(statuses, /(^|, )(5\d\d|E[A-Z]+|network error):/, 'no 5xx and no failed request')
  assert.match(stdout, /^RSS growth: {3}-?[\d.]+% after warm-up \(bound 25%\): not judged in a run under 30 s$/m)
})
