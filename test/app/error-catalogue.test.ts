/**
 * The error catalogue is the one list of refusals: docs/errors.md's table is checked against it
 * here, every code is raised somewhere, and `/problems/{code}` describes each.
 */
import assert from 'node:assert/strict'
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import { ERROR_CODES, ERRORS, type Refusal } from '../../src/http/error-catalogue.js'
import { testApp } from '../helpers.js'
import { repositoryRoot } from '../process.js'

/** docs/errors.md's rows: code, status cell, retry, and the `error` cell. */
function documentedRows (): Map<string, { status: string, retry: string, error: string }> {
  const markdown = readFileSync(join(repositoryRoot, 'docs/errors.md'), 'utf8')
  const rows = new Map<string, { status: string, retry: string, error: string }>()
  for (const match of markdown.matchAll(/^\| `([a-z0-9_]+)` \| ([^|]+) \| (yes|no) \| .* \| (`.*) \|$/gm)) {
    rows.set(match[1]!, { status: match[2]!, retry: match[3]!, error: match[4]! })
  }
  return rows
}

test('docs/errors.md has one row for every code of the catalogue, with its status, whether a retry may succeed, and its message', () => {
  const rows = documentedRows()
  assert.deepEqual([...rows.keys()], ERROR_CODES, 'the same codes, in the same order')
  for (const code of ERROR_CODES) {
    const refusal: Refusal = ERRORS[code]
    const row = rows.get(code)!
    assert.ok(row.status.startsWith(String(refusal.status)), `${code} is ${refusal.status}; the row says ${row.status}`)
    if (refusal.retryAfter !== undefined) assert.match(row.status, new RegExp(`Retry-After: ${refusal.retryAfter}`), code)
    assert.equal(row.retry, refusal.retryable ? 'yes' : 'no', code)
    assert.ok(row.error.startsWith(`\`${refusal.message}\``), `${code}'s message is \`${refusal.message}\`; the row says ${row.error}`)
  }
})

test('every code of the catalogue is raised somewhere in the service, and a message with placeholders has a title of its own', () => {
  const sources = (folder: string): string[] => readdirSync(folder, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? sources(join(folder, entry.name)) : entry.name.endsWith('.ts') ? [readFileSync(join(folder, entry.name), 'utf8')] : [])
  const code = sources(join(repositoryRoot, 'src')).filter((text) => !text.includes('export const ERRORS = {')).join('\n')
  for (const name of ERROR_CODES) {
    assert.match(code, new RegExp(`'${name}'`), `${name} is raised`)
    const refusal: Refusal = ERRORS[name]
    if (refusal.message.includes('{')) assert.ok(refusal.title !== undefined, `${name} has a title`)
  }
})

test('/problems/{code} describes each code as the catalogue has it, and no other', async (t) => {
  const app = await testApp(t)
  for (const code of ERROR_CODES) {
    const answer = await app.inject(`/problems/${code}`)
    assert.equal(answer.statusCode, 200, code)
    const refusal: Refusal = ERRORS[code]
    assert.deepEqual(answer.json(), {
      code,
      status: refusal.status,
      title: refusal.title ?? refusal.message,
      retryable: refusal.retryable,
      ...(refusal.retryAfter !== undefined && { retry_after: refusal.retryAfter })
    })
  }
  assert.deepEqual((await app.inject('/problems/constructor')).json(), { error: 'Route not found', code: 'route_not_found' })
})
