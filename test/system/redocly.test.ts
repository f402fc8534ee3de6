import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { promisify } from 'node:util'
import { openApiDocument } from '../helpers.js'

/** The document under each setting that changes it: tokens and rate limiting off, and on. */
const documentSettings: Array<Record<string, string>> = [{ AUTH: 'off' }, { AUTH: 'all', JWT_SECRET: 'a-test-secret-that-is-long-enough-for-hs256', RATE_LIMIT_MAX: '10' }]

/**
 * The greeting, liveness, readiness and metrics take no parameter and no body, so they have no
 * 4xx answer unless tokens or rate limiting add one; declaring one to please this rule would
 * be untrue.
 */
const NO_CLIENT_ERROR = new Set(['/', '/health', '/ready', '/metrics'].map((path) => `#/paths/${path.replaceAll('/', '~1')}/get/responses`))

test('the OpenAPI document is clean under Redocly\'s recommended rules, whatever the settings', async (t) => {
  const folder = mkdtempSync(join(tmpdir(), 'openapi-'))
  t.after(() => rmSync(folder, { recursive: true, force: true }))
  const redocly = createRequire(import.meta.url).resolve('@redocly/cli/bin/cli.js')

  for (const settings of documentSettings) {
    const file = join(folder, 'openapi.json')
    writeFileSync(file, JSON.stringify(await openApiDocument(t, settings)))
    const { stdout } = await promisify(execFile)(process.execPath, [redocly, 'lint', file, '--extends=recommended', '--format=json'], {
      env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' }
    })
    const problems = JSON.parse(stdout).problems
      .filter((problem: { ruleId: string, location: Array<{ pointer: string }> }) =>
        !(problem.ruleId === 'operation-4xx-response' && NO_CLIENT_ERROR.has(problem.location[0]!.pointer)))
      .map((problem: { ruleId: string, message: string, location: Array<{ pointer: string }> }) => `${problem.ruleId} at ${problem.location[0]?.pointer}: ${problem.message}`)
    assert.deepEqual(problems, [], JSON.stringify(settings))
  }
})
