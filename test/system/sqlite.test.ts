/**
 * SQLite as the service runs it: on a worker thread, so that the event loop never waits for
 * the disk or for another process's lock; with WAL and synchronous=FULL, so that a commit
 * returns once it is on the disk.
 */
import assert from 'node:assert/strict'
import { execFileSync, spawn } from 'node:child_process'
import { once } from 'node:events'
import { chmodSync, readdirSync, renameSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { describe, test, type TestContext } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import type { Worker } from 'node:worker_threads'
import { CompiledQuery, sql } from 'kysely'
import type { Kysely } from 'kysely'
import { createDatabase } from '../../src/storage/database.js'
import { migrateToLatest } from '../../src/storage/migrate.js'
import type { Database } from '../../src/storage/schema.js'
import { openStorage } from '../../src/storage/storage.js'
import { forgetKeysBefore } from '../../src/users/idempotency-keys.js'
import { createUser, listUsers } from '../../src/users/repository.js'
import { userQuery } from '../../src/users/list-query.js'
import { captureLogs, getUntil, postJson, temporaryFolder, testApp, waitFor } from '../helpers.js'
import { fromSource, startService } from '../process.js'

async function pragma (db: Kysely<Database>, name: string): Promise<unknown> {
  const { rows } = await sql<Record<string, unknown>>`select * from ${sql.raw(`pragma_${name}`)}`.execute(db)
  return rows[0]?.[name]
}

/**
 * Another process that opens a transaction on the file with `begin` (SQL) and holds it until
 * the returned function is called.
 */
async function holdTransaction (t: TestContext, filename: string, begin: string): Promise<() => Promise<void>> {
  const holder = spawn(process.execPath, ['-e', `
    const database = new (require('better-sqlite3'))(${JSON.stringify(filename)})
    database.exec(${JSON.stringify(begin)})
    process.stdout.write('holding\\n')
    process.stdin.on('data', () => { database.exec('rollback'); process.exit(0) })`], { stdio: ['pipe', 'pipe', 'inherit'] })
  t.after(() => holder.kill('SIGKILL'))
  await once(holder.stdout, 'data')
  return async () => {
    holder.stdin.write('release\n')
    await once(holder, 'exit')
  }
}

/** SQLite's worker threads started while the test runs, in order. */
function startedWorkers (t: TestContext): Worker[] {
  const workers: Worker[] = []
  const started = (worker: Worker) => { if (worker.threadName === 'sqlite') workers.push(worker) }
  process.on('worker', started)
  t.after(() => process.off('worker', started))
  return workers
}

/** The slowest of repeated GET /health answers while `during` runs. */
async function slowestHealth (app: Awaited<ReturnType<typeof testApp>>, during: Promise<unknown>): Promise<number> {
  const state = { done: false }
  let slowest = 0
  during.finally(() => { state.done = true }).catch(() => {})
  while (!state.done) {
    const started = performance.now()
    assert.equal((await app.inject('/health')).statusCode, 200)
    slowest = Math.max(slowest, performance.now() - started)
    await sleep(50)
  }
  return slowest
}

describe('SQLite under the service', () => {
  test('a burst of requests for full pages is answered, and never runs a small heap out of memory', async (t) => {
    const filename = join(temporaryFolder(t), 'app.db')
    const { db } = await createDatabase({ dialect: 'sqlite', filename })
    await migrateToLatest(db, 'sqlite')
    const rows = Array.from({ length: 1000 }, (_, i) => ({ name: `${'x'.repeat(195)}${i}`, email: `user${i}@example.com` }))
    await db.insertInto('users').values(rows).execute()
    await db.destroy()

    // Each full page holds 1,000 names of about 200 characters. Read together, as one batch,
    // 800 such pages needed more than this heap.
    const service = await startService(t, { DATABASE_URL: `sqlite:${filename}` }, undefined, ['--max-old-space-size=96', ...fromSource('server.ts')])
    const statuses = await Promise.all(Array.from({ length: 800 }, async () => {
      const response = await fetch(`http://127.0.0.1:${service.port}/users?limit=1000`)
      await response.arrayBuffer()
      return response.status
    }))
    assert.deepEqual(new Set(statuses), new Set([200]))
    assert.equal(service.child.exitCode, null, service.stderr())
    assert.equal((await fetch(`http://127.0.0.1:${service.port}/users/1`)).status, 200)
  })

  test('pages and totals read while writes commit between batches: a total never counts fewer users than its page shows, and no write is lost', async (t) => {
    const silent = { error () {}, warn () {}, info () {} }
    const storage = await openStorage({ dialect: 'sqlite', filename: join(temporaryFolder(t), 'app.db') }, silent)
    t.after(() => storage.close())
    // More reads than one batch carries, and a write after every few, committed between batches.
    const pages = Array.from({ length: 300 }, (_, i) => {
      if (i % 10 === 0) createUser(storage.db, { name: 'Ada', email: 'ada@example.com' }).catch(() => {})
      return listUsers(storage.db, userQuery({ limit: 1000, offset: 0, sort: 'id' }))
    })
    for (const { users, total } of await Promise.all(pages)) assert.ok(users.length <= total!, `${users.length} users, total ${total}`)
    assert.equal((await listUsers(storage.db, userQuery({ limit: 1000, offset: 0, sort: 'id' }))).total, 30, 'every write committed')
  })

  test('should the SQLite worker stop, what it held answers 503 at once, and the next request reopens the file with every user on it', async (t) => {
    const workers = startedWorkers(t)
    const filename = join(temporaryFolder(t), 'app.db')
    const logs = captureLogs()
    const app = await testApp(t, { DATABASE_URL: `sqlite:${filename}`, LOG_LEVEL: 'info' }, logs.stream)
    assert.equal((await postJson(app, '/users', { name: 'Ada', email: 'ada@example.com' })).statusCode, 201)
    assert.equal(workers.length, 1)

    const started = performance.now()
    const held = Promise.all(Array.from({ length: 20 }, async (_, i) => (i % 2 === 0
      ? await app.inject('/users')
      : await postJson(app, '/users', { name: `Held${i}`, email: `held${i}@example.com` })).statusCode))
    await sleep(1)
    await workers[0]!.terminate()
    const statuses = await held
    const waited = performance.now() - started
    assert.ok(statuses.every((status) => [200, 201, 503].includes(status)), `answered ${statuses.join(' ')}`)
    assert.ok(waited < 2000, `what the worker held was answered after ${waited.toFixed(0)} ms, not at its 5 s deadline`)

    assert.equal((await app.inject('/ready')).statusCode, 200)
    assert.equal(workers.length, 2, 'a new worker opened the file')
    assert.deepEqual(logs.lines.filter((line) => /^the SQLite (worker|database)/.test(line.msg)).map((line) => line.msg),
      ['the SQLite worker stopped; the database will be reopened when needed', 'the SQLite database is open again'])
    assert.equal((await postJson(app, '/users', { name: 'Grace', email: 'grace@example.com' })).statusCode, 201)
    const names = (await app.inject('/users?limit=1000')).json().map((user: { name: string }) => user.name)
    assert.equal(names[0], 'Ada')
    assert.equal(names.at(-1), 'Grace')
    assert.equal(names.length, 2 + statuses.filter((status) => status === 201).length, 'every write answered 201 is there, and no other')
    t.diagnostic(`held by the stopped worker: ${statuses.join(' ')}, answered within ${waited.toFixed(0)} ms`)
  })

  test('should the SQLite worker stop while its file is gone, no empty file is made in its place: requests answer 503 until the file is back', async (t) => {
    const workers = startedWorkers(t)
    const folder = temporaryFolder(t)
    const backup = temporaryFolder(t)
    const filename = join(folder, 'app.db')
    const logs = captureLogs()
    const app = await testApp(t, { DATABASE_URL: `sqlite:${filename}`, LOG_LEVEL: 'info' }, logs.stream)
    assert.equal((await postJson(app, '/users', { name: 'Ada', email: 'ada@example.com' })).statusCode, 201)
    await workers[0]!.terminate()
    for (const file of readdirSync(folder)) renameSync(join(folder, file), join(backup, file))

    for (let i = 0; i < 3; i++) {
      assert.equal((await app.inject('/users/1')).statusCode, 503)
      assert.equal((await postJson(app, '/users', { name: 'Grace', email: 'grace@example.com' })).statusCode, 503)
    }
    assert.equal((await app.inject('/ready')).statusCode, 503)
    assert.deepEqual(readdirSync(folder), [], 'nothing was created where the database was')

    for (const file of readdirSync(backup)) renameSync(join(backup, file), join(folder, file))
    const found = await getUntil(app, '/users/1', 200, 3000)
    assert.equal(found.statusCode, 200, 'opened again once the file is back (tried at most once a second)')
    assert.equal(found.json().name, 'Ada')
    assert.deepEqual(logs.lines.filter((line) => line.msg.startsWith('the SQLite') || line.msg.startsWith(filename)).map((line) => line.msg), [
      'the SQLite worker stopped; the database will be reopened when needed',
      `${filename} could not be opened again; it will be tried again when needed, at most once a second`,
      'the SQLite database is open again'
    ], 'one line however many requests found it gone')
  })

  test('should the worker of an in-memory database stop, its requests answer 503 until a restart, since its data went with it', async (t) => {
    const workers = startedWorkers(t)
    const logs = captureLogs()
    const app = await testApp(t, { DATABASE_URL: 'sqlite::memory:', LOG_LEVEL: 'info' }, logs.stream)
    assert.equal((await postJson(app, '/users', { name: 'Ada', email: 'ada@example.com' })).statusCode, 201)
    await workers[0]!.terminate()
    assert.equal((await app.inject('/users/1')).statusCode, 503)
    assert.equal((await app.inject('/ready')).statusCode, 503)
    assert.equal(workers.length, 1, 'no empty database took its place')
    assert.ok(logs.lines.some((line) => /^the SQLite worker stopped; an in-memory database cannot be reopened/.test(line.msg)))
  })

  test('the wall clock stepped while a write waits for another process\'s lock: the write answers 503 at its deadline, and is never stored after it', async (t) => {
    const filename = join(temporaryFolder(t), 'app.db')
    const app = await testApp(t, { DATABASE_URL: `sqlite:${filename}` })
    assert.equal((await postJson(app, '/users', { name: 'Ada', email: 'ada@example.com' })).statusCode, 201)

    const release = await holdTransaction(t, filename, 'begin immediate')
    const wallClock = Date.now
    t.mock.method(Date, 'now', () => wallClock() + 3_600_000)
    const started = performance.now()
    const write = await postJson(app, '/users', { name: 'Grace', email: 'grace@example.com' })
    const waited = performance.now() - started
    t.mock.restoreAll()
    assert.equal(write.statusCode, 503)
    assert.ok(waited < 5500, `the write took ${waited.toFixed(0)} ms`)

    await release()
    const names = (await app.inject('/users')).json().map((user: { name: string }) => user.name)
    assert.deepEqual(names, ['Ada'], 'the write answered 503 was not committed once the lock was released')
  })

  test('a file is opened in WAL mode with synchronous=FULL', async (t) => {
    const { db } = await createDatabase({ dialect: 'sqlite', filename: join(temporaryFolder(t), 'app.db') })
    t.after(() => db.destroy())
    assert.equal(await pragma(db, 'journal_mode'), 'wal')
    assert.equal(await pragma(db, 'synchronous'), 2)
  })

  test('clearing Idempotency-Keys past their time reads the users that hold one, by age, not the whole table', async (t) => {
    const { db } = await createDatabase({ dialect: 'sqlite', filename: join(temporaryFolder(t), 'app.db') })
    t.after(() => db.destroy())
    await migrateToLatest(db, 'sqlite')
    const clearing = forgetKeysBefore(db, new Date().toISOString()).compile()
    const { rows } = await db.executeQuery(CompiledQuery.raw(`explain query plan ${clearing.sql}`, [...clearing.parameters]))
    assert.deepEqual(rows.map((row) => (row as { detail: string }).detail), ['SEARCH users USING INDEX users_keyed_by_age (created_at<?)'])
  })

  test('a read held open by another process (a backup, a sqlite3 shell) lets the WAL grow with the writes meanwhile, which one warning says; once it ends, the WAL shrinks back to 16 MiB', async (t) => {
    const filename = join(temporaryFolder(t), 'app.db')
    const logs = captureLogs()
    const app = await testApp(t, { DATABASE_URL: `sqlite:${filename}`, LOG_LEVEL: 'info' }, logs.stream)
    const walLines = () => logs.lines.filter((line) => /^the SQLite WAL/.test(line.msg)).map((line) => [line.level, line.msg.split(':')[0]])
    const endRead = await holdTransaction(t, filename, 'begin; select count(*) from users')
    const walBytes = () => statSync(`${filename}-wal`).size
    let written = 0
    const create = async () => assert.equal((await postJson(app, '/users', { name: 'Ada', email: `ada${written++}@example.com` })).statusCode, 201)
    while (walBytes() < 66 * 1024 * 1024) await create()
    await waitFor(() => walLines().length > 0, 2000)
    assert.deepEqual(walLines(), [[40, 'the SQLite WAL keeps growing']])
    await endRead()
    // The next commits checkpoint the WAL, now that no reader needs it, and start it again.
    for (let i = 0; i < 3; i++) await create()
    assert.ok(walBytes() <= 16 * 1024 * 1024, `the WAL holds ${walBytes()} bytes after ${written} writes`)
    await waitFor(() => walLines().length > 1, 2000)
    assert.deepEqual(walLines(), [[40, 'the SQLite WAL keeps growing'], [30, 'the SQLite WAL is small again']])
  })

  test('a database file or folder this process may not write: start-up stops, saying which and why, instead of serving with every write refused', async (t) => {
    // As root, which may write any file it can open, a file is made immutable (chattr +i) instead.
    const asRoot = process.getuid?.() === 0
    const forbidWrites = (path: string) => asRoot ? execFileSync('chattr', ['+i', path]) : chmodSync(path, 0o555)
    const allowWrites = (path: string) => asRoot ? execFileSync('chattr', ['-i', path]) : chmodSync(path, 0o755)
    for (const unwritable of ['file', 'folder'] as const) {
      const folder = temporaryFolder(t)
      const filename = join(folder, 'app.db')
      const { db } = await createDatabase({ dialect: 'sqlite', filename })
      await migrateToLatest(db, 'sqlite')
      await db.destroy()
      const path = unwritable === 'file' ? filename : folder
      forbidWrites(path)
      try {
        await assert.rejects(testApp(t, { DATABASE_URL: `sqlite:${filename}` }), (error: Error) => {
          const named = unwritable === 'file' ? `${filename} is not writable by this process` : `the folder ${folder} is not writable by this process`
          assert.ok(error.message.startsWith(`cannot use DATABASE_URL sqlite:${filename}: ${named}`), error.message)
          return true
        })
      } finally {
        allowWrites(path)
      }
      const app = await testApp(t, { DATABASE_URL: `sqlite:${filename}` })
      assert.equal((await postJson(app, '/users', { name: 'Ada', email: 'ada@example.com' })).statusCode, 201, 'starts once it may write')
    }
  })

  test('while another process holds the write lock: /health stays prompt, /ready and writes answer 503 in bounded time, and all recovers', async (t) => {
    const filename = join(temporaryFolder(t), 'app.db')
    const logs = captureLogs()
    const app = await testApp(t, { DATABASE_URL: `sqlite:${filename}`, LOG_LEVEL: 'info' }, logs.stream)
    assert.equal((await postJson(app, '/users', { name: 'Ada', email: 'ada@example.com' })).statusCode, 201)

    const release = await holdTransaction(t, filename, 'begin immediate')
    const timed = async <T>(work: Promise<T>) => { const started = performance.now(); const result = await work; return { result, ms: performance.now() - started } }
    const writing = timed(postJson(app, '/users', { name: 'Grace', email: 'grace@example.com' }))
    const checking = timed(app.inject('/ready'))
    const slowest = await slowestHealth(app, Promise.all([writing, checking]))

    const [write, ready] = [await writing, await checking]
    assert.equal(ready.result.statusCode, 503)
    assert.ok(ready.ms < 1200, `/ready took ${ready.ms} ms`)
    assert.equal(write.result.statusCode, 503)
    assert.deepEqual(write.result.json(), { error: 'Database unavailable', code: 'database_unavailable' })
    assert.equal(write.result.headers['retry-after'], '1')
    assert.ok(write.ms < 5500, `the write took ${write.ms} ms`)
    assert.ok(slowest < 100, `/health took up to ${slowest} ms`)
    t.diagnostic(`lock held: /ready 503 in ${ready.ms.toFixed(0)} ms, write 503 in ${write.ms.toFixed(0)} ms, slowest /health ${slowest.toFixed(1)} ms`)

    await release()
    assert.equal((await app.inject('/ready')).statusCode, 200)
    assert.equal((await postJson(app, '/users', { name: 'Edsger', email: 'edsger@example.com' })).statusCode, 201)
    const list = await app.inject('/users')
    assert.deepEqual(list.json().map((user: { name: string }) => user.name), ['Ada', 'Edsger'], 'the refused write was not stored')

    const outage = logs.lines.filter((line) => /^database (unavailable|available again)/.test(line.msg))
      .map((line) => `${line.operations} ${line.msg.replace(/:.*/, '')}`)
    for (const operations of ['reads', 'writes']) {
      assert.deepEqual(outage.filter((line) => line.startsWith(operations)), [`${operations} database unavailable`, `${operations} database available again`],
        'one line as it starts, one as it ends, for reads (/ready) and for writes')
    }
  })
})
