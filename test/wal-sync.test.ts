import assert from 'node:assert/strict'
import fs from 'node:fs'
import { join } from 'node:path'
import { describe, test } from 'node:test'
import { setImmediate as nextTurn } from 'node:timers/promises'
import { sql } from 'kysely'
import { createDatabase, type DatabaseHandle } from '../src/db/database.js'
import { coordinateSyncs } from '../src/db/wal-sync.js'
import { postJson, temporaryFolder, testApp } from './helpers.js'

/** Syncs whose flushes each finish, or fail, when the test says so. */
function heldSyncs () {
  const pending: Array<{ finish: () => void, fail: (error: Error) => void }> = []
  const syncs = coordinateSyncs(async () => await new Promise<void>((resolve, reject) => pending.push({ finish: resolve, fail: reject })))
  return { syncs, pending }
}

async function settledWithin<T> (promise: Promise<T>, turns = 5): Promise<boolean> {
  let settled = false
  promise.then(() => { settled = true }, () => { settled = true })
  for (let i = 0; i < turns; i++) await nextTurn()
  return settled
}

describe('syncs of the WAL file', () => {
  test('nothing is flushed when no commit waits for the disk', async () => {
    const { syncs, pending } = heldSyncs()
    await syncs.untilOnDisk()
    assert.equal(pending.length, 0)
  })

  test('one flush at a time; commits noted during one wait for the next, which covers them all', async () => {
    const { syncs, pending } = heldSyncs()
    syncs.noteCommit()
    const first = syncs.untilOnDisk()
    syncs.noteCommit()
    const second = syncs.untilOnDisk()
    syncs.noteCommit()
    const third = syncs.untilOnDisk()
    assert.equal(pending.length, 1)

    pending[0]!.finish()
    await first
    assert.equal(await settledWithin(second), false)
    assert.equal(pending.length, 2, 'the second flush starts as the first ends')
    pending[1]!.finish()
    await Promise.all([second, third])
    assert.equal(pending.length, 2)
  })

  test('a failed flush fails the commits waiting for it, and the next wait flushes again', async () => {
    const { syncs, pending } = heldSyncs()
    syncs.noteCommit()
    const waiting = syncs.untilOnDisk()
    pending[0]!.fail(new Error('EIO'))
    await assert.rejects(waiting, /EIO/)

    const retried = syncs.untilOnDisk()
    assert.equal(pending.length, 2)
    pending[1]!.finish()
    await retried
  })
})

describe('on a SQLite file, clients hear of a commit only once it is on the disk', () => {
  test('the 201, and a read that sees the new user, wait for the WAL file to be synced', async (t) => {
    const app = await testApp(t, { DATABASE_URL: `sqlite:${join(temporaryFolder(t), 'app.db')}` })
    const held: Array<() => void> = []
    t.mock.method(fs, 'fdatasync', (_descriptor: number, callback: (error: null) => void) => { held.push(() => callback(null)) })

    const posting = postJson(app, '/users', { name: 'Ada', email: 'ada@example.com' })
    assert.equal(await settledWithin(posting, 20), false, 'no 201 before the sync')
    assert.equal(held.length, 1)
    const reading = app.inject('/users')
    assert.equal(await settledWithin(reading, 20), false, 'no read of the new user before the sync')

    held.shift()!()
    assert.equal((await posting).statusCode, 201)
    assert.equal((await reading).headers['x-total-count'], '1')
  })
})

describe('how a SQLite database file is opened', () => {
  async function pragma (db: DatabaseHandle['db'], name: string): Promise<unknown> {
    const { rows } = await sql<Record<string, unknown>>`select * from ${sql.raw(`pragma_${name}`)}`.execute(db)
    return rows[0]?.[name]
  }

  test('a file keeps a WAL, whose commits walSync brings to the disk', async (t) => {
    const { db, walSync } = await createDatabase({ dialect: 'sqlite', filename: join(temporaryFolder(t), 'app.db') })
    t.after(() => db.destroy())
    assert.equal(await pragma(db, 'journal_mode'), 'wal')
    assert.equal(await pragma(db, 'synchronous'), 1)
    assert.notEqual(walSync, undefined)
  })

  test('where SQLite cannot keep a WAL, each commit syncs its own journal', async (t) => {
    // An empty name opens a temporary database, which SQLite gives no WAL.
    const { db, walSync } = await createDatabase({ dialect: 'sqlite', filename: '' })
    t.after(() => db.destroy())
    assert.notEqual(await pragma(db, 'journal_mode'), 'wal')
    assert.equal(await pragma(db, 'synchronous'), 2)
    assert.equal(walSync, undefined)
  })
})
