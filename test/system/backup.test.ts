/**
 * `npm run backup`: a copy of the SQLite database, taken from the file while the service
 * writes to it.
 */
import assert from 'node:assert/strict'
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { test } from 'node:test'
import type SQLite from 'better-sqlite3'
import { postJsonOver, rawRequest, temporaryFolder } from '../helpers.js'
import { runScript, startService } from '../process.js'

const BetterSqlite3: typeof SQLite = createRequire(import.meta.url)('better-sqlite3')

const user = (i: number) => ({ name: `User${i}`, email: `user${i}@example.com` })

test('npm run backup copies one snapshot while the service writes: every user acknowledged before it began, a whole database a service runs on', async (t) => {
  const folder = temporaryFolder(t)
  const filename = join(folder, 'app.db')
  const service = await startService(t, { DATABASE_URL: `sqlite:${filename}` })
  for (let i = 0; i < 20; i++) assert.equal((await postJsonOver(service.port, '/users', user(i))).statusCode, 201)

  const writes = { going: true, acknowledged: 20 }
  const writer = (async () => {
    for (let wave = 0; writes.going; wave++) {
      const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => postJsonOver(service.port, '/users', user(1000 + wave * 10 + i))))
      assert.deepEqual(answers.map((answer) => answer.statusCode), Array(10).fill(201))
      writes.acknowledged += 10
    }
  })()
  while (writes.acknowledged < 100) await new Promise((resolve) => setTimeout(resolve, 10))
  const acknowledgedBefore = writes.acknowledged
  const backup = join(folder, 'backup.db')
  const result = await runScript('cli/backup.ts', { DATABASE_URL: `sqlite:${filename}` }, [backup])
  writes.going = false
  await writer
  assert.equal(result.code, 0, result.stderr)
  assert.equal(result.stdout, `Backed up ${filename} to ${backup}.\n`)
  assert.deepEqual(readdirSync(folder).filter((name) => name.includes('backup')), ['backup.db'], 'nothing is left beside it')

  const copy = new BetterSqlite3(backup, { readonly: true })
  const ids = copy.prepare('select id from users order by id').pluck().all() as number[]
  const counted = copy.prepare('select sum(total) from user_counts').pluck().get()
  assert.equal(copy.pragma('integrity_check', { simple: true }), 'ok')
  copy.close()
  assert.ok(ids.length >= acknowledgedBefore, `${ids.length} users in the copy, ${acknowledgedBefore} acknowledged before it began`)
  assert.ok(ids.length < writes.acknowledged, 'writes went on during the backup, and those after its snapshot are not in it')
  assert.deepEqual(ids, Array.from({ length: ids.length }, (_, i) => i + 1), 'one snapshot: every user up to one point, none after')
  assert.equal(counted, ids.length, 'the stored count agrees with the rows: both from the same snapshot')

  const restored = await startService(t, { DATABASE_URL: `sqlite:${backup}` })
  const list = await rawRequest(restored.port, { path: '/users?limit=1' })
  assert.equal(list.statusCode, 200)
  assert.equal(list.headers['x-total-count'], String(ids.length))
  assert.equal((await postJsonOver(restored.port, '/users', user(9999))).headers.location, `/users/${ids.length + 1}`)
  t.diagnostic(`${acknowledgedBefore} users acknowledged before the backup began, ${ids.length} in it, ${writes.acknowledged} by the end`)
})

test('npm run backup refuses with one line, writing nothing: an existing file, a database that is not there, PostgreSQL, in memory, no file named', async (t) => {
  const folder = temporaryFolder(t)
  const filename = join(folder, 'app.db')
  assert.equal((await runScript('cli/migrate.ts', { DATABASE_URL: `sqlite:${filename}` })).code, 0)
  const existing = join(folder, 'existing.db')
  writeFileSync(existing, 'keep me')

  const cases: Array<[string, string[], string]> = [
    [`sqlite:${filename}`, [existing], `${existing} already exists, and a backup never overwrites a file`],
    [`sqlite:${join(folder, 'missing.db')}`, [join(folder, 'copy.db')], `cannot open ${join(folder, 'missing.db')}: unable to open database file`],
    ['postgres://postgres@127.0.0.1:5432/test', [join(folder, 'copy.db')], 'DATABASE_URL is a PostgreSQL database: back it up with pg_dump (docs/deployment.md, Backups)'],
    ['sqlite::memory:', [join(folder, 'copy.db')], 'DATABASE_URL is an in-memory database: there is no file to back up'],
    [`sqlite:${filename}`, [], 'name the file to write: npm run backup -- <file>'],
    [`sqlite:${filename}`, [join(folder, 'no', 'such', 'folder', 'copy.db')], `${join(folder, 'no', 'such', 'folder')} does not exist`]
  ]
  for (const [url, args, message] of cases) {
    const result = await runScript('cli/backup.ts', { DATABASE_URL: url }, args)
    assert.equal(result.code, 1, message)
    assert.equal(result.stderr, `Backup failed: ${message}\n`)
  }
  assert.equal(readFileSync(existing, 'utf8'), 'keep me')
  assert.equal(existsSync(join(folder, 'missing.db')), false, 'no database is made where none was')
  assert.deepEqual(readdirSync(folder).sort(), ['app.db', 'existing.db'])
})
